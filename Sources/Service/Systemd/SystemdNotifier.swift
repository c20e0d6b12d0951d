#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// systemd's notify protocol (`sd_notify(3)`), spoken directly: datagrams of `KEY=VALUE` lines
/// to the socket named in `NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace). A
/// `Type=notify` service says `READY=1` once it does its job, `STATUS=` a one-line summary,
/// `WATCHDOG=1` at least every `WATCHDOG_USEC` (or systemd restarts it), and `STOPPING=1`.
///
/// Without `NOTIFY_SOCKET` (not under systemd) there is no notifier: `init` returns nil.
public final class SystemdNotifier: Sendable {
    private let fd: Int32
    private let address: [UInt8]
    /// `WATCHDOG_USEC`, when it is meant for this process (`WATCHDOG_PID` unset or ours).
    public let watchdogInterval: Duration?
    /// What was sent, newest last (a few), for status and tests.
    private let sent = Mutex<[String]>([])

    /// - Parameter environment: the process environment, or another for tests.
    public init?(environment: [String: String]) {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty, path.utf8.count < 108,
              path.hasPrefix("/") || path.hasPrefix("@") else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        self.fd = fd
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        address = bytes
        if let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0,
           environment["WATCHDOG_PID"].flatMap(Int32.init).map({ $0 == getpid() }) ?? true {
            watchdogInterval = .microseconds(usec)
        } else {
            watchdogInterval = nil
        }
    }

    /// The notifier for this process's environment, if systemd gave it a socket.
    public static func fromProcessEnvironment() -> SystemdNotifier? {
        var env: [String: String] = [:]
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            if let v = getenv(key) { env[key] = String(cString: v) }
        }
        return SystemdNotifier(environment: env)
    }

    deinit { close(fd) }

    /// Sends one message (`KEY=VALUE` lines). Returns false when the socket refused it (systemd
    /// gone): the service goes on.
    @discardableResult
    public func send(_ message: String) -> Bool {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let length = withUnsafeMutableBytes(of: &addr.sun_path) { raw -> Int in
            for (i, b) in address.enumerated() { raw[i] = b }
            return address.count
        }
        let addrLength = socklen_t(MemoryLayout<sa_family_t>.size + length)
        let ok = message.utf8CString.withUnsafeBufferPointer { text in
            withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, text.baseAddress, text.count - 1, Int32(MSG_NOSIGNAL), $0, addrLength) >= 0
                }
            }
        }
        sent.withLock {
            $0.append(message)
            if $0.count > 16 { $0.removeFirst() }
        }
        return ok
    }

    /// `READY=1` with a status line.
    public func ready(status: String) { send("READY=1\nSTATUS=\(Self.oneLine(status))") }
    public func status(_ text: String) { send("STATUS=\(Self.oneLine(text))") }
    public func watchdog() { send("WATCHDOG=1") }
    public func stopping(status: String) { send("STOPPING=1\nSTATUS=\(Self.oneLine(status))") }

    /// A status is one line: newlines would start new assignments.
    static func oneLine(_ s: String) -> String {
        String(s.map { $0 == "\n" || $0 == "\r" ? " " : $0 }.prefix(200))
    }
}
