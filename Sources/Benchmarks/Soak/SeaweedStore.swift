import Foundation
import Synchronization
import Upload

/// SeaweedFS (weed, installed from PyPI by board/setup-host.sh into the cache, or
/// `SHUTTERBUG_WEED`) on free loopback ports with a bucket made: the S3 store the benchmarks
/// upload to. It can be stopped and started again on the same ports and data (a store that goes
/// away for a while).
public final class SeaweedStore: @unchecked Sendable {
    public static var weed: String {
        if let w = ProcessInfo.processInfo.environment["SHUTTERBUG_WEED"] { return w }
        let cache = ProcessInfo.processInfo.environment["SHUTTERBUG_CACHE"] ?? (NSHomeDirectory() + "/.cache/shutterbug")
        return cache + "/seaweedfs/venv-4.48/bin/weed"
    }

    public let bucket: S3Bucket
    /// Where the store keeps its data (off the measured disk where there is a tmpfs).
    public let data: String
    private let arguments: [String]
    private var process: Process?

    /// Starts it with its data under `root` (or /dev/shm) and makes `bucket`.
    ///
    /// - Throws: `.unsupported` when weed is not installed, `.timeout` when it does not come up
    ///   within 90 s.
    public init(root: String, bucket name: String) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.weed) else {
            throw ShutterbugStoreError("SeaweedFS's weed is not at \(Self.weed): run board/setup-host.sh (or set SHUTTERBUG_WEED)")
        }
        var ports: Set<Int> = []
        while ports.count < 8 { ports.insert(Self.freePort()) }
        let p8 = Array(ports)
        let keys = S3Credentials(accessKey: "BENCH", secretKey: UUID().uuidString)
        data = access("/dev/shm", W_OK) == 0 ? "/dev/shm/sb-bench-store-\(getpid())-\(UUID().uuidString.prefix(8))" : root + "/store"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try #"{"identities": [{"name": "bench", "credentials": [{"accessKey": "\#(keys.accessKey)", "secretKey": "\#(keys.secretKey)"}], "actions": ["Admin", "Read", "Write", "List"]}]}"#
            .write(toFile: root + "/s3.json", atomically: true, encoding: .utf8)
        arguments = ["server", "-dir=\(data)", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.port=\(p8[0])", "-master.port.grpc=\(p8[1])",
                     "-master.volumeSizeLimitMB=256", "-volume.port=\(p8[2])", "-volume.port.grpc=\(p8[3])", "-volume.max=40", "-filer", "-filer.port=\(p8[4])",
                     "-filer.port.grpc=\(p8[5])", "-s3", "-s3.port=\(p8[6])", "-s3.port.grpc=\(p8[7])", "-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=\(root)/s3.json"]
        bucket = S3Bucket(endpoint: "http://127.0.0.1:\(p8[6])", bucket: name, region: "us-east-1", credentials: keys)
        try await start()
        let end = ContinuousClock.now + .seconds(90)
        while true {
            if (try? await bucket.createBucket()) != nil { break }
            guard ContinuousClock.now < end, process?.isRunning == true else {
                stop()
                throw ShutterbugStoreError("SeaweedFS did not come up in 90 s")
            }
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    /// Starts weed (again, on the same ports and data) and returns once its S3 port answers a
    /// listing, or after 90 s.
    public func start() async throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.weed)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
    }

    /// Waits until the bucket lists (the store is back), at most `limit`.
    public func ready(within limit: Duration = .seconds(90)) async -> Bool {
        let end = ContinuousClock.now + limit
        while ContinuousClock.now < end {
            if (try? await bucket.list(prefix: "-")) != nil { return true }
            try? await Task.sleep(for: .milliseconds(250))
        }
        return false
    }

    /// Kills it (the store gone, as a machine that lost power).
    public func stop() {
        guard let p = process else { return }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        process = nil
    }

    /// Stops it and removes its data.
    public func remove() {
        stop()
        try? FileManager.default.removeItem(atPath: data)
    }

    /// A loopback port below the kernel's range for outgoing connections' local ends: one from
    /// that range, freed while the store restarts, can be taken meanwhile by any connection on
    /// the machine (and the restart then fails with "address already in use").
    public static func freePort() -> Int {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        let ephemeral = bounds.count == 2 ? bounds[0] : 32_768
        return handedOut.withLock { handed in
            while true {
                let port = Int.random(in: 10_000..<max(10_001, ephemeral))
                guard !handed.contains(port) else { continue }
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var a = sockaddr_in()
                a.sin_family = sa_family_t(AF_INET)
                a.sin_addr.s_addr = INADDR_ANY
                a.sin_port = UInt16(port).bigEndian
                let free = withUnsafePointer(to: &a) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 } }
                close(fd)
                if free {
                    handed.insert(port)
                    return port
                }
            }
        }
    }

    /// Ports handed out by this process: never twice.
    private static let handedOut = Mutex<Set<Int>>([])
}

/// Why the store could not be had.
public struct ShutterbugStoreError: Error, CustomStringConvertible {
    public var description: String
    init(_ d: String) { description = d }
}
