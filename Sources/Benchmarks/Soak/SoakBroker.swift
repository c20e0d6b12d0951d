import Foundation

/// Debian's Mosquitto on a free loopback port, no persistence: the broker the soak's MQTT
/// captures go through. It can be killed and started again on the same port (a broker that
/// goes away for a while, as a Home Assistant machine rebooting).
public final class SoakBroker: @unchecked Sendable {
    public static let mosquitto = "/usr/sbin/mosquitto"
    public let port: Int
    private let config: String
    private var process: Process?

    /// - Throws: when Mosquitto is not installed, or does not listen within 30 s.
    public init(root: String) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.mosquitto) else {
            throw ShutterbugStoreError("Debian's mosquitto is not at \(Self.mosquitto): run board/setup-host.sh")
        }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        port = SeaweedStore.freePort()
        config = root + "/mosquitto.conf"
        try "listener \(port) 127.0.0.1\nallow_anonymous true\npersistence false\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await start()
    }

    /// Starts it (again, on the same port) and returns once it accepts connections, or throws
    /// after 30 s.
    public func start() async throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.mosquitto)
        p.arguments = ["-c", config]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let end = ContinuousClock.now + .seconds(30)
        while !answers() {
            guard ContinuousClock.now < end, p.isRunning else {
                stop()
                throw ShutterbugStoreError("mosquitto did not listen on 127.0.0.1:\(port) within 30 s")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    func answers() -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = UInt16(port).bigEndian
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &a) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 } }
    }

    /// Kills it (SIGKILL: a child of a process that blocks SIGTERM inherits the mask).
    public func stop() {
        guard let p = process else { return }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        process = nil
    }

    deinit { stop() }
}
