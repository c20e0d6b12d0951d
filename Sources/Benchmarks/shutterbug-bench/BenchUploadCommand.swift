import ArgumentParser
import Foundation
import Soak
import ImageOutput
import Logging
import ShutterbugCore
import Upload

#if canImport(Glibc)
import Glibc
#endif

struct BenchUpload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Uploads to S3-compatible storage: throughput and CPU per MB by file size, a timelapse's slot error with uploads running vs idle, and the bytes written per photo.",
        discussion: """
            Starts SeaweedFS (weed from the cache board/setup-host.sh fills, or SHUTTERBUG_WEED) \
            on loopback unless --store-url is given. 1) The uploader in process sends --megabytes \
            of files of each size; MB/s and the process's CPU per MB. 2) `shutterbug timelapse` in \
            real time (--slots slots a second apart, JPEG 640x480), once idle and once with its \
            uploader sending a backlog of 24 MB files at --bandwidth the whole run: the schedule \
            error p50/p99/max of each and their ratio. 3) A virtual-time DNG+JPEG timelapse \
            uploading as it goes: the bytes the process had written to storage (its rusage \
            block output, so the journals, WAL, sidecars and temporaries count) and the bytes \
            the disk's own counters saw (/sys/block, every process's), each over the photos' bytes.
            """)

    @Option(name: .long, help: "MB of files per size (8...4096).")
    var megabytes: Int = 96

    @Option(name: .long, help: "Real-time slots per timelapse run (10...600).")
    var slots: Int = 40

    @Option(name: .long, help: ArgumentHelp("The uploads' bandwidth during the slot runs.", valueName: "size"))
    var bandwidth: String = "16M"

    @Option(name: .long, help: "Virtual-time slots for the write measure (5...1000).")
    var writeSlots: Int = 30

    @Option(name: .long, help: ArgumentHelp("A folder on the disk to measure (default a temporary one).", valueName: "dir"))
    var dir: String?

    @Option(name: .long, help: ArgumentHelp("An S3 store to use instead of starting SeaweedFS (with --bucket and --credentials-file).", valueName: "url"))
    var storeURL: String?

    @Option(name: .long) var bucket: String = "bench"
    @Option(name: .long, help: ArgumentHelp("ACCESS:SECRET for --store-url.", valueName: "file")) var credentialsFile: String?

    @Flag(name: .long, help: "One JSON object instead of the table.")
    var json = false

    func validate() throws {
        guard (8...4096).contains(megabytes) else { throw ValidationError("--megabytes must be in 8...4096, not \(megabytes)") }
        guard (10...600).contains(slots) else { throw ValidationError("--slots must be in 10...600, not \(slots)") }
        guard (5...1000).contains(writeSlots) else { throw ValidationError("--write-slots must be in 5...1000, not \(writeSlots)") }
        _ = try UploadSettings.parseBytes(bandwidth, what: "--bandwidth")
        if storeURL != nil, credentialsFile == nil { throw ValidationError("--store-url needs --credentials-file") }
    }

    /// SeaweedFS on free loopback ports, its bucket made (or the store given); returns it (to
    /// remove at the end) and the bucket.
    func startStore(in root: String) async throws -> (SeaweedStore?, S3Bucket) {
        if let storeURL, let credentialsFile {
            return (nil, S3Bucket(endpoint: storeURL, bucket: bucket, region: "us-east-1", credentials: try S3Credentials.load(file: credentialsFile)))
        }
        do {
            let store = try await SeaweedStore(root: root, bucket: bucket)
            return (store, store.bucket)
        } catch let e as ShutterbugStoreError {
            throw ValidationError("\(e) (or give --store-url)")
        }
    }

    static func cpu(_ who: __rusage_who) -> Double {
        var u = rusage()
        getrusage(who.rawValue, &u)
        return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6 + Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
    }

    static func outBlocks(_ who: __rusage_who) -> Int64 {
        var u = rusage()
        getrusage(who.rawValue, &u)
        return Int64(u.ru_oublock)
    }

    struct Throughput: Codable { var fileBytes: Int; var files: Int; var seconds: Double; var mbPerSecond: Double; var cpuMsPerMB: Double }

    func throughput(size: Int, bucket: S3Bucket, root: String) async throws -> Throughput {
        let folder = root + "/t\(size)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let settings = try UploadSettings(endpoint: bucket.endpoint, bucket: bucket.bucket, credentials: bucket.credentials, keyTemplate: try KeyTemplate("t\(size)/{path}"))
        let count = max(1, megabytes * 1_000_000 / size)
        var paths: [String] = []
        var bytes = [UInt8](repeating: 0, count: size)
        for i in 0..<count {
            for j in stride(from: 0, to: size, by: 512) { bytes[j] = UInt8.random(in: 0...255) }
            let path = folder + "/f\(i).dng"
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            paths.append(path)
        }
        let uploader = try Uploader(settings, folder: folder, logger: logger)
        let cpu0 = Self.cpu(RUSAGE_SELF)
        let began = ContinuousClock.now
        let run = Task { await uploader.run() }
        CaptureObservers.captured(paths)
        guard await uploader.drained(within: .seconds(1800)) else { throw ValidationError("uploads of \(size) bytes did not drain: \(uploader.status())") }
        let seconds = (ContinuousClock.now - began).secondsValue
        let cpu = Self.cpu(RUSAGE_SELF) - cpu0
        run.cancel()
        await run.value
        uploader.stopObserving()
        let mb = Double(count * size) / 1e6
        return Throughput(fileBytes: size, files: count, seconds: seconds, mbPerSecond: mb / seconds, cpuMsPerMB: cpu * 1000 / mb)
    }

    struct SlotRun: Codable { var uploads: Bool; var slots: Int; var p50Us: Double; var p90Us: Double; var p99Us: Double; var maxUs: Double; var overLine: Int; var uploadedBytes: Int64 }

    static func percentile(_ v: [Double], _ p: Double) -> Double {
        let s = v.sorted()
        return s.isEmpty ? .nan : s[min(s.count - 1, Int((Double(s.count - 1) * p).rounded()))]
    }

    /// `shutterbug timelapse` in real time; with `upload`, a backlog of 24 MB files queued in
    /// its folder first, which its uploader sends during the run.
    func slotRun(_ exe: String, upload: Bool, bucket: S3Bucket, root: String, keys: String) async throws -> SlotRun {
        let folder = root + "/slots-\(upload)"
        try FileManager.default.createDirectory(atPath: folder + "/backlog", withIntermediateDirectories: true)
        var args = ["timelapse", "--camera", "sim:imx477", "--size", "640x480", "--format", "jpeg", "--interval", "1s", "--count", String(slots),
                    "--output", folder, "--json", "--ignore-existing-photos"]
        if upload {
            let rate = try UploadSettings.parseBytes(bandwidth, what: "--bandwidth")
            let files = max(2, rate * (slots + 5) / 24_000_000)
            let journal = try UploadJournal(folder: folder)
            try journal.setSince(0)
            var bytes = [UInt8](repeating: 0, count: 24_000_000)
            var queued: [(path: String, key: String)] = []
            for i in 0..<files {
                for j in stride(from: 0, to: bytes.count, by: 4096) { bytes[j] = UInt8.random(in: 0...255) }
                let path = folder + "/backlog/b\(i).dng"
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                queued.append((path, "slots/backlog/b\(i).dng"))
            }
            try journal.enqueue(queued)
            args += ["--upload-url", bucket.endpoint, "--upload-bucket", bucket.bucket, "--upload-credentials-file", keys, "--upload-key", "slots/{path}",
                     "--upload-bandwidth", bandwidth, "--upload-part-size", "8M"]
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        var errors: [Double] = []
        for line in data.split(separator: 10) {
            guard let o = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any], o["slot"] is Int, let e = o["scheduleErrorUs"] as? Double else { continue }
            errors.append(e)
        }
        guard errors.count >= slots * 9 / 10 else { throw ValidationError("the timelapse took \(errors.count) of \(slots) slots (status \(p.terminationStatus))") }
        let uploaded = upload ? ((try? UploadJournal(folder: folder).counts().uploadedBytes) ?? 0) : 0
        // imx477's 1332x990 mode (what 640x480 runs in) has a 7.93 µs line: a locked slot is within it.
        return SlotRun(uploads: upload, slots: errors.count, p50Us: Self.percentile(errors, 0.5), p90Us: Self.percentile(errors, 0.9), p99Us: Self.percentile(errors, 0.99),
                       maxUs: errors.max() ?? .nan, overLine: errors.filter { $0 > 7.93 || $0 < 0 }.count, uploadedBytes: uploaded)
    }

    struct Writes: Codable { var slots: Int; var photoBytes: Int64; var processWrittenBytes: Int64; var deviceWrittenBytes: Int64?; var device: String?
        var processAmplification: Double; var deviceAmplification: Double? }

    /// The block device under `path` (its whole disk's name in /sys/block), and sectors written.
    static func device(of path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        let (major, minor) = (Int(st.st_dev >> 8) & 0xfff, Int(st.st_dev & 0xff))
        guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/sys/dev/block/\(major):\(minor)") else { return nil }
        let parts = link.split(separator: "/")
        // …/block/vda or …/block/mmcblk0/mmcblk0p2: the disk is the name after "block".
        guard let i = parts.firstIndex(of: "block"), i + 1 < parts.count else { return nil }
        return String(parts[i + 1])
    }

    static func sectorsWritten(_ device: String) -> Int64? {
        guard let text = try? String(contentsOfFile: "/sys/block/\(device)/stat", encoding: .utf8) else { return nil }
        let f = text.split(separator: " ")
        return f.count > 6 ? Int64(f[6]) : nil
    }

    func writes(_ exe: String, bucket: S3Bucket, root: String, keys: String) throws -> Writes {
        let folder = root + "/writes"
        let args = ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--interval", "10s", "--count", String(writeSlots), "--format", "dng,jpeg",
                    "--output", folder, "--upload-url", bucket.endpoint, "--upload-bucket", bucket.bucket, "--upload-credentials-file", keys, "--upload-key", "writes/{path}"]
        let dev = Self.device(of: root)
        sync()
        let sectors0 = dev.flatMap(Self.sectorsWritten)
        let blocks0 = Self.outBlocks(RUSAGE_CHILDREN)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw ValidationError("the write-measure timelapse exited \(p.terminationStatus)") }
        let written = (Self.outBlocks(RUSAGE_CHILDREN) - blocks0) * 512
        sync()
        let sectors1 = dev.flatMap(Self.sectorsWritten)
        var photos: Int64 = 0
        if let e = FileManager.default.enumerator(atPath: folder) {
            while let f = e.nextObject() as? String {
                guard f.hasSuffix(".dng") || f.hasSuffix(".jpg") else { continue }
                photos += Int64((try? FileManager.default.attributesOfItem(atPath: folder + "/" + f)[.size] as? Int) ?? 0)
            }
        }
        let device: Int64? = (sectors0 != nil && sectors1 != nil) ? (sectors1! - sectors0!) * 512 : nil
        return Writes(slots: writeSlots, photoBytes: photos, processWrittenBytes: written, deviceWrittenBytes: device, device: dev,
                      processAmplification: Double(written) / Double(max(1, photos)), deviceAmplification: device.map { Double($0) / Double(max(1, photos)) })
    }

    func run() async throws {
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("shutterbug").path
        guard FileManager.default.isExecutableFile(atPath: exe) else { throw ValidationError("needs the shutterbug binary beside this one (\(exe))") }
        let root = (dir ?? NSTemporaryDirectory()) + "/sb-bench-upload-\(getpid())"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let (store, bucket) = try await startStore(in: root)
        defer {
            store?.remove()
            try? FileManager.default.removeItem(atPath: root)
        }
        let keys = root + "/keys"
        try "\(bucket.credentials.accessKey):\(bucket.credentials.secretKey)\n".write(toFile: keys, atomically: true, encoding: .utf8)

        var sizes: [Throughput] = []
        for size in [256 << 10, 4 << 20, 24_000_000] { sizes.append(try await throughput(size: size, bucket: bucket, root: root)) }
        let idle = try await slotRun(exe, upload: false, bucket: bucket, root: root, keys: keys)
        let busy = try await slotRun(exe, upload: true, bucket: bucket, root: root, keys: keys)
        let w = try writes(exe, bucket: bucket, root: root, keys: keys)
        if json {
            let o: [String: Any] = ["throughput": sizes.map { ["fileBytes": $0.fileBytes, "files": $0.files, "mbPerSecond": $0.mbPerSecond, "cpuMsPerMB": $0.cpuMsPerMB] },
                                    "slotsIdle": ["p50Us": idle.p50Us, "p99Us": idle.p99Us, "maxUs": idle.maxUs, "slots": idle.slots],
                                    "slotsUploading": ["p50Us": busy.p50Us, "p99Us": busy.p99Us, "maxUs": busy.maxUs, "slots": busy.slots, "uploadedBytes": busy.uploadedBytes],
                                    "slotErrorRatioP50": busy.p50Us / idle.p50Us, "slotErrorRatioP90": busy.p90Us / idle.p90Us, "slotErrorRatioP99": busy.p99Us / idle.p99Us,
                                    "writes": ["photoBytes": w.photoBytes, "processWrittenBytes": w.processWrittenBytes, "deviceWrittenBytes": w.deviceWrittenBytes as Any,
                                               "processAmplification": w.processAmplification, "deviceAmplification": w.deviceAmplification as Any]]
            print(String(decoding: try JSONSerialization.data(withJSONObject: o, options: [.sortedKeys]), as: UTF8.self))
            return
        }
        print("uploads to \(bucket.endpoint) (\(storeURL == nil ? "SeaweedFS on loopback" : "given store")), \(megabytes) MB per size, \(ProcessInfo.processInfo.activeProcessorCount) cores")
        print("  file size     files    MB/s   CPU ms/MB   MB/s vs 24 MB")
        let big = sizes.last!.mbPerSecond
        for t in sizes {
            print(String(format: "  %9.2f MB %6d %8.1f %10.2f %10.2f", Double(t.fileBytes) / 1e6, t.files, t.mbPerSecond, t.cpuMsPerMB, t.mbPerSecond / big))
        }
        print("timelapse in real time, \(slots) slots 1 s apart (JPEG 640x480), slot to exposure start:")
        print(String(format: "  idle:             p50 %6.2f µs  p90 %8.2f µs  p99 %10.2f µs  max %10.2f µs  %d of %d slots off by more than a line", idle.p50Us, idle.p90Us, idle.p99Us, idle.maxUs, idle.overLine, idle.slots))
        print(String(format: "  uploading (%@/s): p50 %6.2f µs  p90 %8.2f µs  p99 %10.2f µs  max %10.2f µs  %d of %d slots off by more than a line (%.0f MB sent meanwhile)", bandwidth, busy.p50Us, busy.p90Us, busy.p99Us, busy.maxUs, busy.overLine, busy.slots, Double(busy.uploadedBytes) / 1e6))
        print(String(format: "  ratio uploading/idle: p50 %.3f, p90 %.3f, p99 %.3f", busy.p50Us / idle.p50Us, busy.p90Us / idle.p90Us, busy.p99Us / idle.p99Us))
        print("bytes written for \(w.slots) DNG+JPEG slots uploaded as they go (virtual time), photos \(String(format: "%.1f", Double(w.photoBytes) / 1e6)) MB:")
        print(String(format: "  by the process (rusage block output: files, journals, WAL, sidecars): %.1f MB, %.3f× the photos", Double(w.processWrittenBytes) / 1e6, w.processAmplification))
        if let d = w.deviceWrittenBytes, let a = w.deviceAmplification {
            print(String(format: "  by the disk %@ (/sys/block, every process's writes meanwhile): %.1f MB, %.3f× the photos", w.device ?? "?", Double(d) / 1e6, a))
        }
    }
}
