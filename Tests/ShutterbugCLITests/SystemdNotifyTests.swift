import Foundation
import Logging
import Systemd
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A datagram socket the test owns, as systemd's NOTIFY_SOCKET; records what arrives and when.
final class NotifySocket: @unchecked Sendable {
    let fd: Int32
    let name: String

    /// `abstract`: in the abstract namespace (`@name`), else a path under the temporary folder.
    init(abstract: Bool = false) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        let tag = "sb-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        name = abstract ? "@" + tag : NSTemporaryDirectory() + tag
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(name.utf8)
        if abstract { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in bytes.enumerated() { raw[i] = b } }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var tv = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
        if !name.hasPrefix("@") { unlink(name) }
    }

    /// Datagrams with their arrival (seconds on CLOCK_MONOTONIC) until `until` says stop or
    /// `limit` seconds pass.
    func receive(limit: Double, until: (String) -> Bool) -> [(t: Double, text: String)] {
        var out: [(Double, String)] = []
        let start = Self.now()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Self.now() - start < limit {
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else { continue }
            let text = String(decoding: buffer[0..<n], as: UTF8.self)
            out.append((Self.now(), text))
            if until(text) { break }
        }
        return out
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

@Suite("systemd's notify protocol, spoken to a socket the test owns", .timeLimit(.minutes(2)))
struct SystemdNotifyTests {
    @Test("the notifier: none without NOTIFY_SOCKET; a path and an abstract socket both receive; the watchdog interval only when meant for this process")
    func notifier() throws {
        #expect(SystemdNotifier(environment: [:]) == nil)
        #expect(SystemdNotifier(environment: ["NOTIFY_SOCKET": "relative/path"]) == nil)
        for abstract in [false, true] {
            let socket = try NotifySocket(abstract: abstract)
            let n = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.name, "WATCHDOG_USEC": "250000"]))
            #expect(n.watchdogInterval == .milliseconds(250))
            n.ready(status: "two\nlines")
            let got = socket.receive(limit: 2) { _ in true }
            #expect(got.map(\.text) == ["READY=1\nSTATUS=two lines"], "a status is one line")
        }
        let other = SystemdNotifier(environment: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "250000", "WATCHDOG_PID": "1"])
        #expect(other?.watchdogInterval == nil, "WATCHDOG_PID names another process")
    }

    @Test("a timelapse under Type=notify: READY once streaming, a STATUS per slot, WATCHDOG while frames come and none while the camera hangs, STOPPING at the end")
    func timelapseNotifies() async throws {
        let socket = try NotifySocket()
        let dir = NSTemporaryDirectory() + "sb-notify-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Real time: 1 s slots; at frame 90 (about 3 s in) the camera goes silent for 3 s.
        let args = ["timelapse", "--camera", "sim:imx219", "--size", "640x480", "--interval", "1s", "--count", "6",
                    "--output", dir, "--json", "--fault-stall", "90:3"]
        async let messages = offPool { socket.receive(limit: 60) { $0.contains("STOPPING=1") } }
        async let run = offPool { try runChildBlocking(OutputCLITests.exe, args, environment: ["NOTIFY_SOCKET": socket.name, "WATCHDOG_USEC": "400000"]) }
        let (got, r) = try await (messages, run)
        #expect(r.status == 0, "\(r.err)")
        let texts = got.map(\.text)
        let ready = try #require(texts.firstIndex { $0.hasPrefix("READY=1") }, "\(texts)")
        #expect(texts[ready].contains("STATUS=timelapse"))
        #expect(!texts[..<ready].contains("WATCHDOG=1"), "no watchdog before ready")
        // One per slot, taken or not (the slots in the hang are skipped, and say so).
        let slots = texts.filter { $0.hasPrefix("STATUS=slot") }.compactMap { $0.dropFirst("STATUS=slot ".count).split(separator: "/").first.flatMap { Int($0) } }
        #expect(slots == Array(0..<6), "\(texts)")
        #expect(texts.last?.hasPrefix("STOPPING=1") == true)
        // Pings every 0.2 s while frames come; the 3 s hang shows as a gap of over 2 s.
        let pings = got.filter { $0.text == "WATCHDOG=1" }.map(\.t)
        #expect(pings.count >= 10, "\(pings.count) pings")
        let gaps = zip(pings, pings.dropFirst()).map { $1 - $0 }
        #expect(gaps.contains { $0 > 1.5 }, "the hang stopped the pings (until the capture timed out and the camera was opened again): gaps \(gaps)")
        #expect(gaps.filter { $0 > 0.6 }.count <= 2, "otherwise regular: \(gaps)")
    }
}

extension SystemdNotifyTests {
    @Test("serve under Type=notify: READY once streaming and listening, WATCHDOG while frames come and none while the camera hangs, STOPPING on SIGTERM")
    func serveNotifies() async throws {
        let socket = try NotifySocket()
        let dir = NSTemporaryDirectory() + "sb-notify-serve-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // At frame 60 (about 2 s in) the camera goes silent for 3 s.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: OutputCLITests.exe)
        p.arguments = ["serve", "--camera", "sim:imx219", "--size", "640x480", "--listen", "127.0.0.1:0", "--output", dir, "--fault-stall", "60:3"]
        var env = ProcessInfo.processInfo.environment
        env["NOTIFY_SOCKET"] = socket.name
        env["WATCHDOG_USEC"] = "400000"
        p.environment = env
        p.standardError = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        // Seven seconds of datagrams: the stall and pings after it.
        var got = try await offPool { socket.receive(limit: 7) { _ in false } }
        kill(p.processIdentifier, SIGTERM)
        got += try await offPool { socket.receive(limit: 10) { $0.contains("STOPPING=1") } }
        try await offPool { p.waitUntilExit() }
        #expect(p.terminationStatus == 0)
        let texts = got.map(\.text)
        let ready = try #require(texts.firstIndex { $0.hasPrefix("READY=1") }, "\(texts)")
        #expect(texts[ready].contains("STATUS=serving sim:imx219 at http://127.0.0.1:"), "\(texts[ready])")
        #expect(!texts[..<ready].contains("WATCHDOG=1"), "no watchdog before ready")
        #expect(texts.contains { $0.hasPrefix("STATUS=serving sim:imx219") && $0.contains("0 captures over the API") }, "a summary line follows: \(texts)")
        #expect(texts.contains { $0.hasPrefix("STOPPING=1") }, "\(texts)")
        let pings = got.filter { $0.text == "WATCHDOG=1" }.map(\.t)
        let gaps = zip(pings, pings.dropFirst()).map { $1 - $0 }
        #expect(pings.count >= 8, "\(pings.count) pings")
        #expect(gaps.contains { $0 > 1.5 }, "the hang stopped the pings: gaps \(gaps)")
    }
}

@Suite("board/systemd: the unit files systemd accepts")
struct SystemdUnitTests {
    @Test("systemd-analyze verify accepts the units (their ExecStart pointed at the binary just built); the service's default configuration passes config check",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "needs systemd-analyze (the systemd package)"),
          arguments: ["shutterbug-timelapse.service", "shutterbug.service"])
    func verify(_ name: String) async throws {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let unit = try String(contentsOf: repo.appendingPathComponent("board/systemd/" + name), encoding: .utf8)
        #expect(unit.contains("Type=notify") && unit.contains("WatchdogSec=") && unit.contains("NoNewPrivileges=yes") && unit.contains("SupplementaryGroups=video render gpio"))
        let dir = NSTemporaryDirectory() + "sb-unit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/" + name
        try unit.replacingOccurrences(of: "/usr/bin/shutterbug", with: OutputCLITests.exe).write(toFile: path, atomically: true, encoding: .utf8)
        // The man page comes with the package, not with this build.
        let r = try await runChild("/usr/bin/systemd-analyze", ["verify", "--man=no", path])
        #expect(r.status == 0 && !r.err.contains(name + ":"), "\(r.err)")
        let config = try await runChild(OutputCLITests.exe, ["config", "check", repo.appendingPathComponent("board/systemd/serve.yaml").path])
        #expect(config.status == 0, "\(config.out)\(config.err)")
    }
}

@Suite("the service's log: swift-log with journald priorities")
struct JournalLogTests {
    @Test("under journald (JOURNAL_STREAM) each line starts with its sd-daemon priority; on a terminal with the program's name; one message, one line")
    func priorities() {
        let journal = JournalLogHandler(environment: ["JOURNAL_STREAM": "8:12345"])
        #expect(journal.line(.error, "the camera failed") == "<3>the camera failed")
        #expect(journal.line(.warning, "slow") == "<4>slow")
        #expect(journal.line(.notice, "serving") == "<5>serving")
        #expect(journal.line(.info, "x") == "<6>x" && journal.line(.debug, "x") == "<7>x" && journal.line(.critical, "x") == "<2>x")
        #expect(journal.line(.error, "two\nlines", metadata: ["job": "roof"]) == "<3>two lines job=roof")
        let terminal = JournalLogHandler(environment: [:])
        #expect(terminal.line(.error, "the camera failed") == "shutterbug: the camera failed")
    }
}
