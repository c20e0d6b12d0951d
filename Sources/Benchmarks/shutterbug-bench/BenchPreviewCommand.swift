import ArgumentParser
import Capture
import CaptureScheduler
import KMS
import ShutterbugCore
import SimulatedCamera

struct BenchPreview: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preview",
        abstract: "The DRM/KMS preview: CPU per displayed frame on each path, and a bracket with the preview on against off, in one run.",
        discussion: """
            Needs a display (the virtual board's vkms: board/virtual/run.sh -- \
            .build/release/shutterbug-bench preview). The simulated IMX477 streams in real time \
            at the display's size: an XRGB8888 viewfinder from dmabufs (zero-copy) and a \
            YUV420 still stream (converting), --seconds each, alternating for --rounds. CPU is \
            the preview thread's own (import or conversion, commits, events), not the camera's \
            rendering. Then a 9-step manual bracket on the 1332x990 mode (120 fps) in real time, \
            preview on (a viewfinder beside the still stream) and off, alternating: sensor \
            frames from first to last step (goal 9) and wall time from the capture call to the \
            last photo, on over off (goal 1.00).
            """)

    @Option(name: .long, help: "Seconds per path per round (1...60).")
    var seconds: Double = 3

    @Option(name: .long, help: "Rounds (1...20); medians are reported.")
    var rounds: Int = 3

    @Flag(name: .long, help: "One JSON object.")
    var json = false

    func validate() throws {
        guard (1...60).contains(seconds) else { throw ValidationError("--seconds must be in 1...60, not \(seconds)") }
        guard (1...20).contains(rounds) else { throw ValidationError("--rounds must be in 1...20, not \(rounds)") }
    }

    static func camera(clock: SimulationOptions.Clock = .realTime) -> SimulatedCamera {
        var o = SimulationOptions()
        o.clock = clock
        o.landing = .early
        return SimulatedCamera(profile: .imx477, options: o)
    }

    /// Shows the camera for `seconds` on one path; returns (µs of preview CPU per frame shown,
    /// frames shown, frames dropped).
    func display(_ format: PixelFormat) async throws -> (cpuPerFrameUs: Double, shown: Int, dropped: Int, path: String) {
        let (display, reason) = Display.open(.auto)
        guard let display else { throw ShutterbugError(.unsupported, reason) }
        let sink = try PreviewSink(display: display)
        let cam = Self.camera()
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let stream = StreamRequest(role: format == .xrgb8888 ? .viewfinder : .still, width: display.mode.width, height: display.mode.height, pixelFormat: format)
        _ = try await session.start(streams: [stream], preparedBracketCount: 1, sinks: [sink], framesPerSink: 2)
        try await Task.sleep(for: .seconds(seconds))
        let missed = await session.sinkStatistics.first?.dropped ?? 0
        await session.stop()
        sink.close()
        let s = sink.statistics
        return (Double(s.cpuNanoseconds) / 1000 / Double(max(s.shown, 1)), s.shown, s.dropped + missed, s.path?.rawValue ?? "-")
    }

    /// One 9-step bracket; returns (frames first to last, wall seconds from call to last photo).
    func bracket(preview: Bool) async throws -> (frames: Int, seconds: Double, previewShown: Int) {
        var sink: PreviewSink?
        if preview {
            let (display, reason) = Display.open(.auto)
            guard let display else { throw ShutterbugError(.unsupported, reason) }
            sink = try PreviewSink(display: display)
        }
        let cam = Self.camera()
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        var streams = [StreamRequest(role: .still, width: 1332, height: 990)]
        if let sink { streams.append(StreamRequest(role: .viewfinder, width: sink.display.mode.width, height: sink.display.mode.height, pixelFormat: .xrgb8888)) }
        _ = try await session.start(streams: streams, preparedBracketCount: 9, sinks: sink.map { [$0] } ?? [], framesPerSink: 2)
        // Run in: a photo first, as the other benchmarks do.
        _ = try await session.capture(PhotoSettings()).reduce(into: 0) { _, e in if case .photo(let p) = e { p.release() } }
        let steps: [(duration: Duration, gain: Gain)] = (0..<9).map { (.microseconds(Int64(500 << ($0 % 4))), Gain(1)) }
        let t0 = MonotonicClock.now()
        var seqs: [UInt32] = []
        for try await e in await session.capture(PhotoSettings(bracket: .manualExposure(steps))) {
            if case .photo(let p) = e {
                seqs.append(p.metadata.sequence)
                p.release()
            }
        }
        let elapsed = MonotonicClock.now() - t0
        await session.stop()
        sink?.close()
        return (Int(seqs.max()! - seqs.min()! + 1), elapsed.secondsValue, sink?.statistics.shown ?? 0)
    }

    func run() async throws {
        var zero: [Double] = [], conv: [Double] = [], zeroShown = 0, convShown = 0, paths: Set<String> = []
        var on: [Double] = [], off: [Double] = [], framesOn: [Int] = [], framesOff: [Int] = [], shownInBrackets = 0
        for _ in 0..<rounds {
            let z = try await display(.xrgb8888)
            let c = try await display(.yuv420)
            zero.append(z.cpuPerFrameUs); conv.append(c.cpuPerFrameUs)
            zeroShown += z.shown; convShown += c.shown
            paths.formUnion([z.path, c.path])
            for _ in 0..<3 {
                let a = try await bracket(preview: true)
                let b = try await bracket(preview: false)
                on.append(a.seconds); off.append(b.seconds)
                framesOn.append(a.frames); framesOff.append(b.frames)
                shownInBrackets += a.previewShown
            }
        }
        func median(_ v: [Double]) -> Double { v.sorted()[v.count / 2] }
        let ratio = median(zip(on, off).map { $0 / $1 })
        if json {
            var o = JSONObject()
            o.add("zeroCopyCpuUsPerFrame", median(zero))
            o.add("convertingCpuUsPerFrame", median(conv))
            o.add("convertingOverZeroCopy", median(conv) / median(zero))
            o.add("framesShownZeroCopy", zeroShown)
            o.add("framesShownConverting", convShown)
            o.add("bracketFramesPreviewOn", numbers: framesOn.map(Double.init))
            o.add("bracketFramesPreviewOff", numbers: framesOff.map(Double.init))
            o.add("bracketTimeOnOverOff", ratio)
            print(o.text)
            return
        }
        print("bench preview: simulated IMX477 in real time on the first display, \(rounds) rounds of \(String(format2: seconds)) s per path; paths seen: \(paths.sorted().joined(separator: ", "))")
        print("preview CPU per displayed frame   zero-copy \(String(format2: median(zero))) µs (\(zeroShown) frames)   converting \(String(format2: median(conv))) µs (\(convShown) frames)   converting / zero-copy \(String(format2: median(conv) / median(zero)))x")
        print("9-step bracket, 1332x990 at up to 120 fps: frames first to last with preview \(framesOn.map(String.init).joined(separator: ",")), without \(framesOff.map(String.init).joined(separator: ","))")
        print("  time from capture call to last photo, preview on / off (median of \(on.count)): \(String(format2: ratio)) (goal 1.00); frames the preview showed during them: \(shownInBrackets)")
    }
}
