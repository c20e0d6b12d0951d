import ArgumentParser
import CSystemShims
import ShutterbugCore
import SimulatedCamera

#if canImport(Glibc)
import Glibc
#endif

@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shutterbug-bench",
        abstract: "Shutterbug's benchmarks (figures printed side by side; never timed tests).",
        subcommands: [BenchStream.self, BenchBracket.self, BenchOutput.self, BenchPreview.self, BenchTrigger.self, BenchPrecapture.self, BenchTimelapse.self, BenchServe.self, BenchClient.self, BenchFleet.self, BenchUpload.self, BenchSoak.self])
}

struct BenchStream: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "Stream frames from the simulated camera in virtual time through the backend and completion path.",
        discussion: """
            Prints CPU time per frame and resident memory at frame 1,000 and at the last frame. \
            The steady path should neither grow memory nor allocate per frame: the heap in use \
            is printed too. With --render, every frame's pixels are also rendered and read.
            """)

    @Option(name: .long, help: "Frames to stream (at least 4000).")
    var frames: Int = 10_000

    @Option(name: .long, help: ArgumentHelp("Simulated camera profile.", valueName: "sim:MODEL"))
    var camera: String = "sim:imx477"

    @Flag(name: .long, help: "Render and read every frame's pixels (viewfinder 800x600 XRGB8888).")
    var render = false

    @Flag(name: .long, help: "Print one JSON object instead of the table.")
    var json = false

    func validate() throws {
        guard frames >= 4000, frames <= 10_000_000 else { throw ValidationError("--frames must be in 4000...10000000, not \(frames)") }
        guard camera.hasPrefix("sim:"), SensorProfile.named(String(camera.dropFirst(4))) != nil else {
            throw ValidationError("--camera must be one of \(SensorProfile.catalogue.map { "sim:\($0.model)" }.joined(separator: ", ")), not '\(camera)'")
        }
    }

    func run() async throws {
        var options = SimulationOptions()
        options.clock = .virtual
        options.seed = 7
        let cam = SimulatedCamera(profile: SensorProfile.named(String(camera.dropFirst(4)))!, options: options)
        defer { cam.release() }
        _ = try cam.configure([StreamRequest(role: .viewfinder)])
        let slots = try cam.allocate()
        try cam.start(controls: .none)
        for s in 0..<slots { try cam.queue(slot: s, cookie: UInt64(s), controls: .none) }

        var checksum = 0
        var marks: [(frame: Int, cpu: Duration, rss: Int, heap: Int)] = [(0, cpuTime(), residentBytes(), heapInUse())]
        var cookie = UInt64(slots)
        var received = 0
        while received < frames {
            guard let c = try await cam.completions.next() else { break }
            received += 1
            if render {
                checksum &+= c.buffers[0].withUnsafeBytes { Int($0[$0.count / 2]) }
            }
            try cam.queue(slot: c.slot, cookie: cookie, controls: .none)
            cookie += 1
            if received == 1000 || received == frames / 2 || received == frames {
                marks.append((received, cpuTime(), residentBytes(), heapInUse()))
            }
        }
        try cam.stop()

        let warm = marks[1], half = marks[2], end = marks[3]
        let firstPer = (warm.cpu - marks[0].cpu) / 1000
        let steadyPer = (end.cpu - warm.cpu) / (frames - 1000)
        let rssRatio = Double(end.rss) / Double(max(warm.rss, 1))
        // Growth over the second half: a one-off lazy allocation shows in the first half only; a
        // leak shows in both.
        let heapGrowth = end.heap - half.heap
        let perFrameHeap = Double(heapGrowth) / Double(frames - frames / 2)
        if json {
            var o = JSONObject()
            o.add("camera", camera)
            o.add("frames", frames)
            o.add("render", render)
            o.add("cpuPerFrameFirst1000Us", firstPer.microsecondsValue)
            o.add("cpuPerFrameSteadyUs", steadyPer.microsecondsValue)
            o.add("rssAt1000", warm.rss)
            o.add("rssAtEnd", end.rss)
            o.add("rssRatio", rssRatio)
            o.add("heapAt1000", warm.heap)
            o.add("heapAtHalf", half.heap)
            o.add("heapAtEnd", end.heap)
            o.add("heapGrowthPerFrameSecondHalf", perFrameHeap)
            print(o.text)
            return
        }
        print("bench stream: \(frames) frames from \(camera) in virtual time\(render ? ", pixels rendered" : ""), \(slots) request slots")
        print("  CPU per frame, frames 1-1000:       \(fmtUs(firstPer))")
        print("  CPU per frame, frames 1001-\(frames):  \(fmtUs(steadyPer))   (steady / first = \(String(format2: steadyPer / firstPer)))")
        print("  resident memory at frame 1000:      \(fmtMiB(warm.rss))")
        print("  resident memory at frame \(frames):    \(fmtMiB(end.rss))   (ratio \(String(format2: rssRatio)))")
        print("  heap in use at frame 1000 / \(frames / 2) / \(frames): \(warm.heap) / \(half.heap) / \(end.heap) bytes (second half: \(heapGrowth) bytes, \(String(format2: perFrameHeap)) per frame)")
        if render { print("  checksum \(checksum)") }
    }

    private func fmtUs(_ d: Duration) -> String { String(format2: d.microsecondsValue) + " µs" }
    private func fmtMiB(_ b: Int) -> String { String(format2: Double(b) / 1_048_576) + " MiB" }
}

/// CPU time (user + system) of the process so far.
func cpuTime() -> Duration {
    var u = rusage()
    getrusage(Int32(RUSAGE_SELF.rawValue), &u)
    let us = Int64(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1_000_000 + Int64(u.ru_utime.tv_usec + u.ru_stime.tv_usec)
    return .microseconds(us)
}

/// Resident set size from /proc/self/statm.
func residentBytes() -> Int {
    guard let f = fopen("/proc/self/statm", "r") else { return 0 }
    defer { fclose(f) }
    var size = 0, resident = 0
    withUnsafeMutablePointer(to: &size) { s in
        withUnsafeMutablePointer(to: &resident) { r in
            _ = withVaList([s, r]) { vfscanf(f, "%ld %ld", $0) }
        }
    }
    return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Bytes the allocator has handed out and not had back (glibc's mallinfo2).
func heapInUse() -> Int {
    Int(sbshim_heap_in_use())
}
