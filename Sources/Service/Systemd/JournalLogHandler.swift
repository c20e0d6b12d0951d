import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// swift-log to standard error, one line a message. Under systemd (`JOURNAL_STREAM` set, as
/// for a service's standard error) each line starts with its syslog priority, `<3>` for an
/// error to `<7>` for debug (`sd-daemon(3)`'s prefixes), which journald takes as the entry's
/// priority (`journalctl -p warning`); on a terminal it starts with the program's name.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let prefixed: Bool
    let program: String

    /// - Parameter environment: the process environment, or another for tests.
    public init(program: String = "shutterbug", environment: [String: String]? = nil) {
        self.program = program
        let env = environment ?? Self.processEnvironment()
        prefixed = !(env["JOURNAL_STREAM"] ?? "").isEmpty
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// sd-daemon(3)'s priority for a level.
    public static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    /// The line as written, without its newline.
    public func line(_ level: Logger.Level, _ message: Logger.Message, metadata extra: Logger.Metadata? = nil) -> String {
        let all = metadata.merging(extra ?? [:]) { _, new in new }
        let fields = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        // One message, one line: a newline inside would start an entry of its own.
        let text = "\(message)\(fields)".replacingNewlines()
        return prefixed ? "<\(Self.priority(level))>\(text)" : "\(program): \(text)"
    }

    public func log(event: LogEvent) {
        var text = line(event.level, event.message, metadata: event.metadata) + "\n"
        text.withUTF8 { p in
            var done = 0
            while done < p.count {
                let n = write(2, p.baseAddress! + done, p.count - done)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                done += n
            }
        }
    }

    static func processEnvironment() -> [String: String] {
        var out: [String: String] = [:]
        if let v = getenv("JOURNAL_STREAM") { out["JOURNAL_STREAM"] = String(cString: v) }
        return out
    }
}

extension String {
    func replacingNewlines() -> String { String(map { $0 == "\n" || $0 == "\r" ? " " : $0 }) }
}
