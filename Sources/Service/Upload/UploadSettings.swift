import Foundation
import ShutterbugCore

/// Where and how photos go off the card: an S3-compatible bucket, the key each file takes, how
/// many transfers at once and how fast, and whether the card's copy is freed once the
/// object's checksum is confirmed.
public struct UploadSettings: Sendable, Hashable {
    /// `http(s)://host[:port]` of the store (`https://s3.eu-west-1.amazonaws.com`, a Garage or
    /// SeaweedFS on the site's network).
    public var endpoint: String
    public var bucket: String
    public var region: String
    public var credentials: S3Credentials
    public var keyTemplate: KeyTemplate
    /// Transfers at once, 1...16.
    public var maxInFlight: Int
    /// Bytes a second for all transfers together (nil: no limit).
    public var bandwidth: Int?
    /// Files larger than this go in parts of this size (5 MiB...1 GiB, S3's smallest part 5 MiB).
    public var partSize: Int
    public var deleteAfterUpload: Bool
    /// Backoff after a failure: `base`·2^(n-1), capped, less up to half at random (jitter).
    public var retryBase: Duration
    public var retryCap: Duration

    public static let defaultPartSize = 16 << 20
    public static let partSizes = (5 << 20)...(1 << 30)
    public static let inFlightRange = 1...16

    public init(endpoint: String, bucket: String, region: String = "us-east-1", credentials: S3Credentials,
                keyTemplate: KeyTemplate = .default, maxInFlight: Int = 2, bandwidth: Int? = nil, partSize: Int = defaultPartSize,
                deleteAfterUpload: Bool = false, retryBase: Duration = .seconds(2), retryCap: Duration = .seconds(300)) throws {
        guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), let host = url.host, !host.isEmpty else {
            throw ShutterbugError(.invalidArgument, "the upload endpoint '\(endpoint)' is not an http:// or https:// URL (e.g. https://s3.eu-west-1.amazonaws.com, http://garage.local:3900)")
        }
        guard url.path.isEmpty || url.path == "/", url.query == nil else {
            throw ShutterbugError(.invalidArgument, "the upload endpoint '\(endpoint)' must be the store's address only (no path or query): the bucket is --upload-bucket")
        }
        guard url.user == nil, url.password == nil else {
            throw ShutterbugError(.invalidArgument, "the upload endpoint must not carry keys: give them in --upload-credentials-file or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
        }
        try Self.validate(bucket: bucket)
        guard !region.isEmpty, region.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
            throw ShutterbugError(.invalidArgument, "the upload region '\(region)' must be letters, digits and '-' (e.g. us-east-1, garage)")
        }
        guard Self.inFlightRange.contains(maxInFlight) else {
            throw ShutterbugError(.invalidArgument, "--upload-max-in-flight must be within \(Self.inFlightRange.lowerBound)...\(Self.inFlightRange.upperBound), not \(maxInFlight)")
        }
        if let bandwidth, bandwidth < 16 << 10 {
            throw ShutterbugError(.invalidArgument, "--upload-bandwidth must be 16 KiB/s or more (e.g. 2M for 2 MiB/s), not \(bandwidth) bytes/s")
        }
        guard Self.partSizes.contains(partSize) else {
            throw ShutterbugError(.invalidArgument, "--upload-part-size must be within 5M...1G (S3's parts are 5 MiB at least), not \(partSize) bytes")
        }
        self.endpoint = scheme + "://" + host + (url.port.map { ":\($0)" } ?? "")
        self.bucket = bucket
        self.region = region
        self.credentials = credentials
        self.keyTemplate = keyTemplate
        self.maxInFlight = maxInFlight
        self.bandwidth = bandwidth
        self.partSize = partSize
        self.deleteAfterUpload = deleteAfterUpload
        self.retryBase = retryBase
        self.retryCap = retryCap
    }

    /// S3's bucket names: 3–63 of a–z, 0–9, '.', '-', beginning and ending with a letter or digit.
    static func validate(bucket: String) throws {
        let ok = (3...63).contains(bucket.count) && bucket.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "." || $0 == "-" }
            && bucket.first!.isASCII && (bucket.first!.isLetter || bucket.first!.isNumber) && (bucket.last!.isLetter || bucket.last!.isNumber)
        guard ok else {
            throw ShutterbugError(.invalidArgument, "the bucket name '\(bucket)' is not one S3 takes: 3 to 63 of a-z, 0-9, '.' and '-', beginning and ending with a letter or digit")
        }
    }

    /// "2M", "512k", "1G", "123456" (bytes), as `--upload-bandwidth` and `--upload-part-size` take them.
    public static func parseBytes(_ text: String, what: String) throws -> Int {
        let t = text.trimmingCharacters(in: .whitespaces)
        let units: [(String, Int)] = [("gib", 1 << 30), ("mib", 1 << 20), ("kib", 1 << 10), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10), ("b", 1)]
        let lower = t.lowercased()
        for (suffix, scale) in units where lower.hasSuffix(suffix) {
            if let v = Double(lower.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)), v > 0, v * Double(scale) < 1e15 { return Int(v * Double(scale)) }
        }
        if let v = Int(t), v > 0 { return v }
        throw ShutterbugError(.invalidArgument, "\(what) '\(text)' is not a size: give bytes, or a number with k, M or G (e.g. 2M)")
    }

    public var bucketClient: S3Bucket {
        S3Bucket(endpoint: endpoint, bucket: bucket, region: region, credentials: credentials,
                 maxSendBytesPerSecond: bandwidth.map { max(16 << 10, $0 / maxInFlight) })
    }
}

/// An object's key from the file: `{path}` (its path in the output folder, which already
/// carries the name template's date, time, capture and step), `{name}` (its file name),
/// `{folder}` (the output folder's own name), `{host}` (this machine's name). `{path}` is
/// required: it is what makes two files' keys differ.
public struct KeyTemplate: Sendable, Hashable, CustomStringConvertible {
    public var pattern: String
    public static let tokens = ["path", "name", "folder", "host"]
    public static let `default` = try! KeyTemplate("{host}/{path}")

    public init(_ pattern: String) throws {
        var rest = Substring(pattern)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw ShutterbugError(.invalidArgument, "the key template '\(pattern)' has a '{' without '}'")
            }
            let token = String(rest[rest.index(after: open)..<close])
            guard Self.tokens.contains(token) else {
                throw ShutterbugError(.invalidArgument, "the key template '\(pattern)' has the unknown token {\(token)}; known: \(Self.tokens.map { "{\($0)}" }.joined(separator: ", "))")
            }
            rest = rest[rest.index(after: close)...]
        }
        guard pattern.contains("{path}") else {
            throw ShutterbugError(.invalidArgument, "the key template '\(pattern)' needs {path} (the file's path in the output folder), so no two files share a key")
        }
        guard !pattern.hasPrefix("/"), !pattern.split(separator: "/").contains(".."), pattern.utf8.count <= 512 else {
            throw ShutterbugError(.invalidArgument, "the key template '\(pattern)' must not begin with '/' or contain '..'")
        }
        self.pattern = pattern
    }

    public var description: String { pattern }

    /// The key of the file at `relative` in `folder`.
    public func render(relative: String, folder: String, host: String) -> String {
        let name = relative.split(separator: "/").last.map(String.init) ?? relative
        let folderName = folder.split(separator: "/").last.map(String.init) ?? folder
        return pattern.replacingOccurrences(of: "{path}", with: relative).replacingOccurrences(of: "{name}", with: name)
            .replacingOccurrences(of: "{folder}", with: folderName).replacingOccurrences(of: "{host}", with: host)
    }

    public static var hostName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "shutterbug" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "shutterbug" : name
    }
}
