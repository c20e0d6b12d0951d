import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A Mosquitto broker of the test's own (Debian's `mosquitto`), on a free loopback port, no
/// persistence: a restart forgets every retained message.
public final class Broker: @unchecked Sendable {
    public let port: Int
    public let config: String
    public let log: String
    private var process: Process?

    /// `address`: where it listens (0.0.0.0 for nodes in network namespaces of their own,
    /// reaching it over veth pairs).
    public init(extra: String = "", address: String = "127.0.0.1") throws {
        port = try Self.freePort()
        let dir = NSTemporaryDirectory() + "sb-mqtt-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        config = dir + "/mosquitto.conf"
        log = dir + "/log"
        // Its log to standard error, which is a file of ours (started as root, the broker runs
        // as the mosquitto user and could not open one in this folder itself).
        try "listener \(port) \(address)\n\(extra.contains("allow_anonymous") ? "" : "allow_anonymous true\n")persistence false\nlog_dest stderr\n\(extra)".write(toFile: config, atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: log, contents: nil)
    }

    /// A loopback port for a server of the test's own: free on every address, below the
    /// ephemeral range, never handed out twice in this process.
    public static func freePort() throws -> Int {
        let range = 10_000..<max(10_001, ephemeralPorts.lowerBound)
        return try handedOut.withLock { handed in
            for _ in 0..<2_000 {
                let port = Int.random(in: range)
                if handed.contains(port) || !canBind(port) { continue }
                handed.insert(port)
                return port
            }
            throw BrokerError(message: "no free port in \(range.lowerBound)...\(range.upperBound - 1) on this machine after 2000 tries (\(handed.count) handed out to this test run)")
        }
    }

    /// Ports this test process has handed out: never the same twice, so a store or broker that
    /// is stopped and started again finds its ports as it left them.
    private static let handedOut = Mutex<Set<Int>>([])

    /// The kernel's range for the local ends of outgoing connections (ip_local_port_range).
    /// `freePort` chooses below it: a port from it, freed while a store restarts, can be taken
    /// meanwhile by any connection on the machine (CI saw SeaweedFS's restart die with "bind:
    /// address already in use" on its filer's gRPC port).
    static let ephemeralPorts: ClosedRange<Int> = {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] <= bounds[1] else { return 32_768...60_999 }
        return bounds[0]...bounds[1]
    }()

    /// Whether nothing holds `port` on any address (a socket in TIME_WAIT counts as holding it).
    static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = INADDR_ANY
        a.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &a) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// Starts the broker and returns once it accepts connections.
    public func start() async throws {
        let path = "/usr/sbin/mosquitto"
        guard FileManager.default.isExecutableFile(atPath: path) else { throw BrokerError(message: "Debian's mosquitto is not installed (board/setup-host.sh installs it)") }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = ["-c", config]
        guard let out = FileHandle(forWritingAtPath: log) else { throw BrokerError(message: "cannot write the broker's log \(log)") }
        out.seekToEndOfFile()
        (p.standardOutput, p.standardError) = (out, out)
        try p.run()
        process = p
        // Nothing signals "listening": the port is tried until it answers (or the deadline
        // says the broker never came up).
        let port = self.port
        try await withDeadline(.seconds(30), "mosquitto to listen on 127.0.0.1:\(port)") {
            while !Self.answers(port) { try await Task.sleep(for: .milliseconds(50)) }
        }
    }

    public static func answers(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = UInt16(port).bigEndian
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &a) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 } }
    }

    deinit {
        // A test that failed before its stop leaves no broker behind.
        if let p = process { kill(p.processIdentifier, SIGKILL) }
    }

    public func stop() async throws {
        guard let p = process else { return }
        process = nil
        // SIGKILL, a broker's crash: the test process blocks SIGTERM, and a child started by
        // Foundation's Process inherits the mask, so mosquitto would never see a SIGTERM.
        kill(p.processIdentifier, SIGKILL)
        try await offPool { p.waitUntilExit() }
    }
}

public struct BrokerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
    public init(message: String) { self.message = message }
}

