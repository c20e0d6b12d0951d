import Synchronization
import ArgumentParser
import JobOptions
import Capture
import ShutterbugCore
import SimulatedCamera

struct Stream: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream frames and print what each one was really exposed with.",
        discussion: """
            One line per frame: sequence, sensor timestamp, exposure, analogue × digital gain, \
            frame duration, lens position, and what changed from the previous frame. Manual \
            settings go with the first request unless --apply-at says otherwise; the summary \
            names the first frame that carries them, which on a Raspberry Pi is several frames \
            after the request that asked.
            """)

    @OptionGroup var camera: CameraOptions
    @OptionGroup var previewOptions: PreviewOptions

    @Option(name: .long, parsing: .unconditional, help: "Number of frames to print.")
    var frames: Int = 30

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Fixed exposure time: 1/250, 4ms, 4000us or 0.5s.", valueName: "time"))
    var exposure: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Fixed analogue gain (1.0 = ISO 100).", valueName: "gain"))
    var gain: Double?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Lens position in dioptres (0 = infinity, 2 = 50 cm); manual focus.", valueName: "dpt"))
    var lens: Double?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Queue the manual settings with this request (0-based) instead of at start, to watch them land.", valueName: "n"))
    var applyAt: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Frame rate limit; without it the camera's default (30 fps on the Pi).", valueName: "fps"))
    var fps: Double?

    @Option(name: .long, help: ArgumentHelp("Stream role: viewfinder, video, still or raw.", valueName: "role"))
    var role: String = "viewfinder"

    @Option(name: .long, help: ArgumentHelp("Stream size, e.g. 800x600; default: the role's.", valueName: "WxH"))
    var size: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Buffers (request slots) to allocate; default: the role's.", valueName: "n"))
    var buffers: Int?

    @Flag(name: .long, help: "One JSON object per frame, then a summary object.")
    var json = false

    func validate() throws {
        guard (1...1_000_000).contains(frames) else { throw ValidationError("--frames must be in 1...1000000, not \(frames)") }
        if let applyAt, applyAt < 0 || applyAt >= frames {
            throw ValidationError("--apply-at must be in 0...\(frames - 1) (a request among the --frames), not \(applyAt)")
        }
        if let fps { try NumericInput.check(fps, "--fps", in: 0.01...1000, unit: "frames per second") }
        if let gain { try NumericInput.check(gain, "--gain", in: 1...1000) }
        if let lens { try NumericInput.check(lens, "--lens", in: 0...100, unit: "dioptres") }
        if let buffers, !(1...32).contains(buffers) { throw ValidationError("--buffers must be in 1...32, not \(buffers)") }
        if StreamRole(rawValue: role) == nil { throw ValidationError("--role must be viewfinder, video, still or raw, not '\(role)'") }
        _ = try NumericInput.size(size, "--size", example: "800x600")
        if let exposure { _ = try NumericInput.exposure(Substring(exposure), "--exposure") }
    }

    func run() async throws {
        let cam = try camera.open()
        defer { cam.release() }
        let wanted = try NumericInput.size(size, "--size", example: "800x600")
        let session = CaptureSession(backend: cam)
        let preview = previewOptions.open()
        defer { preview?.close() }
        // The session keeps its pipeline depth in flight and at least one slot for a photo.
        var bracketSlots = 1
        if let buffers {
            let least = CaptureSession.pipelineDepth + 1
            if buffers < least { notice("adjusted: --buffers \(buffers) to \(least) (the session keeps \(CaptureSession.pipelineDepth) requests in flight and one buffer for a photo)") }
            bracketSlots = max(1, buffers - CaptureSession.pipelineDepth)
        }
        let config: CameraConfiguration
        do {
            config = try await session.prepare(streams: [StreamRequest(role: StreamRole(rawValue: role)!, width: wanted?.0, height: wanted?.1)],
                                               preparedBracketCount: bracketSlots, sinks: preview.map { [$0] } ?? [], framesPerSink: PreviewOptions.framesPerSink)
        } catch let e as ShutterbugError where e.code == .invalidArgument {
            throw ValidationError(e.message)
        }
        for a in config.adjustments { notice("adjusted: \(a)") }
        let manual = try manualControls(for: cam)
        // Watch from the first request; the settings go with request --apply-at, or are in
        // force from the start. Each frame is printed where the session handles it, so a frame
        // costs no wake of another task (bench-cam.sh compares this with libcamera's cam).
        let (json, applyAt) = (self.json, self.applyAt)
        let printer = Mutex(FramePrinter(json: json, tolerance: manual.tolerance, startedWithThem: applyAt == nil))
        let timeout = Duration.seconds(2) + (manual.exposure ?? .milliseconds(250)) * 4
        let what = "streaming from \(cam.info.id)"
        let watch = StallWatch(cameraClock: cam.pacesByDemand ? (timeout, what) : nil)
        let done = await session.requests(count: frames) { r in
            guard watch.tick(at: r.metadata.sensorTimestamp) else { return }
            printer.withLock { $0.frame(r, target: manual) }
        }
        if let applyAt { try await session.send(manual.controls, withRequest: UInt64(applyAt)) }
        // The header first: frames are printed as they come, from the first request on.
        if !json {
            let slots = config.streams.map(\.bufferCount).min() ?? 0
            print("camera \(cam.info.id) (\(cam.info.model)): \(config.streams.map(\.description).joined(separator: ", ")), \(slots) request slots")
            if let mode = cam.sensorModeReport { print("sensor mode \(mode)") }
            print("buffers \(config.bufferDescription), budget \(session.memoryBudget)")
            if let note = manual.note { print(note) }
        }
        try await session.start(controls: applyAt == nil ? manual.controls : manual.baseline)

        do {
            try await withStallWatchdog(timeout: timeout, what: what, watching: watch) { _ in
                // Virtual time: the frame after a stall ends the loop where real time's
                // watchdog would have.
                for await _ in done where watch.stall != nil { break }
            }
            if let stall = watch.stall { throw stall }
        } catch {
            // A stalled camera: the session stops before the defer releases the camera.
            await session.stop()
            throw error
        }
        // The monitor also ends when the camera fails: say why, after what was printed.
        if let failure = await session.failureReason {
            await session.stop()
            throw failure
        }
        await session.stop()
        if let preview {
            preview.close()
            notice(preview.summaryLine)
        }
        let finished = printer.withLock { $0 }
        let missing = await session.unsupportedControls.intersection(manual.controls.set)
        finished.summary(camera: cam.info.id, unsupported: missing, target: manual, mode: cam.sensorModeReport, bufferBytes: config.bufferBytes)
    }

    /// Validates the manual settings against the camera and builds the controls.
    private func manualControls(for cam: any CameraBackend) throws -> ManualSettings {
        let limits = cam.controlLimits
        var s = ManualSettings()
        // Beyond the sensor: adjusted to the nearest it can do, and said (as libcamera's
        // validate() does), not refused.
        if let exposure {
            var e = try ExposureParser.parse(exposure)
            if let range = limits.exposureTime, !range.contains(e) {
                let clamped = min(max(e, range.lowerBound), range.upperBound)
                notice("adjusted: exposure \(e.exposureDescription) to \(clamped.exposureDescription) (\(cam.info.id) does \(range.lowerBound.microsecondsValue.rounded()) µs to \(range.upperBound.millisecondsDescription))")
                e = clamped
            }
            s.exposure = e
            s.controls.exposureTime = e
        }
        if var gain {
            if let range = limits.analogueGain, !range.contains(gain) {
                let clamped = min(max(gain, range.lowerBound), range.upperBound)
                let (from, to) = String.distinct(gain, clamped)
                notice("adjusted: gain \(from) to \(to) (\(cam.info.id) does \(String(format2: range.lowerBound)) to \(String(format2: range.upperBound)))")
                gain = clamped
            }
            s.gain = gain
            s.controls.analogueGain = Gain(gain)
        }
        if exposure != nil, gain != nil { s.controls.aeEnabled = false }
        if let lens {
            if !limits.supported.contains(.lensPosition) {
                throw ShutterbugError(.unsupported, "\(cam.info.id) has no focus motor; lens positions need a camera with one, such as sim:imx708 (Camera Module 3)")
            }
            var lens = lens
            if let range = limits.lensPosition, !range.contains(lens) {
                let clamped = min(max(lens, range.lowerBound), range.upperBound)
                notice("adjusted: lens position \(String(format2: lens)) dpt to \(String(format2: clamped)) dpt (\(cam.info.id)'s range \(String(format2: range.lowerBound)) to \(String(format2: range.upperBound)) dpt)")
                lens = clamped
            }
            s.lens = lens
            s.controls.afMode = .manual
            s.controls.lensPosition = Dioptres(lens)
        }
        // Frame duration: the rate asked for, and long enough for the exposure, or the sensor
        // silently shortens it.
        var note: [String] = []
        if let mode = cam.configuredMode {
            s.tolerance = mode.lineTime
            if let e = s.exposure {
                let period = fps.map { Duration.seconds(exactly: 1 / $0) }
                if let period, e + mode.margin > period {
                    note.append("exposure \(e.exposureDescription) does not fit \(String(format2: fps!)) fps; frames lengthen to \((e + mode.margin).millisecondsDescription)")
                }
                // Without --fps, the Raspberry Pi IPA's default rate limit (30 fps).
                let lower = max(period ?? .nanoseconds(33_333_333), mode.minFramePeriod)
                s.frameLimits = lower...max(lower, e + mode.margin, period ?? .zero)
            } else if let period = fps.map({ Duration.seconds(exactly: 1 / $0) }) {
                if period < mode.minFramePeriod {
                    note.append("\(String(format2: fps!)) fps is beyond this mode's \(String(format2: mode.maxFrameRate)) fps; running at \(String(format2: mode.maxFrameRate)) fps")
                }
                s.frameLimits = max(period, mode.minFramePeriod)...max(period, mode.minFramePeriod)
            }
        } else if let period = fps.map({ Duration.seconds(exactly: 1 / $0) }) {
            s.frameLimits = period...max(period, (s.exposure ?? .zero) + .milliseconds(2))
        } else if let e = s.exposure {
            s.frameLimits = .zero...(e + .milliseconds(2))
        }
        if let f = s.frameLimits {
            s.controls.frameDurationLimits = f
            s.baseline.frameDurationLimits = f
        }
        s.note = note.isEmpty ? nil : note.joined(separator: "; ")
        return s
    }
}

/// The manual settings a stream asks for, and what to look for in the frames.
struct ManualSettings: Sendable {
    var controls = CameraControls()
    /// The controls in force before the manual ones apply (frame rate only).
    var baseline = CameraControls()
    var exposure: Duration?
    var gain: Double?
    var lens: Double?
    var frameLimits: ClosedRange<Duration>?
    /// How far a reported exposure may be from the requested one (one line).
    var tolerance: Duration = .microseconds(100)
    var note: String?

    var isEmpty: Bool { exposure == nil && gain == nil && lens == nil }

    /// Whether a frame's metadata carries these settings.
    func isCarried(by m: FrameMetadata) -> Bool {
        if let e = exposure {
            guard let r = m.exposureTime, abs((r - e).nanosecondsValue) <= tolerance.nanosecondsValue else { return false }
        }
        if let g = gain {
            guard let r = m.analogueGain, abs(r.value - g) <= max(0.02 * g, 0.01) else { return false }
        }
        if let l = lens {
            guard let r = m.lensPosition, abs(r.value - l) < 0.01 else { return false }
        }
        return true
    }
}
