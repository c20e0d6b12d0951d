import Foundation
import HTTPTransfer
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

/// libcurl through the shim against a real Hummingbird server on loopback: what the CLI's client
/// and the uploads rely on.
@Suite("HTTPTransfer: one request through libcurl")
struct HTTPTransferTests {
    /// Echoes the method, a header and the body's bytes (with their count in a header); /slow
    /// answers only once `release` is opened (the test opens it as it ends, so the server's
    /// shutdown never waits on it), or after a minute.
    static func app(release: Release = Release()) -> some ApplicationProtocol {
        let router = Router()
        router.on("/echo", method: .get) { r, _ in Response(status: .ok, headers: [.init("X-Method")!: "GET", .init("X-Token")!: r.headers[.authorization] ?? ""], body: .init(byteBuffer: ByteBuffer(string: "hello"))) }
        for method in [HTTPTypes.HTTPRequest.Method.post, .put, .delete] {
            router.on("/echo", method: method) { r, _ in
                let body = try await r.body.collect(upTo: 10 << 20)
                return Response(status: .created, headers: [.init("X-Method")!: method.rawValue, .init("X-Length")!: "\(body.readableBytes)",
                                                            .init("X-Type")!: r.headers[.contentType] ?? ""],
                                body: .init(byteBuffer: body))
            }
        }
        router.get("/slow") { _, _ -> String in
            await release.wait(atMost: .seconds(60))
            return "late"
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    }

    @Test("GET: status, headers (case-insensitive) and body; a header sent arrives")
    func get() async throws {
        try await Self.app().test(.live) { client in
            let port = try #require(client.port)
            let r = try await HTTPTransfer.perform(HTTPTransfer.Request(url: "http://127.0.0.1:\(port)/echo", headers: [("Authorization", "Bearer abc")]))
            #expect(r.status == 200)
            #expect(String(decoding: r.body, as: UTF8.self) == "hello")
            #expect(r.header("x-method") == "GET" && r.header("X-TOKEN") == "Bearer abc", "\(r.headers)")
            let missing = try await HTTPTransfer.perform(HTTPTransfer.Request(url: "http://127.0.0.1:\(port)/nothing"))
            #expect(missing.status == 404)
        }
    }

    @Test("bodies: POST and DELETE from memory (an empty one too), PUT from a file's byte range, each arriving whole")
    func bodies() async throws {
        let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-\(getpid()).bin").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await Self.app().test(.live) { client in
            let url = "http://127.0.0.1:\(try #require(client.port))/echo"
            let post = try await HTTPTransfer.perform(HTTPTransfer.Request(method: "POST", url: url, headers: [("Content-Type", "application/json")], body: .bytes(Array("{\"a\":1}".utf8))))
            #expect(post.status == 201 && post.header("X-Method") == "POST" && post.header("X-Type") == "application/json")
            #expect(String(decoding: post.body, as: UTF8.self) == "{\"a\":1}")
            let empty = try await HTTPTransfer.perform(HTTPTransfer.Request(method: "POST", url: url))
            #expect(empty.status == 201 && empty.header("X-Length") == "0", "\(empty.headers)")
            let delete = try await HTTPTransfer.perform(HTTPTransfer.Request(method: "DELETE", url: url, body: .bytes([1, 2, 3])))
            #expect(delete.header("X-Method") == "DELETE" && delete.body == [1, 2, 3])
            let put = try await HTTPTransfer.perform(HTTPTransfer.Request(method: "PUT", url: url, body: .file(path: path, offset: 1_000_000, length: 1_500_000)))
            #expect(put.status == 201 && put.header("X-Method") == "PUT" && put.header("X-Length") == "1500000", "\(put.headers)")
            #expect(put.body == Array(bytes[1_000_000..<2_500_000]), "the file's range, byte for byte")
            await #expect(throws: HTTPTransfer.Failure.self) {
                _ = try await HTTPTransfer.perform(HTTPTransfer.Request(method: "PUT", url: url, body: .file(path: path + ".missing", length: 1)))
            }
        }
    }

    @Test("no response: nothing listening is a connect failure said at once; a server slower than the timeout is a timeout, not a connect failure; a cancelled task stops its transfer")
    func failures() async throws {
        // Port 9 (discard): nothing listens there on a test machine.
        let refused = try await #require(throws: HTTPTransfer.Failure.self) {
            _ = try await HTTPTransfer.perform(HTTPTransfer.Request(url: "http://127.0.0.1:9/"))
        }
        #expect(refused.connectFailed, "\(refused)")
        let release = Release()
        try await Self.app(release: release).test(.live) { client in
            defer { release.open() }
            let url = "http://127.0.0.1:\(try #require(client.port))/slow"
            let slow = try await #require(throws: HTTPTransfer.Failure.self) {
                _ = try await HTTPTransfer.perform(HTTPTransfer.Request(url: url, timeout: .milliseconds(300)))
            }
            #expect(!slow.connectFailed && !slow.cancelled, "\(slow)")
            let task = Task { try await HTTPTransfer.perform(HTTPTransfer.Request(url: url, timeout: .seconds(30))) }
            task.cancel()
            let cancelled = try await #require(throws: HTTPTransfer.Failure.self) { _ = try await task.value }
            #expect(cancelled.cancelled, "\(cancelled)")
        }
    }
}

/// A door the slow route waits at: opened once, it lets every waiter through.
final class Release: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiting = state.withLock { s in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        waiting.forEach { $0.resume() }
    }

    /// Returns when opened, or after `limit` (a fixture that never hangs a test run).
    func wait(atMost limit: Duration) async {
        let timer = Task { [self] in
            try? await Task.sleep(for: limit)
            open()
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s in
                if s.open { return true }
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }
}
