import CCurl
import Foundation
import HTTPTransfer
import ShutterbugCore

/// Keys for AWS Signature V4: from a file (`ACCESS:SECRET` on one line, or the AWS CLI's
/// `aws_access_key_id = …` / `aws_secret_access_key = …`) or the environment
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`). Never printed: `description` hides them.
public struct S3Credentials: Sendable, Hashable, CustomStringConvertible {
    public var accessKey: String
    public var secretKey: String

    public init(accessKey: String, secretKey: String) {
        self.accessKey = accessKey
        self.secretKey = secretKey
    }

    public var description: String { "access key \(accessKey.prefix(4))…" }

    /// - Throws: `.invalidArgument` naming the file and what it lacks (never its contents).
    public static func load(file path: String) throws -> S3Credentials {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ShutterbugError(.invalidArgument, "cannot read the upload credentials file \(path)")
        }
        return try parse(text, source: path)
    }

    static func parse(_ text: String, source: String) throws -> S3Credentials {
        var access: String?, secret: String?
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix("[") { continue }
            if let eq = line.firstIndex(of: "=") {
                let name = line[..<eq].trimmingCharacters(in: .whitespaces).lowercased()
                let value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
                if name == "aws_access_key_id" || name == "access_key" || name == "access-key" { access = value }
                if name == "aws_secret_access_key" || name == "secret_key" || name == "secret-key" { secret = value }
            } else if let colon = line.firstIndex(of: ":"), access == nil {
                access = String(line[..<colon])
                secret = String(line[line.index(after: colon)...])
            }
        }
        guard let access, !access.isEmpty, let secret, !secret.isEmpty else {
            throw ShutterbugError(.invalidArgument, "the upload credentials file \(source) has no access key and secret: give 'ACCESS_KEY:SECRET_KEY' on one line, or aws_access_key_id = … and aws_secret_access_key = … lines")
        }
        return S3Credentials(accessKey: access, secretKey: secret)
    }

    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, when both are set.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> S3Credentials? {
        guard let a = environment["AWS_ACCESS_KEY_ID"], !a.isEmpty, let s = environment["AWS_SECRET_ACCESS_KEY"], !s.isEmpty else { return nil }
        return S3Credentials(accessKey: a, secretKey: s)
    }
}

/// What an object store answered that was not success: its HTTP status and S3 error code
/// (`SignatureDoesNotMatch`, `NoSuchBucket`, `BadDigest`…), or no answer at all.
public struct S3Error: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// No connection, a reset, a timeout: the network or the store is away.
        case unreachable
        /// The keys or the bucket's policy refused us (403), or no such bucket (404).
        case refused
        /// The store is busy or failing (5xx, 429, SlowDown): try again later.
        case busy
        /// The store refused this request (400s other than the above): the bytes or the key.
        case rejected
    }

    public var kind: Kind
    public var status: Int
    public var code: String?
    public var message: String

    public var description: String {
        switch kind {
        case .unreachable: "the object store cannot be reached: \(message)"
        default: "the object store answered \(status)\(code.map { " \($0)" } ?? ""): \(message)"
        }
    }

    static func from(_ response: HTTPTransfer.Response, doing what: String) -> S3Error {
        let text = String(decoding: response.body, as: UTF8.self)
        let code = S3XML.first("Code", in: text)
        let message = S3XML.first("Message", in: text) ?? (text.isEmpty ? (response.status == 403
            ? "refused with no reason given (a HEAD carries none): the keys, or the bucket's policy" : "no message") : String(text.prefix(200)))
        let kind: Kind = switch (response.status, code) {
        case (_, "SlowDown"), (_, "RequestTimeout"), (_, "InternalError"), (429, _), (500...599, _): .busy
        case (403, _), (401, _), (_, "NoSuchBucket"), (_, "InvalidAccessKeyId"), (_, "SignatureDoesNotMatch"), (_, "AccessDenied"): .refused
        default: .rejected
        }
        return S3Error(kind: kind, status: response.status, code: code, message: "\(what): \(message)")
    }
}

/// The few things read out of S3's XML answers (no XML library for four tags).
enum S3XML {
    static func all(_ tag: String, in text: String) -> [String] {
        var out: [String] = []
        var rest = Substring(text)
        while let open = rest.range(of: "<\(tag)>"), let close = rest[open.upperBound...].range(of: "</\(tag)>") {
            out.append(unescape(String(rest[open.upperBound..<close.lowerBound])))
            rest = rest[close.upperBound...]
        }
        return out
    }

    static func first(_ tag: String, in text: String) -> String? { all(tag, in: text).first }

    static func unescape(_ s: String) -> String {
        s.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'").replacingOccurrences(of: "&lt;", with: "<")
            .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&#34;", with: "\"").replacingOccurrences(of: "&amp;", with: "&")
    }
}

/// One bucket of an S3-compatible store (AWS, Garage, SeaweedFS, Ceph, MinIO), addressed by
/// path (`ENDPOINT/BUCKET/KEY`, which every one of them takes), each request signed with AWS
/// Signature V4 by libcurl. Bodies go as `UNSIGNED-PAYLOAD` with a `Content-MD5` the store
/// checks: the bytes are hashed once, and a file is streamed from the disk, never held whole.
public struct S3Bucket: Sendable {
    public var endpoint: String
    public var bucket: String
    public var region: String
    public var credentials: S3Credentials
    /// Bytes a second each transfer may send (nil: no limit).
    public var maxSendBytesPerSecond: Int?
    public var timeout: Duration = .seconds(600)
    /// A request that moves no byte for this long is cut and tried again: a store that took a
    /// file whole and never answered (SeaweedFS restarting) held a transfer, and the queue's
    /// drain, for the whole `timeout`.
    public var stallTimeout: Duration = .seconds(60)

    public init(endpoint: String, bucket: String, region: String, credentials: S3Credentials, maxSendBytesPerSecond: Int? = nil) {
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.bucket = bucket
        self.region = region
        self.credentials = credentials
        self.maxSendBytesPerSecond = maxSendBytesPerSecond
    }

    /// A key's path in a URL as SigV4 canonicalises it: every byte but the unreserved ones and
    /// `/` percent-encoded.
    static func encode(_ s: String, keepSlash: Bool) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(Character(UnicodeScalar(b)))
            case UInt8(ascii: "/") where keepSlash: out.append("/")
            default: out += String(format: "%%%02X", b)
            }
        }
        return out
    }

    /// The URL of `key` with `query` (its parameters sorted, as the signature's canonical
    /// query string must be: libcurl signs the query as it is given).
    func url(_ key: String?, _ query: [(String, String)] = []) -> String {
        var u = endpoint + "/" + Self.encode(bucket, keepSlash: false)
        if let key { u += "/" + Self.encode(key, keepSlash: true) }
        if !query.isEmpty {
            u += "?" + query.sorted { $0.0 < $1.0 }.map { "\(Self.encode($0.0, keepSlash: false))=\(Self.encode($0.1, keepSlash: false))" }.joined(separator: "&")
        }
        return u
    }

    func request(_ method: String, _ key: String?, query: [(String, String)] = [], headers: [(name: String, value: String)] = [],
                 body: HTTPTransfer.Request.Body = .none) -> HTTPTransfer.Request {
        HTTPTransfer.Request(method: method, url: url(key, query), headers: [("x-amz-content-sha256", "UNSIGNED-PAYLOAD")] + headers, body: body,
                             signature: .init(region: region, accessKey: credentials.accessKey, secretKey: credentials.secretKey),
                             connectTimeout: .seconds(10), timeout: timeout, maxSendBytesPerSecond: maxSendBytesPerSecond,
                             stallTimeout: stallTimeout)
    }

    func perform(_ r: HTTPTransfer.Request, doing what: String, lowPriority: Bool = true) async throws -> HTTPTransfer.Response {
        let response: HTTPTransfer.Response
        do {
            response = try await HTTPTransfer.perform(r, lowPriority: lowPriority)
        } catch let f as HTTPTransfer.Failure {
            if f.cancelled { throw CancellationError() }
            throw S3Error(kind: .unreachable, status: 0, code: nil, message: "\(what): \(f.message)")
        }
        guard (200..<300).contains(response.status) else { throw S3Error.from(response, doing: what) }
        return response
    }

    /// PUTs `length` bytes of the file at `path` from `offset` as `key`; returns the ETag the
    /// store gives (unquoted).
    public func put(key: String, path: String, offset: UInt64 = 0, length: UInt64, md5: [UInt8]) async throws -> String {
        let r = request("PUT", key, headers: [("Content-MD5", Data(md5).base64EncodedString())], body: .file(path: path, offset: offset, length: length))
        return Self.unquote(try await perform(r, doing: "PUT \(key)").header("ETag") ?? "")
    }

    public struct Head: Sendable, Hashable {
        public var etag: String
        public var bytes: Int64
    }

    /// The object's ETag and size, or nil when there is none.
    public func head(key: String) async throws -> Head? {
        do {
            let r = try await perform(request("HEAD", key), doing: "HEAD \(key)")
            return Head(etag: Self.unquote(r.header("ETag") ?? ""), bytes: Int64(r.header("Content-Length") ?? "") ?? -1)
        } catch let e as S3Error where e.status == 404 && e.code != "NoSuchBucket" {
            // A HEAD has no body to say which: a missing bucket shows on the PUT.
            return nil
        }
    }

    /// Starts a multipart upload; returns its id.
    public func createMultipart(key: String) async throws -> String {
        let r = try await perform(request("POST", key, query: [("uploads", "")], body: .bytes([])), doing: "starting a multipart upload of \(key)")
        guard let id = S3XML.first("UploadId", in: String(decoding: r.body, as: UTF8.self)) else {
            throw S3Error(kind: .rejected, status: r.status, code: nil, message: "the store started a multipart upload of \(key) without an UploadId")
        }
        return id
    }

    public func uploadPart(key: String, uploadID: String, part: Int, path: String, offset: UInt64, length: UInt64, md5: [UInt8]) async throws -> String {
        let r = request("PUT", key, query: [("partNumber", String(part)), ("uploadId", uploadID)],
                        headers: [("Content-MD5", Data(md5).base64EncodedString())], body: .file(path: path, offset: offset, length: length))
        return Self.unquote(try await perform(r, doing: "PUT part \(part) of \(key)").header("ETag") ?? "")
    }

    /// Completes a multipart upload from its parts' ETags; returns the object's ETag.
    public func completeMultipart(key: String, uploadID: String, parts: [String]) async throws -> String {
        let xml = "<CompleteMultipartUpload>" + parts.enumerated().map { "<Part><PartNumber>\($0.offset + 1)</PartNumber><ETag>\"\($0.element)\"</ETag></Part>" }.joined()
            + "</CompleteMultipartUpload>"
        let r = try await perform(request("POST", key, query: [("uploadId", uploadID)], headers: [("Content-Type", "application/xml")], body: .bytes(Array(xml.utf8))),
                                  doing: "completing the multipart upload of \(key)")
        // A 200 can still carry an error (the store failed after answering).
        let text = String(decoding: r.body, as: UTF8.self)
        if let code = S3XML.first("Code", in: text) {
            throw S3Error(kind: .busy, status: r.status, code: code, message: "completing the multipart upload of \(key): \(S3XML.first("Message", in: text) ?? "")")
        }
        return Self.unquote(S3XML.first("ETag", in: text) ?? "")
    }

    /// Aborts every multipart upload open for exactly `key` (ListMultipartUploads): parts a
    /// killed run sent before it could journal its upload's id. Returns how many.
    @discardableResult
    public func abortOpenUploads(key: String) async throws -> Int {
        let r = try await perform(request("GET", nil, query: [("prefix", key), ("uploads", "")]), doing: "listing the multipart uploads of \(key)")
        var aborted = 0
        for upload in S3XML.all("Upload", in: String(decoding: r.body, as: UTF8.self)) where S3XML.first("Key", in: upload) == key {
            if let id = S3XML.first("UploadId", in: upload) {
                try await abortMultipart(key: key, uploadID: id)
                aborted += 1
            }
        }
        return aborted
    }

    public func abortMultipart(key: String, uploadID: String) async throws {
        _ = try await perform(request("DELETE", key, query: [("uploadId", uploadID)]), doing: "aborting the multipart upload of \(key)")
    }

    public struct Listed: Sendable, Hashable {
        public var key: String
        public var etag: String
        public var bytes: Int64
    }

    /// Every object under `prefix` (ListObjectsV2, page by page).
    public func list(prefix: String = "") async throws -> [Listed] {
        var out: [Listed] = []
        var token: String?
        repeat {
            var q = [("list-type", "2"), ("prefix", prefix)]
            if let token { q.append(("continuation-token", token)) }
            let r = try await perform(request("GET", nil, query: q), doing: "listing \(bucket)", lowPriority: false)
            let text = String(decoding: r.body, as: UTF8.self)
            for c in S3XML.all("Contents", in: text) {
                out.append(Listed(key: S3XML.first("Key", in: c) ?? "", etag: Self.unquote(S3XML.first("ETag", in: c) ?? ""), bytes: Int64(S3XML.first("Size", in: c) ?? "") ?? -1))
            }
            token = S3XML.first("IsTruncated", in: text) == "true" ? S3XML.first("NextContinuationToken", in: text) : nil
        } while token != nil
        return out
    }

    /// Creates the bucket (a store's setup; the uploader never creates one).
    public func createBucket() async throws {
        _ = try await perform(request("PUT", nil), doing: "creating the bucket \(bucket)", lowPriority: false)
    }

    static func unquote(_ s: String) -> String {
        s.hasPrefix("\"") && s.hasSuffix("\"") && s.count >= 2 ? String(s.dropFirst().dropLast()) : s
    }
}

/// MD5 through libcrypto.
public enum MD5 {
    /// Of `length` bytes of a file from `offset`.
    public static func file(_ path: String, offset: UInt64 = 0, length: UInt64) throws -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 16)
        let rc = sb_md5_file(path, offset, length, &digest)
        guard rc == 0 else { throw ShutterbugError(.system, "cannot read \(path) to hash it", errno: rc) }
        return digest
    }

    public static func bytes(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 16)
        bytes.withUnsafeBytes { sb_md5_bytes($0.baseAddress, $0.count, &digest) }
        return digest
    }

    public static func hex(_ digest: [UInt8]) -> String { digest.map { String(format: "%02x", $0) }.joined() }

    /// The ETag S3 gives an object uploaded in parts: the MD5 of the parts' MD5s, "-" and their count.
    public static func multipartETag(_ parts: [[UInt8]]) -> String {
        hex(bytes(parts.flatMap { $0 })) + "-\(parts.count)"
    }
}
