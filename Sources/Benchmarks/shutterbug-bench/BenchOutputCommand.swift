import ArgumentParser
import Capture
import CaptureScheduler
import Foundation
import ImageOutput
import ShutterbugCore
import ShutterbugPosix
import SimulatedCamera

#if canImport(Glibc)
import Glibc
#endif

struct BenchOutput: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "output",
        abstract: "JPEG and DNG writing on a 12 MP frame, side by side with libjpeg-turbo's tjbench and dd.",
        discussion: """
            One simulated IMX477 frame (4056x3040: YUV420 and 12-bit CSI-2 packed raw). JPEG: \
            Shutterbug's encoder (EXIF and thumbnail included) against tjbench compressing the \
            same image from YUV 4:2:0 at the same quality, on one thread and on every core \
            (one tjbench process per core), in alternating rounds, the median round reported. \
            DNG: unpack, write, fsync and rename into --dir, against dd writing as many bytes \
            with conv=fsync into the same directory.
            """)

    @Option(name: .long, help: ArgumentHelp("Directory on the disk to measure (created, then emptied).", valueName: "dir"))
    var dir: String = ".shutterbug-bench"

    @Option(name: .long, help: "Seconds each JPEG measurement runs.")
    var seconds: Double = 2

    @Option(name: .customLong("rounds"), help: "JPEG rounds (ours, then tjbench); the median ratio is reported.")
    var rounds_: Int = 3

    @Option(name: .long, help: "DNG files (and dd runs) written.")
    var files: Int = 5

    @Option(name: .long, help: "JPEG quality, 1...100.")
    var quality: Int = 92

    @Flag(name: .long, help: "One JSON object instead of the table.")
    var json = false

    func validate() throws {
        guard (0.5...120).contains(seconds) else { throw ValidationError("--seconds must be in 0.5...120, not \(seconds)") }
        guard (1...15).contains(rounds_) else { throw ValidationError("--rounds must be in 1...15, not \(rounds_)") }
        guard (1...100).contains(files) else { throw ValidationError("--files must be in 1...100, not \(files)") }
        guard JPEGEncoder.qualityRange.contains(quality) else { throw ValidationError("--quality must be in 1...100, not \(quality)") }
    }

    func run() async throws {
        let (yuv, raw, facts) = try await Self.frame()
        let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let megapixels = Double(yuv.width * yuv.height) / 1e6
        let work = dir.hasSuffix("/") ? String(dir.dropLast()) : dir
        let outDir = try OutputDirectory(path: work, reserve: 0)
        defer { try? FileManager.default.removeItem(atPath: work + "/bench") }

        // tjbench's input: the same frame as RGB (it converts to YUV 4:2:0, then times
        // "Comp from YUV"). Our frame through djpeg would add a JPEG round trip; convert here.
        let ppm = work + "/bench/frame.ppm"
        try FileManager.default.createDirectory(atPath: work + "/bench", withIntermediateDirectories: true)
        try Self.writePPM(yuv, to: ppm)

        // Rounds alternate ours and tjbench so drift in the machine's speed hits both; the
        // round with the median ratio is reported.
        func measure(threads: Int) throws -> (Double, Double) {
            var rounds: [(ours: Double, peer: Double)] = []
            for _ in 0..<rounds_ {
                let ours = Self.encodeRate(yuv, quality: quality, facts: facts, threads: threads, seconds: seconds)
                let peer = try Self.tjbench(ppm, quality: quality, processes: threads, seconds: seconds)
                rounds.append((ours, peer))
            }
            let median = rounds.sorted { $0.ours / $0.peer < $1.ours / $1.peer }[rounds.count / 2]
            return (median.ours, median.peer)
        }
        let (oursOne, tjOne) = try measure(threads: 1)
        let (oursAll, tjAll) = try measure(threads: cores)

        // DNG against dd.
        var dngBytes: Int64 = 0
        let dngStart = MonotonicClock.now()
        for i in 0..<files {
            let f = try outDir.write("bench/dng-\(i).dng") { fd in try DNGEncoder.write(raw, facts: facts, colourGains: ColourGains(red: 1.9, blue: 1.55), to: fd) }
            dngBytes += f.bytes
        }
        let dngTime = (MonotonicClock.now() - dngStart).secondsValue
        let perFile = Int((dngBytes / Int64(files) + (1 << 20) - 1) >> 20)
        let ddStart = MonotonicClock.now()
        for i in 0..<files {
            let r = try Self.run("/usr/bin/env", ["dd", "if=/dev/zero", "of=\(work)/bench/dd-\(i)", "bs=1M", "count=\(perFile)", "conv=fsync"])
            guard r.status == 0 else { throw ShutterbugError(.system, "dd failed: \(r.err)") }
        }
        let ddTime = (MonotonicClock.now() - ddStart).secondsValue
        let ddBytes = Double(perFile << 20) * Double(files)
        let dngRate = Double(dngBytes) / dngTime / 1_048_576, ddRate = ddBytes / ddTime / 1_048_576

        if json {
            var o = JSONObject()
            o.add("megapixels", megapixels)
            o.add("cores", cores)
            o.add("quality", quality)
            o.add("jpegOneThreadFps", oursOne)
            o.add("tjbenchOneThreadFps", tjOne)
            o.add("jpegOneThreadRatio", oursOne / tjOne)
            o.add("jpegAllCoresFps", oursAll)
            o.add("tjbenchAllCoresFps", tjAll)
            o.add("jpegAllCoresRatio", oursAll / tjAll)
            o.add("dngMiBps", dngRate)
            o.add("ddMiBps", ddRate)
            o.add("dngRatio", dngRate / ddRate)
            print(o.text)
            return
        }
        print("frame: \(yuv.width)x\(yuv.height) (\(String(format2: megapixels)) MP) YUV420 and \(raw.format); quality \(quality); \(cores) cores; disk: \(work)")
        print("                         shutterbug        peer              ratio (goal >= 0.95)")
        func row(_ name: String, _ a: Double, _ b: Double, _ unit: String, _ peer: String) {
            let l = "\(String(format2: a)) \(unit)", r = "\(String(format2: b)) \(unit) \(peer)"
            print("\(name.padding(toLength: 25, withPad: " ", startingAt: 0))\(l.padding(toLength: 18, withPad: " ", startingAt: 0))\(r.padding(toLength: 30, withPad: " ", startingAt: 0))\(String(format2: a / b))")
        }
        row("JPEG, one thread", oursOne, tjOne, "fps", "tjbench")
        row("JPEG, \(cores) cores", oursAll, tjAll, "fps", "tjbench x\(cores)")
        row("DNG write + fsync", dngRate, ddRate, "MiB/s", "dd")
        print("JPEG: \(String(format2: oursOne * megapixels)) MP/s per thread, EXIF and thumbnail included; DNG: \(dngBytes / Int64(files)) bytes per file, unpacked to 16 bits")
    }

    /// One frame of the simulated IMX477 at full resolution, both streams.
    static func frame() async throws -> (FrameCopy, FrameCopy, PhotoFacts) {
        var o = SimulationOptions()
        o.clock = .virtual
        let profile = SensorProfile.imx477
        let cam = SimulatedCamera(profile: profile, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let config = try await session.start(streams: [StreamRequest(role: .still), StreamRequest(role: .raw)], preparedBracketCount: 1)
        var result: (FrameCopy, FrameCopy, PhotoFacts)?
        for try await e in await session.capture(PhotoSettings(formats: [.dng, .jpeg])) {
            if case .photo(let p) = e {
                let facts = PhotoFacts(photo: p, captureID: 1, stepCount: 1, bias: nil, camera: CameraDescription(profile: profile), clock: .sample())
                let y = config.streams.firstIndex { $0.pixelFormat == .yuv420 }!, r = config.streams.firstIndex { $0.pixelFormat.bayer != nil }!
                result = (FrameCopy(p.buffers[y]), FrameCopy(p.buffers[r]), facts)
                p.release()
            }
        }
        await session.stop()
        guard let result else { throw ShutterbugError(.system, "no frame to benchmark") }
        return result
    }

    /// Frames per second encoding `frame` on `threads` threads at once for `seconds`.
    static func encodeRate(_ frame: FrameCopy, quality: Int, facts: PhotoFacts, threads: Int, seconds: Double) -> Double {
        let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: threads)
        counts.initialize(repeating: 0)
        defer { counts.deallocate() }
        let box = UnsafeSendable(counts)
        let start = MonotonicClock.now()
        let end = start + .seconds(seconds)
        let workers = (0..<threads).map { t in
            OSThread {
                // Each thread with its own output memory, as the writer's workers have; a
                // short warm-up, as tjbench has, then count whole frames.
                let scratch = JPEGScratch()
                _ = try? JPEGEncoder.encode(frame, quality: quality, facts: facts, scratch: scratch) { $0.count }
                while MonotonicClock.now() < end {
                    _ = try? JPEGEncoder.encode(frame, quality: quality, facts: facts, scratch: scratch) { $0.count }
                    box.value[t] += 1
                }
            }
        }
        for w in workers { w.join() }
        let elapsed = (MonotonicClock.now() - start).secondsValue
        return Double(counts.reduce(0, +)) / elapsed
    }

    /// tjbench's "Comp from YUV" frame rate, summed over `processes` running at once.
    static func tjbench(_ ppm: String, quality: Int, processes: Int, seconds: Double) throws -> Double {
        let ps: [(Process, Pipe)] = try (0..<processes).map { _ in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = ["tjbench", ppm, String(quality), "-subsamp", "420", "-yuv", "-componly", "-nowrite", "-benchtime", String(seconds), "-warmup", "0.5"]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            try p.run()
            return (p, out)
        }
        var total = 0.0
        for (p, out) in ps {
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            guard let line = text.split(separator: "\n").first(where: { $0.contains("Comp from YUV") }),
                  let fps = line.split(separator: " ").compactMap({ Double($0) }).first else {
                throw ShutterbugError(.system, "tjbench (libjpeg-turbo-progs) did not report 'Comp from YUV'; is it installed? \(text.suffix(200))")
            }
            total += fps
        }
        return total
    }

    /// The YUV420 frame as 8-bit RGB (BT.601 full range, what JPEG's YCbCr is).
    static func writePPM(_ f: FrameCopy, to path: String) throws {
        var out = Array("P6\n\(f.width) \(f.height)\n255\n".utf8)
        out.reserveCapacity(out.count + f.width * f.height * 3)
        let y = f.planes[0], u = f.planes[1], v = f.planes[2]
        for row in 0..<f.height {
            for col in 0..<f.width {
                let Y = Double(f.bytes[y.offset + row * y.stride + col])
                let Cb = Double(f.bytes[u.offset + row / 2 * u.stride + col / 2]) - 128
                let Cr = Double(f.bytes[v.offset + row / 2 * v.stride + col / 2]) - 128
                for c in [Y + 1.402 * Cr, Y - 0.344136 * Cb - 0.714136 * Cr, Y + 1.772 * Cb] {
                    out.append(UInt8(min(max(c.rounded(), 0), 255)))
                }
            }
        }
        guard FileManager.default.createFile(atPath: path, contents: Data(out)) else {
            throw ShutterbugError(.system, "cannot write \(path)")
        }
    }

    static func run(_ exe: String, _ args: [String]) throws -> (status: Int32, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: e, as: UTF8.self))
    }
}

/// Each worker writes only its own slot.
struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ v: T) { value = v }
}
