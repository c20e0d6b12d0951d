import CCurl
import Foundation

/// One HTTP request through libcurl (the library every Pi already has, and the one Debian keeps
/// patched): the CLI's calls to the service, and uploads to object storage with AWS Signature V4.
/// Each transfer runs on a thread of its own, blocked in poll on its sockets, so a request that
/// waits for a 4 s bracket costs no CPU while it waits (URLSession on Linux spins a core), and no
/// task of the caller's cooperative pool is held.
extension HTTPTransfer {
    public struct Request: Sendable {
        public enum Body: Sendable {
            case none
            case bytes([UInt8])
            /// `length` bytes of a file from `offset`: an upload streams from the disk, never held whole.
            case file(path: String, offset: UInt64 = 0, length: UInt64)
        }

        /// Signs the request with AWS Signature V4 (libcurl's own signer).
        public struct AWSSignature: Sendable {
            public var provider: String
            public var region: String
            public var service: String
            public var accessKey: String
            public var secretKey: String
            public init(region: String, service: String = "s3", accessKey: String, secretKey: String, provider: String = "aws:amz") {
                self.provider = provider
                self.region = region
                self.service = service
                self.accessKey = accessKey
                self.secretKey = secretKey
            }
        }

        public var method: String
        public var url: String
        public var headers: [(name: String, value: String)]
        public var body: Body
        public var signature: AWSSignature?
        public var connectTimeout: Duration
        /// The whole transfer's limit; nil: none.
        public var timeout: Duration?
        /// No byte sent or received for this long cuts the transfer (a peer that hung
        /// mid-request, which no reset reports); nil: never.
        public var stallTimeout: Duration?
        public var maxSendBytesPerSecond: Int?

        public init(method: String = "GET", url: String, headers: [(name: String, value: String)] = [], body: Body = .none,
                    signature: AWSSignature? = nil, connectTimeout: Duration = .seconds(5), timeout: Duration? = .seconds(120),
                    maxSendBytesPerSecond: Int? = nil, stallTimeout: Duration? = nil) {
            self.stallTimeout = stallTimeout
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
            self.signature = signature
            self.connectTimeout = connectTimeout
            self.timeout = timeout
            self.maxSendBytesPerSecond = maxSendBytesPerSecond
        }
    }

    public struct Response: Sendable {
        public var status: Int
        /// The final response's header fields, in order.
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        /// The first field of that name (case-insensitive), as HTTP says.
        public func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }

        static func parseHeaders(_ text: String) -> [(name: String, value: String)] {
            text.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }).dropFirst().compactMap { line in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
        }
    }

    /// A transfer that did not complete: no connection (`connectFailed`), a timeout, a reset.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var code: Int32
        public var message: String
        /// No connection was made: nothing listens there, the name did not resolve, or connecting timed out.
        public var connectFailed: Bool
        public var cancelled: Bool { code == SB_HTTP_CANCELLED }
        public var description: String { message }
    }

}

public enum HTTPTransfer {
    /// libcurl's version as the program runs it.
    public static var curlVersion: String { String(cString: sb_http_curl_version()) }

    /// Performs the request; throws `Failure` when no response came. A task cancelled
    /// while it waits stops the transfer.
    ///
    /// `lowPriority`: the transfer's thread runs at nice 10 (Linux keeps a nice value per
    /// thread), so an upload's reading and hashing never takes a core from capture.
    public static func perform(_ request: Request, lowPriority: Bool = false) async throws -> Response {
        let cancel = CancelFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Response, any Error>) in
                Thread.detachNewThread {
                    if lowPriority { lowerThreadPriority() }
                    continuation.resume(with: Result { try performBlocking(request, cancel: cancel) })
                }
            }
        } onCancel: {
            cancel.set()
        }
    }

    /// The same, on the calling thread (which it blocks).
    public static func performBlocking(_ request: Request, cancel: CancelFlag? = nil) throws -> Response {
        var strings: [UnsafeMutablePointer<CChar>] = []
        func c(_ s: String) -> UnsafePointer<CChar> {
            let p = strdup(s)!
            strings.append(p)
            return UnsafePointer(p)
        }
        defer { strings.forEach { free($0) } }

        let headerLines: [UnsafePointer<CChar>?] = request.headers.map { c("\($0.name): \($0.value)") }
        var out = sb_http_response()
        var bodyBytes: [UInt8] = []
        if case .bytes(let b) = request.body { bodyBytes = b }
        let code: Int32 = headerLines.withUnsafeBufferPointer { lines in
            bodyBytes.withUnsafeBytes { body in
                var r = sb_http_request()
                r.method = c(request.method)
                r.url = c(request.url)
                r.headers = lines.baseAddress
                r.header_count = lines.count
                switch request.body {
                case .none: break
                case .bytes:
                    // A non-NULL pointer even for an empty body: the request has one.
                    r.body = body.baseAddress.map { UnsafeRawPointer($0) } ?? UnsafeRawPointer(c(""))
                    r.body_length = body.count
                case .file(let path, let offset, let length):
                    r.body_path = c(path)
                    r.body_offset = offset
                    r.body_length = Int(length)
                }
                if let s = request.signature {
                    r.aws_sigv4 = c("\(s.provider):\(s.region):\(s.service)")
                    r.user_password = c("\(s.accessKey):\(s.secretKey)")
                }
                r.connect_timeout_ms = Int(request.connectTimeout.milliseconds)
                r.timeout_ms = request.timeout.map { Int($0.milliseconds) } ?? 0
                r.stall_ms = request.stallTimeout.map { Int($0.milliseconds) } ?? 0
                r.max_send_bytes_per_second = Int64(request.maxSendBytesPerSecond ?? 0)
                r.cancel = cancel.map { UnsafePointer($0.pointer) }
                return sb_http_perform(&r, &out)
            }
        }
        defer { sb_http_response_free(&out) }
        guard code == 0 else {
            let message = withUnsafeBytes(of: out.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw Failure(code: code, message: message, connectFailed: out.connect_failed != 0)
        }
        let body = out.body.map { Array(UnsafeRawBufferPointer(start: $0, count: out.body_length)) } ?? []
        let headerText = out.headers.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: out.headers_length), as: UTF8.self) } ?? ""
        return Response(status: out.status, headers: Response.parseHeaders(headerText), body: body)
    }

    /// The calling thread at nice 10.
    public static func lowerThreadPriority() {
        _ = sb_thread_nice(10)
    }

    /// Set once, read by the transfer's progress callback.
    public final class CancelFlag: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<CInt>
        public init() {
            pointer = .allocate(capacity: 1)
            pointer.initialize(to: 0)
        }
        deinit { pointer.deallocate() }
        public func set() { pointer.pointee = 1 }
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (s, a) = components
        return s * 1000 + a / 1_000_000_000_000_000
    }
}
