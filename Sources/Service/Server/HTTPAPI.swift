import Capture
import Jobs
import Foundation
import HTTPTypes
import Hummingbird
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP API over a `CameraService` (Hummingbird): JSON under `/api`, Prometheus text at
/// `/metrics`, the web page at `/`. Bad requests get a 4xx whose body names the field and
/// the accepted range; with a token, every request must carry it (`Authorization: Bearer`).
public enum HTTPAPI {
    /// Where the service listens and who may talk to it.
    public struct Access: Sendable {
        public var host: String
        public var port: Int
        /// Required on every request when set; required to listen beyond loopback.
        public var token: String?
        /// Requests a second per client beyond loopback (bursts of twice that); nil: no limit.
        public var rateLimit: Double?
        /// The limit applies to clients on this machine too.
        public var limitsLoopback = false
        /// The names the service answers to in a request's Host besides IP addresses and
        /// localhost: this machine's name (and NAME.local), and those configured. A request
        /// naming another host is refused: a web page that rebinds its own name to this
        /// address (DNS rebinding) cannot reach the API.
        public var hostNames: [String]
        public init(host: String, port: Int, token: String?, rateLimit: Double? = nil, hostNames: [String] = Access.machineNames) {
            self.host = host
            self.port = port
            self.token = token
            self.rateLimit = rateLimit
            self.hostNames = hostNames
        }

        /// This machine's name and its mDNS name (camera, camera.local).
        public static var machineNames: [String] {
            var buffer = [CChar](repeating: 0, count: 256)
            guard gethostname(&buffer, buffer.count) == 0 else { return [] }
            let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()
            guard !name.isEmpty else { return [] }
            return name.hasSuffix(".local") ? [name] : [name, name + ".local"]
        }

        /// Whether a request's Host (`authority`: name or address, and maybe a port) is one this
        /// service answers to: an IP address, localhost, or one of `hostNames`.
        public func accepts(authority: String) -> Bool {
            var host = authority.lowercased()
            if host.hasPrefix("[") {
                // [v6] or [v6]:port: an address.
                return host.contains("]")
            }
            if let colon = host.lastIndex(of: ":"), host[host.index(after: colon)...].allSatisfy(\.isNumber) { host = String(host[..<colon]) }
            if host.hasSuffix(".") { host.removeLast() }
            if host == "localhost" || hostNames.contains(host) { return true }
            // A dotted IPv4 address (what rebinding cannot put in a page's Host).
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            return parts.count == 4 && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) && Int($0)! <= 255 }
        }

        /// Loopback: an address in 127.0.0.0/8, ::1, localhost (a host name that merely begins
        /// with "127." is not).
        public var isLoopback: Bool {
            if host == "localhost" || host == "::1" { return true }
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) && Int($0)! <= 255 }
        }

        /// Refuses what would put the camera on the network without a token.
        public func check() throws {
            guard (0...65_535).contains(port) else { throw ShutterbugError(.invalidArgument, "the port must be 1...65535 (0: any free one), not \(port)") }
            if let token, token.utf8.count < 16 {
                throw ShutterbugError(.invalidArgument, "the token must be at least 16 characters (it has \(token.utf8.count)); make one with: head -c 24 /dev/urandom | base64")
            }
            if !isLoopback && token == nil {
                throw ShutterbugError(.invalidArgument, "listening on \(host) (beyond this machine) needs a bearer token: give --token-file FILE (or SHUTTERBUG_TOKEN); without one the service listens on 127.0.0.1 only")
            }
        }
    }

    /// Request bodies larger than this are refused (413).
    public static let maxBody = 16 * 1024

    /// Compares two strings in time that depends only on their lengths.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
        return diff == 0
    }

    struct TokenMiddleware<Context: RequestContext>: RouterMiddleware {
        let token: String?
        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            // The page itself is a shell with no data in it: served to anyone, it asks for the
            // token and sends it with each API call.
            if request.uri.path == "/" && (request.method == .get || request.method == .head) { return try await next(request, context) }
            if let token {
                // The scheme is case-insensitive (RFC 7235): Bearer, bearer.
                let given = request.headers[.authorization].flatMap { $0.lowercased().hasPrefix("bearer ") ? String($0.dropFirst(7)).trimmingCharacters(in: .whitespaces) : nil }
                guard let given, HTTPAPI.constantTimeEqual(given, token) else {
                    var headers = HTTPFields()
                    headers[.wwwAuthenticate] = "Bearer"
                    headers[.contentType] = "application/json"
                    return Response(status: .unauthorized, headers: headers, body: .init(byteBuffer: ByteBuffer(string: #"{"error":"a bearer token is required: Authorization: Bearer TOKEN"}"# + "\n")))
                }
            }
            return try await next(request, context)
        }
    }

    /// What a browser could be made to send from another site is refused before the token is
    /// looked at (a service on loopback has none): a Host this service does not answer to
    /// (DNS rebinding), a write from another origin (`Origin` naming another host, or
    /// `Sec-Fetch-Site: cross-site` / `same-site`), and a body that is not JSON (a form or
    /// `text/plain`, which a page may post anywhere without asking): 421, 403 and 415.
    struct RequestGuard<Context: RequestContext>: RouterMiddleware {
        let access: Access
        static var host: HTTPField.Name { HTTPField.Name("Host")! }
        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            // HTTP/1.1 requires a Host (RFC 9112 §3.2): without one, nothing says which name
            // the client meant, so the DNS-rebinding check below could not be made.
            guard let authority = request.head.authority, !authority.isEmpty else {
                return HTTPAPI.error(.badRequest, "a request needs a Host header (HTTP/1.1)")
            }
            // One Host, and only one (§3.2 again): with two, a proxy and this service could
            // each believe a different one. The conversion to HTTP types keeps the first as the
            // authority and leaves the others among the fields.
            if !request.headers[values: Self.host].isEmpty {
                return HTTPAPI.error(.badRequest, "a request may have only one Host header (HTTP/1.1); this one has \(1 + request.headers[values: Self.host].count)")
            }
            if !access.accepts(authority: authority) {
                return HTTPAPI.error(.init(code: 421, reasonPhrase: "Misdirected Request"),
                                     "this camera does not answer to the host name '\(authority)'; use its address, localhost or \(access.hostNames.isEmpty ? "a name given with --host-names" : access.hostNames.joined(separator: ", ") + " (more with --host-names)")")
            }
            let writes = request.method != .get && request.method != .head && request.method != .options
            if writes {
                if let site = request.headers.secFetchSite, site == "cross-site" || site == "same-site" {
                    return HTTPAPI.error(.forbidden, "a request from another site (Sec-Fetch-Site: \(site)) may not change anything here")
                }
                if let origin = request.headers[.origin] {
                    let host = origin.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first.map(String.init) ?? ""
                    if origin == "null" || host.lowercased() != (request.head.authority ?? host).lowercased() {
                        return HTTPAPI.error(.forbidden, "a request from another origin (\(origin)) may not change anything here")
                    }
                }
                let hasBody = (request.headers[.contentLength].flatMap(Int.init) ?? 0) > 0 || request.headers[.transferEncoding] != nil
                if hasBody {
                    let type = request.headers[.contentType]?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                    guard type == "application/json" else {
                        return HTTPAPI.error(.unsupportedMediaType, "a request body must be JSON (Content-Type: application/json), not \(type.map { "'\($0)'" } ?? "untyped")")
                    }
                }
            }
            return try await next(request, context)
        }
    }

    /// What every response says to a browser: never inside another site's frame (a click on a
    /// framed Photo button would take a photo), never sniffed as another type, no referrer.
    struct BrowserHeaders<Context: RequestContext>: RouterMiddleware {
        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            var r = try await next(request, context)
            r.headers[.xFrameOptions] = "DENY"
            r.headers[.contentSecurityPolicy] = "frame-ancestors 'none'"
            r.headers[.xContentTypeOptions] = "nosniff"
            r.headers[.referrerPolicy] = "no-referrer"
            return r
        }
    }

    /// A known path asked with a method it does not take: 405 with the methods it does (HEAD
    /// wherever GET is: the router answers it as GET, without the body).
    struct MethodMiddleware<Context: RequestContext>: RouterMiddleware {
        static func allowed(_ path: String) -> [HTTPRequest.Method]? {
            switch path {
            case "/", "/api/status", "/api/cameras", "/api/captures", "/api/frame.jpg", "/metrics", "/api/triggers", "/api/config": return [.get]
            case "/api/capture", "/api/config/reload": return [.post]
            case "/api/jobs": return [.get, .post]
            default:
                if path.hasPrefix("/api/files/") { return [.get] }
                let parts = path.split(separator: "/", omittingEmptySubsequences: false)
                guard parts.count >= 4, parts[1] == "api", parts[2] == "jobs" else { return nil }
                if parts.count == 4 { return [.get] }
                if parts.count == 5, CameraService.JobAction(rawValue: String(parts[4])) != nil { return [.post] }
                return nil
            }
        }

        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            if let allowed = Self.allowed(request.uri.path), !allowed.contains(request.method), !(request.method == .head && allowed.contains(.get)) {
                var r = HTTPAPI.error(.methodNotAllowed, "\(request.uri.path) takes \(allowed.map(\.rawValue).joined(separator: ", ")), not \(request.method.rawValue)")
                r.headers[.allow] = allowed.map(\.rawValue).joined(separator: ", ")
                return r
            }
            return try await next(request, context)
        }
    }

    static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var data = try encoder.encode(value)
        data.append(10)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// What a JSON value of `type` is, in JSON's words: a number, a string, a list, an object.
    static func jsonKind(_ type: Any.Type) -> String {
        let name = String(describing: type)
        if name.hasPrefix("Array") || name.hasPrefix("[") { return "a list" + (name.contains("Double") || name.contains("Int") ? " of numbers" : name.contains("String") ? " of strings" : "") }
        if name.hasPrefix("Dictionary") { return "an object" }
        if name.contains("Double") || name.contains("Int") || name.contains("Float") { return "a number" }
        if name.contains("String") { return "a string" }
        if name.contains("Bool") { return "true or false" }
        return "another kind of value"
    }

    /// Reads files for `/api/files` on NIO's thread pool, in chunks.
    static let fileIO = FileIO()

    /// What a `Range` header asks of a file.
    enum RangeAsked: Equatable {
        case range(ClosedRange<Int>)
        /// Well formed, and past the end of the file (416).
        case unsatisfiable
        /// Not one byte range FIRST-LAST, FIRST- or -SUFFIX (400).
        case malformed
    }

    /// A `Range: bytes=...` header as the byte range it asks of a file of `size` bytes: one
    /// range, FIRST-LAST, FIRST- or -SUFFIX (RFC 9110).
    static func byteRange(_ header: String, size: Int) -> RangeAsked {
        guard header.lowercased().hasPrefix("bytes=") else { return .malformed }
        let spec = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .malformed }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces), last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        let digits = { (t: String) in !t.isEmpty && t.count <= 18 && t.allSatisfy(\.isASCII) && t.allSatisfy(\.isNumber) }
        if first.isEmpty {
            guard digits(last), let n = Int(last) else { return .malformed }
            guard n > 0, size > 0 else { return .unsatisfiable }
            return .range(max(0, size - n)...(size - 1))
        }
        guard digits(first), let a = Int(first), last.isEmpty || digits(last) else { return .malformed }
        guard a < size else { return .unsatisfiable }
        if last.isEmpty { return .range(a...(size - 1)) }
        guard let b = Int(last), b >= a else { return .malformed }
        return .range(a...min(b, size - 1))
    }

    /// 507: the output filesystem is full (RFC 4918).
    static let insufficientStorage = HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage")

    /// A capture that wrote nothing: why, and what it did.
    struct CaptureFailure: Codable {
        var error: String
        var capture: CameraService.CaptureRecord
    }

    static func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        (try? json(["error": message], status: status)) ?? Response(status: status)
    }

    /// A file under the output directory, or why not: no absolute path, no `..`, no hidden
    /// component, nothing that resolves (through a symlink) outside the directory, regular
    /// files only.
    static func resolve(_ components: [Substring], under root: String) -> Result<String, HTTPAPI.Refusal> {
        guard !components.isEmpty else { return .failure(.init(.notFound, "no file named")) }
        // Each component as the client meant it: %20 a space, %2e%2e still '..'.
        var decoded: [Substring] = []
        for c in components {
            guard let d = String(c).removingPercentEncoding, !d.contains("/") else {
                return .failure(.init(.notFound, "no such file: \(c) (its percent-encoding is not valid, or it hides a '/')"))
            }
            decoded.append(Substring(d))
        }
        let components = decoded
        for c in components {
            if c == ".." {
                return .failure(.init(.forbidden, "path: a file under the output directory, without '..'"))
            }
            if c.isEmpty || c.hasPrefix(".") || c.contains("\0") {
                return .failure(.init(.notFound, "no such file (hidden files are not served)"))
            }
        }
        guard let realRoot = realpath(root, nil).map({ p in defer { free(p) }; return String(cString: p) }) else {
            return .failure(.init(.notFound, "the output directory is not there"))
        }
        let joined = realRoot + "/" + components.joined(separator: "/")
        guard let real = realpath(joined, nil).map({ p in defer { free(p) }; return String(cString: p) }) else {
            return .failure(.init(.notFound, "no such file: \(components.joined(separator: "/"))"))
        }
        guard real == joined, real.hasPrefix(realRoot + "/") else {
            return .failure(.init(.forbidden, "path: it leads outside the output directory (a symlink)"))
        }
        var st = stat()
        guard lstat(real, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return .failure(.init(.notFound, "not a file: \(components.joined(separator: "/"))")) }
        return .success(real)
    }

    struct Refusal: Error {
        var status: HTTPResponse.Status
        var message: String
        init(_ status: HTTPResponse.Status, _ message: String) {
            self.status = status
            self.message = message
        }
    }

    static func contentType(_ path: String) -> String {
        if path.hasSuffix(".jpg") { return "image/jpeg" }
        if path.hasSuffix(".png") { return "image/png" }
        if path.hasSuffix(".dng") { return "image/x-adobe-dng" }
        if path.hasSuffix(".json") { return "application/json" }
        return "application/octet-stream"
    }

    /// The configuration in effect: the service's options (the token never shown), its jobs and
    /// triggers, each as command-line words.
    public struct EffectiveConfiguration: Sendable, Codable {
        public struct Entry: Sendable, Codable {
            public var name: String
            public var options: [String]
            public init(name: String, options: [String]) {
                self.name = name
                self.options = options
            }
        }
        /// The configuration file, if any.
        public var file: String?
        public var options: [String] = []
        public var jobs: [Entry] = []
        public var triggers: [Entry] = []
        public init(file: String? = nil, options: [String] = [], jobs: [Entry] = [], triggers: [Entry] = []) {
            self.file = file
            self.options = options
            self.jobs = jobs
            self.triggers = triggers
        }
    }

    /// What the API needs from the command that runs the service.
    public struct Hooks: Sendable {
        /// Reads the configuration file again and applies it (SIGHUP does the same).
        public var reload: @Sendable () async throws -> CameraService.Reload
        /// The effective configuration, as JSON.
        public var configuration: @Sendable () async -> EffectiveConfiguration
        public init(reload: @escaping @Sendable () async throws -> CameraService.Reload, configuration: @escaping @Sendable () async -> EffectiveConfiguration) {
            self.reload = reload
            self.configuration = configuration
        }

        public static let none = Hooks(reload: { throw ShutterbugError(.unsupported, "this service has no configuration file to reload") },
                                       configuration: { EffectiveConfiguration() })
    }

    /// A request body read whole (at most `maxBody`), as a JSON object; nil for an empty body.
    static func object(_ request: Request, example: String) async -> Result<[String: Any]?, Refusal> {
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: maxBody)
        } catch {
            return .failure(.init(.contentTooLarge, "the body is at most \(maxBody) bytes"))
        }
        if body.readableBytes == 0 { return .success(nil) }
        guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] else {
            return .failure(.init(.badRequest, "the body must be a JSON object: \(example)"))
        }
        return .success(object)
    }

    /// One option's value in a JSON object: `true`, `30`, `"30s"` or `[-2, 0, 2]`.
    enum OptionValue: Decodable {
        case flag(Bool)
        case text(String)
        case list([String])

        static func text(_ c: any SingleValueDecodingContainer) -> String? {
            if let d = try? c.decode(Double.self) {
                return d.isFinite && d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
            }
            return try? c.decode(String.self)
        }

        init(from decoder: any Decoder) throws {
            if let c = try? decoder.singleValueContainer() {
                if let b = try? c.decode(Bool.self) { self = .flag(b); return }
                if let t = Self.text(c) { self = .text(t); return }
            }
            var items: [String] = []
            var list = try decoder.unkeyedContainer()
            while !list.isAtEnd {
                let item = try list.superDecoder().singleValueContainer()
                guard let t = Self.text(item) else { throw DecodingError.dataCorruptedError(in: item, debugDescription: "a list of numbers or strings") }
                items.append(t)
            }
            guard !items.isEmpty else { throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "an empty list")) }
            self = .list(items)
        }
    }

    /// `shutterbug timelapse`'s options from a JSON object: `{"interval": "30s", "ev": [-2, 0, 2],
    /// "no-phase-lock": true}` is `--interval 30s --ev -2,0,2 --no-phase-lock`.
    static func arguments(_ options: [String: Any]) -> Result<[String], Refusal> {
        var words: [String] = []
        for key in options.keys.sorted() {
            guard !key.isEmpty, !key.hasPrefix("-"), key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
                return .failure(.init(.badRequest, "options.\(key): not an option name; they are shutterbug timelapse's long options without the dashes (interval, count, ev)"))
            }
            guard let data = try? JSONSerialization.data(withJSONObject: [options[key]!], options: [.fragmentsAllowed]),
                  let value = try? JSONDecoder().decode([OptionValue].self, from: data).first else {
                return .failure(.init(.badRequest, "options.\(key): a string, a number, true/false or a non-empty list of numbers or strings"))
            }
            switch value {
            case .flag(let on): if on { words.append("--" + key) }
            case .text(let t): words += ["--" + key, t]
            case .list(let items): words += ["--" + key, items.joined(separator: ",")]
            }
        }
        return .success(words)
    }

    static func refusal(_ e: ShutterbugError) -> Response {
        switch e.code {
        case .invalidArgument: return HTTPAPI.error(.badRequest, e.message)
        case CameraService.noSuchJob: return HTTPAPI.error(.notFound, e.message)
        case .busy, .invalidState, .unsupported: return HTTPAPI.error(.conflict, e.message)
        default: return HTTPAPI.error(.serviceUnavailable, e.message)
        }
    }

    /// The router: every endpoint of `openapi.yaml`.
    public static func router(_ service: CameraService, access: Access, hooks: Hooks = .none) -> Router<APIRequestContext> {
        // HEAD wherever GET is (Hummingbird's own: GET's status and headers, no body).
        let router = Router(context: APIRequestContext.self, options: .autoGenerateHeadEndpoints)
        // The limit first: a client over it gets no further, token or not.
        router.middlewares.add(BrowserHeaders<APIRequestContext>())
        router.middlewares.add(RateLimitMiddleware<APIRequestContext>(limiter: access.rateLimit.map { RateLimiter(rate: $0, limitsLoopback: access.limitsLoopback) }))
        router.middlewares.add(RequestGuard<APIRequestContext>(access: access))
        router.middlewares.add(TokenMiddleware<APIRequestContext>(token: access.token))
        router.middlewares.add(MethodMiddleware<APIRequestContext>())
        router.get("/") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: WebPage.html)))
        }
        router.get("/api/status") { _, _ in try json(await service.status()) }
        router.get("/api/cameras") { _, _ in try json(await service.cameras()) }
        router.get("/api/captures") { _, _ in try json(await service.captures()) }
        router.post("/api/capture") { request, _ -> Response in
            var request = request
            let body: ByteBuffer
            do {
                body = try await request.collectBody(upTo: maxBody)
            } catch {
                return HTTPAPI.error(.contentTooLarge, "the body is at most \(maxBody) bytes")
            }
            let ask: CameraService.CaptureRequest
            if body.readableBytes == 0 {
                ask = .init()
            } else {
                do {
                    // A misspelt field is an error, never silently ignored.
                    let known: Set<String> = ["ev", "exposuresUs", "gain", "formats", "at"]
                    if let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
                       let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
                        return HTTPAPI.error(.badRequest, "\(unknown): not a field; the fields are \(known.sorted().joined(separator: ", "))")
                    }
                    ask = try JSONDecoder().decode(CameraService.CaptureRequest.self, from: Data(buffer: body))
                } catch let DecodingError.typeMismatch(type, c), let DecodingError.valueNotFound(type, c) {
                    // In JSON's words, not Swift's ("Array<Double>").
                    return HTTPAPI.error(.badRequest, "\(c.codingPath.map(\.stringValue).joined(separator: ".")): expected \(jsonKind(type))")
                } catch {
                    return HTTPAPI.error(.badRequest, "the body must be a JSON object: {\"ev\": [-1,0,1]}, {\"exposuresUs\": [1000, 4000], \"gain\": 1}, {} for a photo, or {\"at\": \"2026-11-27T08:15:02.250Z\"} for the frame exposing then; \"formats\": [\"jpeg\", \"dng\"]")
                }
            }
            let settings: PhotoSettings
            do {
                settings = try CameraService.settings(for: ask, now: service.camera.now, offset: TimelapseRun.wallOffset(await service.session.latestFrame))
            } catch let e as ShutterbugError {
                return HTTPAPI.error(.badRequest, e.message)
            } catch let e as CameraService.AtRefused {
                return HTTPAPI.error(e.gone ? .gone : .unprocessableContent, e.message)
            } catch {
                return HTTPAPI.error(.badRequest, "\(error)")
            }
            do {
                return try json(try await service.capture(settings), status: .created)
            } catch let failed as CameraService.NothingWritten {
                // Captured, and nothing written: 507 for a full disk, 500 otherwise, with what
                // was captured and why each file failed.
                return (try? json(CaptureFailure(error: failed.description, capture: failed.record), status: failed.noSpace ? insufficientStorage : .internalServerError))
                    ?? Response(status: .internalServerError)
            } catch let e as ShutterbugError where e.code == .noSpace {
                return HTTPAPI.error(insufficientStorage, e.message)
            } catch let e as ShutterbugError where e.code == .late {
                // "at" older than every frame held: the frame exposing then is gone.
                return HTTPAPI.error(.gone, e.message)
            } catch let e as ShutterbugError where e.code == .invalidArgument || e.code == .unsupported {
                // Valid settings this camera, as configured, cannot take.
                return HTTPAPI.error(.conflict, e.message)
            } catch let e as ShutterbugError {
                return HTTPAPI.error(.serviceUnavailable, e.message)
            }
        }
        router.get("/api/frame.jpg") { _, _ -> Response in
            do {
                let jpeg = try await service.frameJPEG()
                return Response(status: .ok, headers: [.contentType: "image/jpeg", .cacheControl: "no-store"], body: .init(byteBuffer: ByteBuffer(bytes: jpeg)))
            } catch let e as ShutterbugError {
                return HTTPAPI.error(.serviceUnavailable, e.message)
            }
        }
        router.get("/api/files/**") { request, context -> Response in
            switch resolve(context.parameters.getCatchAll(), under: service.directory.path) {
            case .failure(let r): return HTTPAPI.error(r.status, r.message)
            case .success(let path):
                // Streamed from disk in chunks (memory stays flat however many download a 24 MB
                // DNG at once), and a range resumes a download cut short.
                var st = stat()
                guard stat(path, &st) == 0 else { return HTTPAPI.error(.notFound, "cannot read it") }
                let size = Int(st.st_size)
                var headers: HTTPFields = [.contentType: contentType(path), .acceptRanges: "bytes"]
                var status = HTTPResponse.Status.ok
                var range = size > 0 ? 0...(size - 1) : nil
                if let asked = request.headers[.range] {
                    let r: ClosedRange<Int>
                    switch byteRange(asked, size: size) {
                    case .range(let asked): r = asked
                    case .malformed:
                        return HTTPAPI.error(.badRequest, "Range '\(asked)': ask one byte range, bytes=FIRST-LAST, FIRST- or -SUFFIX")
                    case .unsatisfiable:
                        var refused = HTTPAPI.error(.rangeNotSatisfiable, "Range \(asked): the file has \(size) bytes")
                        refused.headers[.contentRange] = "bytes */\(size)"
                        return refused
                    }
                    range = r
                    status = .partialContent
                    headers[.contentRange] = "bytes \(r.lowerBound)-\(r.upperBound)/\(size)"
                }
                headers[.contentLength] = String(range.map { $0.count } ?? 0)
                guard let range else { return Response(status: status, headers: headers, body: .init()) }
                let body = try await fileIO.loadFile(path: path, range: range, context: context)
                return Response(status: status, headers: headers, body: body)
            }
        }
        router.get("/api/jobs") { _, _ in try json(await service.jobStatuses()) }
        router.post("/api/jobs") { request, _ -> Response in
            let example = #"{"name": "roof", "options": {"interval": "30s", "count": 100, "ev": [-2, 0, 2]}}"#
            switch await object(request, example: example) {
            case .failure(let r): return HTTPAPI.error(r.status, r.message)
            case .success(let object):
                guard let object else { return HTTPAPI.error(.badRequest, "the body must be a JSON object: \(example)") }
                if let unknown = object.keys.sorted().first(where: { !["name", "options"].contains($0) }) {
                    return HTTPAPI.error(.badRequest, "\(unknown): not a field; the fields are name, options")
                }
                guard let name = object["name"] as? String, (1...64).contains(name.count),
                      name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }), !name.hasPrefix("-") else {
                    return HTTPAPI.error(.badRequest, "name: 1 to 64 letters, digits, '-' or '_' (it names the job's folder), e.g. \"roof\"")
                }
                guard let options = (object["options"] ?? [String: Any]()) as? [String: Any] else {
                    return HTTPAPI.error(.badRequest, "options: an object of shutterbug timelapse's options, e.g. {\"interval\": \"30s\", \"count\": 100}")
                }
                let words: [String]
                switch arguments(options) {
                case .failure(let r): return HTTPAPI.error(r.status, r.message)
                case .success(let w): words = w
                }
                do {
                    let def = try JobDefinition(name: name, words: words)
                    return try json(try await service.createJob(def), status: .created)
                } catch let e as ShutterbugError {
                    return refusal(e)
                }
            }
        }
        router.get("/api/jobs/:name") { _, context -> Response in
            let name = context.parameters.get("name") ?? ""
            guard let job = await service.job(named: name) else { return HTTPAPI.error(.notFound, "no job named '\(name)'") }
            return try json(job)
        }
        router.post("/api/jobs/:name/:action") { _, context -> Response in
            let name = context.parameters.get("name") ?? ""
            guard let action = CameraService.JobAction(rawValue: context.parameters.get("action") ?? "") else {
                return HTTPAPI.error(.notFound, "a job's actions are pause, resume and stop")
            }
            do {
                return try json(try await service.control(job: name, action))
            } catch let e as ShutterbugError {
                return refusal(e)
            }
        }
        router.get("/api/triggers") { _, _ in try json(await service.triggerStatuses()) }
        router.get("/api/config") { _, _ in try json(await hooks.configuration()) }
        router.post("/api/config/reload") { _, _ -> Response in
            do {
                return try json(try await hooks.reload())
            } catch let e as ShutterbugError {
                return refusal(e)
            }
        }
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"], body: .init(byteBuffer: ByteBuffer(string: await service.metricsText())))
        }
        return router
    }
}

extension HTTPFields {
    /// Fetch Metadata: where a browser's request came from (same-origin, same-site,
    /// cross-site, none).
    var secFetchSite: String? { first { $0.name.canonicalName == "sec-fetch-site" }?.value }
}

extension HTTPField.Name {
    /// Not among swift-http-types' registered names.
    static var xFrameOptions: Self { Self("X-Frame-Options")! }
    static var referrerPolicy: Self { Self("Referrer-Policy")! }
}
