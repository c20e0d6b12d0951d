import Foundation
import HTTPTransfer
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `shutterbug serve` on the simulated camera, exercised over loopback with a real HTTP client.
@Suite("serve: the camera as an HTTP service", .serialized, .timeLimit(.minutes(3)))
struct ServeCLITests {
    /// A running `serve` child and its base URL.
    final class Server: @unchecked Sendable {
        let process = Process()
        let err = Pipe()
        var base = ""
        let dir: String
        /// Whether `dir` is its own, removed when it stops.
        private let ownsDir: Bool
        /// What it said on standard error after it started serving (the last 20,000 characters).
        let said = Mutex("")
        /// Whether its standard error reached its end (the service and its children exited).
        private let ended = Mutex(false)

        /// `wrapper`: a command that runs the service (`unshare --time … --`), its words first.
        /// `output`: a folder of the caller's (kept by `stop`), else a fresh one.
        init(_ extra: [String] = [], environment: [String: String] = [:], wrapper: [String] = [], output: String? = nil) throws {
            dir = output ?? NSTemporaryDirectory() + "sb-serve-\(UUID().uuidString)"
            ownsDir = output == nil
            let words = ["serve", "--camera", "sim:imx477", "--size", "640x480", "--listen", "127.0.0.1:0", "--output", dir] + extra
            process.executableURL = URL(fileURLWithPath: wrapper.first ?? OutputCLITests.exe)
            process.arguments = wrapper.isEmpty ? words : Array(wrapper.dropFirst()) + [OutputCLITests.exe] + words
            var env = ProcessInfo.processInfo.environment
            env["SHUTTERBUG_TOKEN"] = nil
            for (k, v) in environment { env[k] = v }
            process.environment = env
            process.standardError = err
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            // The URL is on standard error once it listens.
            var text = ""
            while !text.contains("serving ") || !text.hasSuffix("\n") {
                let chunk = err.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            // The address on the "serving … at URL" line (other lines name other URLs: a store's).
            guard let serving = text.range(of: "serving "),
                  let r = text.range(of: #"http://127\.0\.0\.1:\d+/"#, options: .regularExpression, range: serving.upperBound..<text.endIndex) else {
                process.terminate()
                throw POSIXError(.EIO)
            }
            base = String(text[r])
            // What it says from now on is kept, and the pipe drained (a full one would block it).
            err.fileHandleForReading.readabilityHandler = { [weak self] h in
                let data = h.availableData
                if data.isEmpty {
                    h.readabilityHandler = nil
                    self?.ended.withLock { $0 = true }
                    return
                }
                let text = String(decoding: data, as: UTF8.self)
                self?.said.withLock { $0 = String(($0 + text).suffix(20_000)) }
            }
        }

        /// What it said once it exited: waits up to `seconds` until its standard error has
        /// ended or what was said contains `last` (the line the test reads), whichever comes
        /// first. The end of the pipe alone is not waited for: a child another test spawned at
        /// the moment this server started may hold the pipe's write end open long after this
        /// process exited. Fails the test naming the wait if neither came.
        func said(containing last: String, within seconds: Double = 20) async throws -> String {
            let clock = ContinuousClock()
            let end = clock.now + .seconds(seconds)
            func done() -> Bool { ended.withLock { $0 } || said.withLock { $0.contains(last) } }
            while !done(), clock.now < end { try await Task.sleep(for: .milliseconds(50)) }
            #expect(done(), "standard error of serve (pid \(process.processIdentifier)) neither ended nor said \"\(last)\" within \(seconds) s")
            return said.withLock { $0 }
        }

        /// Starts one, waiting for its address off Swift's cooperative pool: a blocking read
        /// there (seconds on a loaded machine) holds one of its two threads, and every other
        /// test's tasks wait behind it.
        static func start(_ extra: [String] = [], environment: [String: String] = [:], wrapper: [String] = [], output: String? = nil) async throws -> Server {
            try await offPool { try Server(extra, environment: environment, wrapper: wrapper, output: output) }
        }

        /// SIGTERM, and its exit waited for off the cooperative pool.
        func stop() async throws -> Int32 {
            kill(process.processIdentifier, SIGTERM)
            try await offPool { self.process.waitUntilExit() }
            if ownsDir { try? FileManager.default.removeItem(atPath: dir) }
            return process.terminationStatus
        }

        /// For a test's clean-up: SIGKILL, nothing waited for.
        func discard() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            if ownsDir { try? FileManager.default.removeItem(atPath: dir) }
        }
    }

    struct Reply {
        var status: Int
        var body: Data
        var type: String?
        var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// The tests' client: libcurl through HTTPTransfer, which waits on its socket (URLSession on
    /// Linux spins a core while it waits, beside the service under test on a 2-core machine).
    func call(_ url: String, method: String = "GET", body: String? = nil, token: String? = nil) async throws -> Reply {
        var headers: [(name: String, value: String)] = []
        if body != nil { headers.append(("Content-Type", "application/json")) }
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        let r = try await HTTPTransfer.perform(HTTPTransfer.Request(method: method, url: url, headers: headers, body: body.map { .bytes(Array($0.utf8)) } ?? .none,
                                                                    timeout: .seconds(30)))
        return Reply(status: r.status, body: Data(r.body), type: r.header("Content-Type"))
    }

    @Test("every endpoint: status, cameras, capture (photo, EV and manual brackets) with its files listed and downloadable, the newest frame as JPEG, metrics, the web page; bad requests name the field; paths outside the output refused; SIGTERM exits 0")
    func endpoints() async throws {
        let s = try await Server.start()
        let status = try await call(s.base + "api/status")
        #expect(status.status == 200 && status.type == "application/json")
        #expect(status.json?["camera"] as? String == "sim:imx477" && status.json?["streaming"] as? Bool == true, "\(status.text)")
        let cameras = try #require(try await call(s.base + "api/cameras").json(array: 0))
        #expect(cameras["id"] as? String == "sim:imx477" && (cameras["modes"] as? [Any])?.count ?? 0 >= 2, "\(cameras)")
        #expect((cameras["mode"] as? [String: Any])?["maxFps"] as? Double ?? 0 > 0 && (cameras["streams"] as? [String])?.count == 2, "the mode it streams in, and the still and raw streams: \(cameras)")

        let bracket = try await call(s.base + "api/capture", method: "POST", body: #"{"ev": [-1, 0, 1], "formats": ["jpeg", "dng"]}"#)
        #expect(bracket.status == 201, "\(bracket.text)")
        let files = try #require(bracket.json?["files"] as? [String])
        #expect(files.filter { $0.hasSuffix(".jpg") }.count == 3 && files.filter { $0.hasSuffix(".dng") }.count == 3, "\(files)")
        let jpeg = try await call(s.base + "api/files/" + files.first { $0.hasSuffix(".jpg") }!)
        #expect(jpeg.status == 200 && jpeg.type == "image/jpeg" && jpeg.body.prefix(2) == Data([0xFF, 0xD8]))
        let photo = try await call(s.base + "api/capture", method: "POST", body: "{}")
        #expect(photo.status == 201 && photo.json?["steps"] as? Int == 1, "\(photo.text)")
        let manual = try await call(s.base + "api/capture", method: "POST", body: #"{"exposuresUs": [1000, 4000], "gain": 2}"#)
        #expect(manual.status == 201, "\(manual.text)")
        let list = try await call(s.base + "api/captures")
        #expect((try JSONSerialization.jsonObject(with: list.body) as? [[String: Any]])?.count == 3)

        // Bad requests: 4xx, the field and the range named.
        for (body, says) in [(#"{"ev": [0, 99]}"#, "ev: each bias is -8...8"), (#"{"exposuresUs": [1]}"#, "exposuresUs: each is 10...60000000"),
                             (#"{"exposuresUs": [1000], "gain": 0}"#, "gain: 1...64"), (#"{"formats": ["tiff"]}"#, "formats"),
                             (#"{"ev": "x"}"#, "ev"), ("not json", "JSON object"), (#"{"ev": [0], "exposuresUs": [1000]}"#, "not both"),
                             (#"{"exposures": [1000]}"#, "exposures: not a field"), (#"{"ev": [0], "gain": 2}"#, "gain goes with exposuresUs")] {
            let r = try await call(s.base + "api/capture", method: "POST", body: body)
            #expect(r.status == 400 && r.text.contains(says), "\(body): \(r.status) \(r.text)")
        }
        let wrongMethod = try await call(s.base + "api/status", method: "DELETE")
        #expect(wrongMethod.status == 405 && wrongMethod.text.contains("takes GET"), "\(wrongMethod.text)")
        let big = try await call(s.base + "api/capture", method: "POST", body: "{\"ev\": [" + String(repeating: "0,", count: 20_000) + "0]}")
        #expect(big.status == 413)

        // Files: never outside the output directory.
        let outside = NSTemporaryDirectory() + "sb-secret-\(UUID().uuidString)"
        try "secret".write(toFile: outside, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: outside) }
        try FileManager.default.createSymbolicLink(atPath: s.dir + "/link.txt", withDestinationPath: outside)
        for path in ["api/files/link.txt", "api/files/..%2F..%2Fetc%2Fpasswd", "api/files/%2E%2E/%2E%2E/etc/passwd", "api/files/.shutterbug-captures", "api/files/nothing.jpg"] {
            let r = try await call(s.base + path)
            #expect([400, 403, 404].contains(r.status) && !r.text.contains("secret") && !r.text.contains("root:"), "\(path): \(r.status) \(r.text)")
        }
        #expect(try await call(s.base + "api/files/link.txt").status == 403)

        let frame = try await call(s.base + "api/frame.jpg")
        #expect(frame.status == 200 && frame.type == "image/jpeg" && frame.body.count > 1000)
        let metrics = try await call(s.base + "metrics")
        #expect(metrics.status == 200 && metrics.text.contains("# TYPE shutterbug_frames_total counter"), "\(metrics.text)")
        // swift-prometheus's text: each sample by name, the histograms with their buckets.
        var sample: [String: Double] = [:]
        for line in metrics.text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let v = Double(parts[1]) { sample[String(parts[0])] = v }
        }
        #expect(sample["shutterbug_captures_total"] == 3 && sample["shutterbug_capture_seconds_count"] == 3, "\(sample)")
        #expect(sample["shutterbug_photos_total"] == 6 && (sample["shutterbug_bytes_written_total"] ?? 0) > 10_000, "EV bracket of 3, manual of 2, a photo")
        #expect(sample["shutterbug_bracket_frames_per_step_count"] == 2 && sample["shutterbug_capture_seconds_bucket{le=\"+Inf\"}"] == 3)
        // Six start-up frames, less any the sensor dropped (in real time a loaded machine can
        // leave it without a request for a frame or two: counted as dropped, never as frames).
        let (frames, startup, dropped) = (sample["shutterbug_frames_total"] ?? 0, sample["shutterbug_frames_startup_total"] ?? -1, sample["shutterbug_frames_dropped_total"] ?? 0)
        #expect(frames > 10 && (1...6).contains(startup) && startup + dropped >= 6 && sample["shutterbug_up"] == 1,
                "frames \(frames), start-up frames \(startup), dropped \(dropped), up \(sample["shutterbug_up"] ?? -1)")
        #expect(sample["shutterbug_disk_free_bytes"] != nil && sample["shutterbug_sensor_temperature_celsius"] != nil)
        let page = try await call(s.base)
        #expect(page.status == 200 && page.type?.hasPrefix("text/html") == true && page.text.contains("/api/frame.jpg"))
        #expect(try await s.stop() == 0, "SIGTERM: a clean exit")
    }

    @Test("300 clients that connect and say nothing, or never finish a request's head (slowloris), leave the status answering at once, and are closed once idle 15 s")
    func idleAndSlowClients() async throws {
        let s = try await Server.start()
        defer { s.discard() }
        let port = UInt16(s.base.split(separator: ":").last!.dropLast())!
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        for i in 0..<300 {
            let fd = try #require(loopbackConnection(port: port), "connection \(i): errno \(errno)")
            if i % 2 == 0 { _ = "GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n".withCString { send(fd, $0, strlen($0), 0) } }
            sockets.append(fd)
        }
        let began = ContinuousClock.now
        let status = try await call(s.base + "api/status")
        #expect(status.status == 200, "\(status.text)")
        #expect(ContinuousClock.now - began < .seconds(10), "the status took \(ContinuousClock.now - began) with 300 idle clients")
        // Each is closed by the service once idle: a read sees the end.
        for fd in sockets {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, 60_000)
            var byte: UInt8 = 0
            let n = ready > 0 ? recv(fd, &byte, 1, 0) : -2
            #expect(n <= 0 && n != -2, "a client idle for 60 s was not closed (poll \(ready), recv \(n))")
            if n == -2 { break }
        }
    }

    @Test("the CLI client waits for a slow capture without spinning: `capture --exposures 2s,2s` (some 5 s) costs it well under a second of CPU (URLSession on Linux spun a core the whole wait)")
    func clientWaitsIdle() async throws {
        let s = try await Server.start()
        defer { s.discard() }
        // bash's `times`: the shell's CPU, then its children's (the client's), user and system.
        let r = try await runChild("/bin/bash", ["-c", "\"$0\" capture --service \"$1\" --exposures 2s,2s >/dev/null && times", OutputCLITests.exe, s.base])
        #expect(r.status == 0, "\(r.err)")
        let children = try #require(r.out.split(separator: "\n").last, "\(r.out)")
        let seconds = children.split(separator: " ").map { part -> Double in
            // 0m1.234s
            let p = part.dropLast().split(separator: "m")
            return (Double(p.first ?? "0") ?? 0) * 60 + (Double(p.last ?? "0") ?? 0)
        }
        #expect(seconds.count == 2 && seconds.reduce(0, +) < 1.0, "the client used \(children) of CPU for a capture of some 5 s")
    }

    @Test("the token rule: beyond loopback without a token it refuses to start; with one, no token or a wrong one is 401 and the right one works")
    func token() async throws {
        let refused = try await runChild(OutputCLITests.exe, ["serve", "--camera", "sim:imx477", "--listen", "0.0.0.0:0", "--output", "/tmp/x"])
        #expect(refused.status == 64 && refused.err.contains("needs a bearer token"), "\(refused.err)")
        let file = NSTemporaryDirectory() + "sb-token-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try "tiny".write(toFile: file, atomically: true, encoding: .utf8)
        let weak = try await runChild(OutputCLITests.exe, ["serve", "--listen", "127.0.0.1:0", "--output", "/tmp/x", "--token-file", file])
        #expect(weak.status == 64 && weak.err.contains("at least 16 characters"), "\(weak.err)")
        // Two lines: every request would be refused; said at start instead.
        try "0123456789abcdef\n0123456789abcdef\n".write(toFile: file, atomically: true, encoding: .utf8)
        let twoLines = try await runChild(OutputCLITests.exe, ["serve", "--listen", "127.0.0.1:0", "--output", "/tmp/x", "--token-file", file])
        #expect(twoLines.status == 64 && twoLines.err.contains("one line"), "\(twoLines.err)")
        // A host name that merely begins with 127. is not loopback.
        let named = try await runChild(OutputCLITests.exe, ["serve", "--listen", "127.attacker.example:0", "--output", "/tmp/x"])
        #expect(named.status == 64 && named.err.contains("needs a bearer token"), "\(named.err)")

        let token = "s3cret-token-for-the-test-0123456789"
        let s = try await Server.start([], environment: ["SHUTTERBUG_TOKEN": token])
        #expect(try await call(s.base + "api/status").status == 401)
        #expect(try await call(s.base + "api/status", token: token + "x").status == 401)
        #expect(try await call(s.base + "metrics", token: "nope").status == 401)
        let ok = try await call(s.base + "api/status", token: token)
        #expect(ok.status == 200 && ok.json?["camera"] as? String == "sim:imx477")
        #expect(try await s.stop() == 0)
    }

    @Test("serve --config: the service's options from YAML (here its token file), the command line's over them; config check names a serve file's mistakes at their lines, its jobs' and triggers' among them")
    func configuration() async throws {
        let dir = NSTemporaryDirectory() + "sb-serve-config-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let token = "a-token-of-24-characters"
        try token.write(toFile: dir + "/token", atomically: true, encoding: .utf8)
        try """
            # the camera on the roof
            token-file: \(dir)/token
            rate-limit: 50
            output: \(dir)/out
            """.write(toFile: dir + "/serve.yaml", atomically: true, encoding: .utf8)
        let check = try await runChild(OutputCLITests.exe, ["config", "check", dir + "/serve.yaml"])
        #expect(check.status == 0 && check.out.contains("no mistakes (checked as serve's configuration)"), "\(check.out)")
        let s = try await Server.start(["--config", dir + "/serve.yaml"])
        #expect(try await call(s.base + "api/status").status == 401, "the file's token is required")
        #expect(try await call(s.base + "api/status", token: token).status == 200)
        #expect(try await s.stop() == 0)

        try """
            listen: nowhere
            rate-limt: 5
            jobs:
              - job: roof
                interval: 30s
              - name: sky
                count: 3
                interval: 0s
                ev: [-1, 0, 1]
                size: 100x100
            triggers:
              - name: button
              - name: b2
                simulated: regular:1s
                keypress: true
            output: \(dir)/out
            """.write(toFile: dir + "/bad.yaml", atomically: true, encoding: .utf8)
        let bad = try await runChild(OutputCLITests.exe, ["config", "check", dir + "/bad.yaml"])
        #expect(bad.status == 65, "\(bad.out)")
        let lines = bad.out.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("\(dir)/bad.yaml:1: listen: --listen must be HOST:PORT") }, "\(bad.out)")
        #expect(lines.contains("\(dir)/bad.yaml:2: rate-limt: Unknown option '--rate-limt'. Did you mean '--rate-limit'?"), "\(bad.out)")
        #expect(lines.contains("\(dir)/bad.yaml:4: jobs: each entry needs a name (- name: roof)"), "\(bad.out)")
        #expect(lines.contains { $0.hasPrefix("\(dir)/bad.yaml:4: jobs: job: not an option of a job in the service; a job's options are interval, at, count") }, "\(bad.out)")
        #expect(lines.contains("\(dir)/bad.yaml:8: jobs sky: interval: --interval must be a period from 0.1 s to 604800 s, written 30s, 5m, 2h or 1d, not '0s'"), "\(bad.out)")
        #expect(lines.contains { $0.hasPrefix("\(dir)/bad.yaml:10: jobs sky: size: not an option of a job in the service") }, "\(bad.out)")
        #expect(lines.contains("\(dir)/bad.yaml:12: triggers button: give exactly one trigger source: --gpio LINE, --signal, --keypress or --simulated PATTERN"), "\(bad.out)")
        #expect(lines.contains { $0.hasPrefix("\(dir)/bad.yaml:15: triggers b2: keypress: not an option of a trigger in the service") }, "\(bad.out)")
        let refused = try await runChild(OutputCLITests.exe, ["serve", "--config", dir + "/bad.yaml"])
        #expect(refused.status == 64 && refused.err.contains("the configuration has 8 mistakes"), "\(refused.err)")
    }

    @Test("the rate limit: past its burst a client gets 429 with Retry-After and a message naming the limit, and is let in again as its bucket refills; --rate-limit out of range is refused")
    func rateLimit() async throws {
        // Loopback is not limited by default; --limit-loopback makes this client count.
        let s = try await Server.start(["--rate-limit", "5", "--limit-loopback"])
        // 30 at once: a burst of 10 goes through, and past it only what the bucket refilled
        // meanwhile (5 a second), however slowly a busy machine answers.
        let clock = ContinuousClock()
        let sent = clock.now
        let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
            for _ in 0..<30 { group.addTask { try await self.call(s.base + "api/status") } }
            var all: [Reply] = []
            for try await r in group { all.append(r) }
            return all
        }
        let elapsed = (clock.now - sent) / .seconds(1)
        let passed = replies.filter { $0.status == 200 }.count
        let refused = replies.first { $0.status == 429 }
        #expect(replies.allSatisfy { $0.status == 200 || $0.status == 429 }, "\(replies.map(\.status))")
        #expect(passed >= 10 && Double(passed) <= 10 + 5 * elapsed + 1, "\(passed) let in over \(elapsed) s")
        // More were sent than the bucket can have let in: some were refused, with the limit named.
        if 30 > 10 + 5 * elapsed + 1 {
            #expect(refused?.text.contains("at most 5 a second (bursts of 10)") == true, "\(refused?.text ?? "no 429 in \(elapsed) s")")
        }
        let start = clock.now
        var back = false
        // Refilled within about a second: asked again until it answers, for at most 3 s.
        while clock.now - start < .seconds(3) {
            if try await call(s.base + "api/status").status == 200 { back = true; break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(back)
        #expect(try await s.stop() == 0)
        let unlimited = try await Server.start()
        for _ in 0..<30 { #expect(try await call(unlimited.base + "api/status").status == 200) }
        #expect(try await unlimited.stop() == 0)
        let wrong = try await runChild(OutputCLITests.exe, ["serve", "--output", "/tmp/x", "--rate-limit", "-1"])
        #expect(wrong.status == 64 && wrong.err.contains("--rate-limit"), "\(wrong.err)")
    }

    @Test("the CLI as a client: status and capture ask the running service (its token from SHUTTERBUG_TOKEN) and print what it says; with no service there they say so and where they looked")
    func client() async throws {
        let token = "a-token-of-24-characters"
        let s = try await Server.start([], environment: ["SHUTTERBUG_TOKEN": token])
        let env = ["SHUTTERBUG_SERVICE": s.base, "SHUTTERBUG_TOKEN": token]
        let status = try await runChild(OutputCLITests.exe, ["status"], environment: env)
        #expect(status.status == 0 && status.out.contains("sim:imx477") && status.out.contains("streaming"), "\(status.out)\(status.err)")
        let capture = try await runChild(OutputCLITests.exe, ["capture", "--ev", "-1,0,1", "--format", "jpeg,dng"], environment: env)
        #expect(capture.status == 0 && capture.out.contains(".dng") && capture.out.contains(".jpg"), "\(capture.out)\(capture.err)")
        let listed = try await call(s.base + "api/captures", token: token)
        #expect(listed.text.contains(".dng"), "the service lists what the client asked for")
        let noToken = try await runChild(OutputCLITests.exe, ["status"], environment: ["SHUTTERBUG_SERVICE": s.base, "SHUTTERBUG_TOKEN": ""])
        #expect(noToken.status != 0 && noToken.err.contains("401") && noToken.err.contains("SHUTTERBUG_TOKEN"), "\(noToken.err)")
        let tooMany = try await runChild(OutputCLITests.exe, ["capture", "--ev", "-3,-2,-1,0,1,2,3"], environment: env)
        #expect(tooMany.status != 0 && tooMany.err.contains("409"), "\(tooMany.err)")
        #expect(try await s.stop() == 0)
        let none = try await runChild(OutputCLITests.exe, ["status", "--service", "http://127.0.0.1:9/"])
        #expect(none.status != 0 && none.err.contains("no shutterbug service answers at http://127.0.0.1:9/"), "\(none.err)")
    }
}
