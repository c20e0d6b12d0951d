import ArgumentParser
import Capture
import CaptureScheduler
import ImageOutput
import KMS
import LinuxGPIO
import ProcessTriggers
import ShutterbugCore
import SimulatedCamera

#if canImport(Glibc)
import Glibc
#endif

struct TriggerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trigger",
        abstract: "Capture a photo (or a bracket) exposed after each trigger: a GPIO edge, a signal, Enter, or a simulated pattern.",
        discussion: """
            The camera keeps streaming; each trigger asks for the first frame whose exposure \
            began after the trigger's instant (a GPIO edge's kernel timestamp on \
            CLOCK_MONOTONIC, the clock of SensorTimestamp). One capture runs at a time; \
            triggers that come meanwhile are queued, coalesced or dropped by --policy, and \
            every one is counted. Each capture prints its lags: trigger to exposure start, to \
            the frame delivered, to the files on disk. Runs until --count captures, \
            --duration, the source ends, or SIGINT/SIGTERM; then a summary with the counts and \
            the lag distribution.
            """)

    @OptionGroup var camera: CameraOptions
    @OptionGroup var previewOptions: PreviewOptions

    @Option(name: .long, help: ArgumentHelp("A GPIO line: its name (GPIO17, or a gpio-sim label) or CHIP:OFFSET (gpiochip0:17).", valueName: "line"))
    var gpio: String?

    @Option(name: .long, help: ArgumentHelp("GPIO edges that trigger: falling (a button to ground), rising or both.", valueName: "edge"))
    var edge: String = "falling"

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("GPIO debounce by the kernel: 10ms, 500us (1 µs...1 s).", valueName: "time"))
    var debounce: String?

    @Option(name: .long, help: ArgumentHelp("GPIO bias: pull-up, pull-down or disabled (default: as the line is).", valueName: "bias"))
    var bias: String?

    @Flag(name: .long, help: "GPIO: the line is active-low.")
    var activeLow = false

    @Flag(name: .long, help: "Trigger on SIGUSR1 (kill -USR1 PID).")
    var signal = false

    @Flag(name: .long, help: "Trigger on Enter (each line on standard input).")
    var keypress = false

    @Option(name: .long, help: ArgumentHelp("A simulated pattern: regular:200ms, poisson:200ms (mean gap) or burst:3,10ms,1s (count, spacing, pause).", valueName: "pattern"))
    var simulated: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Exposure biases for a bracket per trigger, e.g. -2,0,2.", valueName: "ev,..."))
    var ev: String?

    @Option(name: .long, help: ArgumentHelp("While a capture runs, further triggers are queued (up to --queue), coalesced into one (the newest) or dropped.", valueName: "queue|coalesce|drop"))
    var policy: String = "queue"

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Triggers that may wait with --policy queue (1...64).", valueName: "n"))
    var queue: Int = 8

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Stop after this many captures (1...1000000).", valueName: "n"))
    var count: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Stop after this many seconds (0.1...31536000).", valueName: "s"))
    var duration: Double?

    @Option(name: .long, help: ArgumentHelp("Stream role: still (full resolution), video or viewfinder.", valueName: "role"))
    var role: String = "still"

    @Option(name: .long, help: ArgumentHelp("Write each capture's photos (DNG and JPEG) and sidecar here.", valueName: "dir"))
    var output: String?

    @Option(name: .long, help: ArgumentHelp("File formats with --output: dng, jpeg, or both.", valueName: "dng,jpeg"))
    var format: String = "jpeg"

    @Option(name: .long, help: ArgumentHelp("With DNG: the raw stream's size, which picks the sensor mode on a Pi (e.g. 4056x3040 for the HQ camera's full-resolution mode); default the mode the processed stream runs in alone.", valueName: "WxH"))
    var rawSize: String?

    @Flag(name: .long, help: "One JSON object per capture, then a summary object.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("A GPIO line to drive while a capture runs (a busy LED, a flash or tally line): its name or CHIP:OFFSET; released when the capture's frames are captured.", valueName: "line"))
    var busyLine: String?

    @Flag(name: .long, help: "The --busy-line is active-low (driven low while busy).")
    var busyActiveLow = false

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("With --external-trigger: the trigger pulse's width, which sets the exposure (plus the sensor's 14.26 µs): 10ms, 500us.", valueName: "time"))
    var pulseWidth: String = "10ms"

    func validate() throws {
        _ = try NumericInput.size(rawSize, "--raw-size", example: "2028x1520")
        let sources = [gpio != nil, signal, keypress, simulated != nil].filter { $0 }.count
        guard sources == 1 else { throw ValidationError("give exactly one trigger source: --gpio LINE, --signal, --keypress or --simulated PATTERN") }
        guard ["falling", "rising", "both"].contains(edge) else { throw ValidationError("--edge must be falling, rising or both, not '\(edge)'") }
        if let bias, GPIOBias(rawValue: bias) == nil { throw ValidationError("--bias must be pull-up, pull-down or disabled, not '\(bias)'") }
        _ = try debouncePeriod()
        if let simulated { _ = try Self.pattern(simulated) }
        if let ev { _ = try NumericInput.numbers(ev, "--ev", in: -8...8, unit: "stops", example: "-2,0,2") }
        guard TriggerPolicy(rawValue: policy) != nil else { throw ValidationError("--policy must be queue, coalesce or drop, not '\(policy)'") }
        guard TriggerQueue.limitRange.contains(queue) else { throw ValidationError("--queue must be in 1...64, not \(queue)") }
        if let count, !(1...1_000_000).contains(count) { throw ValidationError("--count must be in 1...1000000, not \(count)") }
        if let duration { try NumericInput.check(duration, "--duration", in: 0.1...31_536_000, unit: "s") }
        guard ["still", "video", "viewfinder"].contains(role) else { throw ValidationError("--role must be still, video or viewfinder, not '\(role)'") }
        if camera.virtualTime && simulated == nil {
            throw ValidationError("--virtual-time runs the camera on its own clock; a GPIO edge, a signal or Enter happens on CLOCK_MONOTONIC: drop --virtual-time")
        }
        _ = try formats()
        _ = try pulse()
        if camera.externalTrigger && ev != nil {
            throw ValidationError("--ev needs a free-running sensor: with --external-trigger each pulse exposes one frame for the pulse's width")
        }
    }

    /// The pulse width, 1 µs...15 s (the sensor's range is checked when the camera is open).
    func pulse() throws -> Duration {
        try NumericInput.exposure(Substring(pulseWidth), "--pulse-width", in: 1e-6...15, kind: "a time")
    }

    func formats() throws -> Set<PhotoFormat> { try Bracket.formats(parsing: format) }

    /// The kernel's debounce period, 1 µs...1 s.
    func debouncePeriod() throws -> Duration? {
        try debounce.map { try NumericInput.exposure(Substring($0), "--debounce", in: 1e-6...1, kind: "a time") }
    }

    /// regular:200ms, poisson:200ms, burst:3,10ms,1s.
    static func pattern(_ text: String) throws -> PatternTriggerSource.Pattern {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        let form = "--simulated takes regular:200ms, poisson:200ms or burst:3,10ms,1s"
        guard parts.count == 2 else { throw ValidationError("\(form), not '\(text)'") }
        func time(_ s: String) throws -> Duration { try NumericInput.exposure(Substring(s), "--simulated", in: 0.001...3600, kind: "a time") }
        switch parts[0] {
        case "regular": return .regular(period: try time(parts[1]))
        case "poisson": return .poisson(mean: try time(parts[1]), seed: 1)
        case "burst":
            let b = parts[1].split(separator: ",").map(String.init)
            guard b.count == 3, let n = Int(b[0]), (1...1000).contains(n) else { throw ValidationError("\(form) (count 1...1000), not '\(text)'") }
            return .burst(count: n, spacing: try time(b[1]), pause: try time(b[2]))
        default: throw ValidationError("\(form), not '\(text)'")
        }
    }

    enum Event: Sendable {
        /// A trigger; `handled`, where given, is called once the trigger has been dealt with:
        /// the capture it started is held by the session (or it started none).
        case trigger(Trigger, handled: (@Sendable () -> Void)? = nil)
        /// External-trigger mode: the sensor ignored the pulse (it came during the previous
        /// frame's readout), so there is no frame to capture.
        case ignoredBySensor(Trigger)
        /// The capture's frames are all captured: the next may start while its files are written.
        case framesCaptured(Trigger)
        case finished(Trigger, Result<Captured, ShutterbugError>)
        case stop(String)
        /// The source has no more triggers: what waits is still captured.
        case sourceEnded
    }

    struct Captured: Sendable {
        var lag: TriggerLag
        var sequences: [UInt32]
        var files: [String]
        /// How long the busy line was held.
        var busy: Duration?
    }

    func run() async throws {
        let cam = try camera.open()
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let preview = previewOptions.open()
        defer { preview?.close() }
        let formats = try self.formats()
        let biases = try ev.map { try NumericInput.numbers($0, "--ev", in: -8...8, unit: "stops", example: "-2,0,2") }
        let bracket: BracketSettings? = biases.map { .exposureBias($0) }
        let processed = StreamRequest(role: StreamRole(rawValue: role)!)
        let (planned, rawRule) = try RawStreamRule.streams(for: cam, processed: processed, raw: output != nil && formats.contains(.dng), rawSize: rawSize)
        var streams = planned
        if let preview {
            streams.append(PreviewOptions.viewfinder(for: preview.display, camera: cam))
        }
        // External-trigger mode: the sensor exposes one frame per pulse, for the pulse's width;
        // gain and white balance are fixed (as a Pi user sets --gain and --awbgains), so the
        // pipeline has nothing to converge and no start-up frames.
        var startControls: CameraControls?
        let width = try pulse()
        let externalSensor = cam.capabilities.externalTrigger
        if let input = externalSensor, let t = input.triggeredSensor.externalTrigger {
            let sensor = input.triggeredSensor
            let range = sensor.exposureRange(in: sensor.fullResolution)
            guard range.contains(width + t.exposureOffset) else {
                throw ValidationError("--pulse-width \(pulseWidth) exposes for \((width + t.exposureOffset).preciseDescription); \(sensor.model) exposes \(range.lowerBound.preciseDescription)...\(range.upperBound.preciseDescription) (the pulse's width + \(t.exposureOffset.preciseDescription))")
            }
            startControls = CameraControls(aeEnabled: false, exposureTime: width + t.exposureOffset, analogueGain: Gain(1.0), awbEnabled: false,
                                           colourGains: input.startColourGains)
        }
        let config: CameraConfiguration
        do {
            config = try await session.start(streams: streams, preparedBracketCount: max(bracket?.count ?? 1, 1), controls: startControls,
                                             sinks: preview.map { [$0] } ?? [], framesPerSink: PreviewOptions.framesPerSink)
        } catch let e as ShutterbugError where e.code == .invalidArgument {
            throw ValidationError(e.message)
        }
        if let line = rawRule?.line(cam.sensorModeReport) { notice(line) }
        for a in config.adjustments { notice("adjusted: \(a)") }
        var writer: PhotoFileWriter?
        if let output {
            let directory = try OutputDirectory(path: output, reserve: 64 << 20)
            let description = Bracket.cameraDescription(cam, config)
            writer = try PhotoFileWriter(directory: directory, streams: config.streams, camera: description)
            try writer!.check(formats)
        }

        let busy = try busyLine.map { try GPIOOutputLine.request(line: $0, activeLow: busyActiveLow) }
        if let busy, !json { notice("busy line: \(busyLine!) (\(busy.chipPath) line \(busy.offset))\(busyActiveLow ? ", active-low" : "")") }

        // Armed once the camera streams settled frames (past its start-up frames, which no
        // capture takes): a trigger before then would wait them out, a start-up lag that is
        // not the shutter's. A triggered sensor makes no frame until pulsed.
        if externalSensor == nil {
            do {
                try await session.captureFrame(exposedAfter: cam.now, timeout: .seconds(10)).release()
            } catch let e as ShutterbugError {
                throw ShutterbugError(e.code, "the camera streamed no settled frame to arm the trigger on: \(e.message)", errno: e.errno)
            }
        }
        // The source, on the camera's clock.
        let source: any TriggerSource
        var gpioSource: GPIOTriggerSource?
        if let gpio {
            let edges: GPIOEdges = edge == "rising" ? .rising : edge == "both" ? .both : .falling
            let g = try GPIOTriggerSource(line: gpio, edges: edges, bias: bias.flatMap(GPIOBias.init), activeLow: activeLow,
                                          debounce: try debouncePeriod())
            gpioSource = g
            source = g
            notice("waiting for \(edge) edges on \(gpio) (\(g.chipPath) line \(g.offset))")
        } else if signal {
            source = try SignalTriggerSource(signal: SIGUSR1, name: "SIGUSR1")
            notice("waiting for SIGUSR1: kill -USR1 \(getpid())")
        } else if keypress {
            source = try KeypressTriggerSource()
            notice("press Enter to capture")
        } else {
            let start = await session.latestFrame?.sensorTimestamp ?? MonotonicClock.now()
            source = PatternTriggerSource(try Self.pattern(simulated!), count: 1_000_000, start: start + .milliseconds(100),
                                          realTime: !camera.virtualTime)
        }
        if !json {
            let sensor = externalSensor.map { _ in "external trigger, each pulse \(pulseWidth) wide" } ?? "free-running"
            print("trigger on \(cam.info.id) (\(sensor)): \(config.streams[0]), source \(source.name), policy \(policy)")
        }
        /// The trigger wired to the sensor's trigger input as well: every trigger exposes a
        /// frame, whatever the queue then does with it, unless the sensor ignores the pulse.
        @Sendable func pulseSensor(_ t: Trigger) -> Bool {
            guard let externalSensor else { return true }
            do { return try externalSensor.pulse(at: t.instant, width: width) } catch {
                notice("trigger \(t.sequence): \(error)")
                return false
            }
        }

        let (events, post) = AsyncStream<Event>.makeStream()
        /// Virtual time: what tells the feeder a trigger was handled (finished on the way out,
        /// so a feeder still waiting goes on and ends).
        var acknowledgements: AsyncStream<Void>.Continuation?
        defer { acknowledgements?.finish() }
        let stops = try [SignalTriggerSource(signal: SIGINT, name: "SIGINT"), SignalTriggerSource(signal: SIGTERM, name: "SIGTERM")]
        var tasks: [Task<Void, Never>] = []
        if camera.virtualTime {
            // The camera's clock runs as fast as the CPU allows, and only while someone wants
            // frames. Each trigger is passed on once the camera's frames have reached its
            // instant, as it would be in real time: the frames up to it are asked for one at a
            // time, so the clock never runs ahead of the triggers (a monitor asking for every
            // frame let it race past them, and triggers were captured minutes late or dropped).
            let (handledStream, handled) = AsyncStream<Void>.makeStream()
            acknowledgements = handled
            tasks.append(Task {
                var handledAcks = handledStream.makeAsyncIterator()
                var now = SensorTime(nanoseconds: 0)
                for await t in source.triggers() {
                    if externalSensor != nil {
                        // A triggered sensor makes no frames between pulses: nothing to wait for.
                        post.yield(pulseSensor(t) ? .trigger(t) : .ignoredBySensor(t))
                    } else {
                        // Until the next frame may be the first exposed after the instant: the
                        // capture is then asked for before that frame comes, as in real time.
                        var period = Duration.zero
                        while now + period < t.instant {
                            var next: FrameMetadata?
                            for await r in await session.requests(count: 1) { next = r.metadata }
                            guard let next, let ts = next.sensorTimestamp else { break }
                            now = max(now, ts)
                            period = next.frameDuration ?? period
                        }
                        // No further frame is asked for until the capture for this trigger is
                        // held by the session: a frame asked for before then could be the
                        // first exposed after the instant and pass unseen (a frame's lag more).
                        post.yield(.trigger(t, handled: { handled.yield() }))
                        _ = await handledAcks.next()
                    }
                }
                post.yield(.sourceEnded)
            })
        } else {
            tasks.append(Task {
                for await t in source.triggers() {
                    post.yield(pulseSensor(t) ? .trigger(t) : .ignoredBySensor(t))
                }
                post.yield(.sourceEnded)
            })
        }
        for s in stops { tasks.append(Task { for await _ in s.triggers() { post.yield(.stop(s.name)); return } }) }
        if let duration { tasks.append(Task { try? await Task.sleep(for: .seconds(duration)); post.yield(.stop("--duration")) }) }

        // A triggered sensor has exposed the trigger's frame already, busy or not: each trigger's
        // capture is asked of the session at once (the session takes them in order), up to
        // --queue in flight; past that the trigger is dropped (waiting would find no frame).
        let external = externalSensor != nil
        var q = external ? try TriggerQueue(policy: .drop, concurrency: queue) : try TriggerQueue(policy: TriggerPolicy(rawValue: policy)!, limit: queue)
        var lags: [TriggerLag] = []
        var stopping: String?
        var sourceEnded = false
        let settingsFormats = formats
        let fileWriter = writer
        let realTime = !camera.virtualTime
        /// Starts what the queue says; `handled` is called once every capture started is held
        /// by the session (at once if none was started).
        func start(_ actions: [TriggerQueue.Action], handled: (@Sendable () -> Void)? = nil) {
            var handled = handled
            for a in actions {
                switch a {
                case .capture(let t):
                    unfinished += 1
                    let registered = handled ?? {}
                    handled = nil
                    Task {
                        let result = await Self.capture(t, bracket: bracket, formats: settingsFormats, session: session, writer: fileWriter, realTime: realTime, busy: busy,
                                                        registered: registered, framesCaptured: { post.yield(.framesCaptured(t)) })
                        post.yield(.finished(t, result))
                    }
                case .dropped(let t):
                    if !json { print("trigger \(t.sequence): dropped (\(external ? "\(queue) captures in flight, --queue \(queue)" : "busy, --policy \(policy)"))") }
                case .coalesced(let t): if !json { print("trigger \(t.sequence): coalesced into a later one") }
                }
            }
            handled?()
        }
        // Captures started and not finished (their files may still be being written), and the
        // triggers whose frames are all captured.
        var unfinished = 0
        var framesDone: Set<UInt64> = []
        /// The queue's capture is over (its frames are in, or it failed): the next may start.
        func captureOver(_ t: Trigger, failed: Bool) {
            if let count, q.counts.captured + q.counts.failed + 1 >= count, stopping == nil { stopping = "--count" }
            // Once stopping, what waits is dropped and counted, not captured.
            start(q.finished(failed: failed, stopping: stopping != nil))
        }
        loop: for await e in events {
            switch e {
            case .ignoredBySensor(let t):
                _ = q.refused(t)
                if !json { print("trigger \(t.sequence): dropped, the sensor ignored the pulse (it came while the previous frame was being read out)") }
            case .trigger(let t, _) where external:
                // No more captures than --count asks for are started.
                if let count, stopping == nil, q.counts.captured + q.counts.failed + q.inFlight.count >= count {
                    _ = q.refused(t)
                    if !json { print("trigger \(t.sequence): dropped (--count reached)") }
                } else if stopping == nil {
                    start(q.arrived(t))
                }
            case .trigger(let t, let handled):
                if stopping == nil { start(q.arrived(t), handled: handled) } else { handled?() }
            case .framesCaptured(let t):
                // A triggered sensor's captures are over when they finish: they run together.
                if external { break }
                framesDone.insert(t.sequence)
                captureOver(t, failed: false)
            case .finished(let t, let result):
                unfinished -= 1
                switch result {
                case .success(let c):
                    lags.append(c.lag)
                    report(t, c)
                case .failure(let error):
                    let ignored = externalSensor?.pulsesIgnored ?? 0
                    notice("trigger \(t.sequence): \(error)\(ignored > 0 ? " (the sensor ignored \(ignored) pulse\(ignored == 1 ? "" : "s") that came while the previous frame was being read out)" : "")")
                }
                // A capture that failed before its frames were in ends the queue's capture now.
                if framesDone.remove(t.sequence) == nil {
                    captureOver(t, failed: { if case .failure = result { return true } else { return false } }())
                }
            case .stop(let why):
                if stopping == nil { stopping = why }
            case .sourceEnded:
                sourceEnded = true
            }
            if (stopping != nil || sourceEnded) && q.busy == nil && unfinished == 0 { break loop }
        }
        tasks.forEach { $0.cancel() }
        stops.forEach { $0.stop() }
        if let g = gpioSource {
            g.stopAndWait()
            q.lostBySource(g.kernelLost)
        }
        await session.stop()
        if let preview {
            preview.close()
            notice(preview.summaryLine)
        }
        let failure = stopping == nil ? source.failure : nil
        summary(q.counts, lags: lags, why: stopping ?? failure?.description ?? "the trigger source ended", source: source.name)
        // Exit non-zero when the source broke down, or when any trigger asked for a photo that
        // was not taken: a shutter that silently failed is the worst kind.
        if let failure { throw failure }
        let c = q.counts
        if c.failed > 0 {
            throw ShutterbugError(.system, "\(c.failed) of \(c.seen) triggers' captures failed (\(c.captured) captured); the reasons are above")
        }
    }

    /// One capture exposed after `t`, with its lags.
    /// `realTime`: the camera's clock is CLOCK_MONOTONIC, so delivery and files are timed on it
    /// too; in virtual time only the lag to exposure start (on the camera's clock) is meaningful.
    /// `busy`: held from the start until the capture's frames are all captured (or it fails).
    static func capture(_ t: Trigger, bracket: BracketSettings?, formats: Set<PhotoFormat>, session: CaptureSession, writer: PhotoFileWriter?,
                        realTime: Bool, busy: GPIOOutputLine? = nil, registered: @Sendable () -> Void = {},
                        framesCaptured: @Sendable () -> Void = {}) async -> Result<Captured, ShutterbugError> {
        let settings = PhotoSettings(bracket: bracket, formats: formats, trigger: t)
        var c = Captured(lag: TriggerLag(trigger: t.instant, exposureStart: t.instant), sequences: [], files: [])
        var firstStart: SensorTime?, delivered: SensorTime?
        let frames = bracket?.count ?? 1
        var held: ContinuousClock.Instant?
        var announced = false
        /// The session holds the capture once it resolved its settings (or it is over).
        var isRegistered = false
        func sessionHoldsIt() {
            guard !isRegistered else { return }
            isRegistered = true
            registered()
        }
        defer { sessionHoldsIt() }
        /// The frames are in: the busy line goes inactive, and the caller may start the next.
        func release() {
            if !announced, c.sequences.count == frames {
                announced = true
                framesCaptured()
            }
            guard let h = held, let busy else { return }
            held = nil
            try? busy.release()
            c.busy = ContinuousClock.now - h
        }
        do {
            if let busy {
                try busy.hold()
                held = ContinuousClock.now
            }
            defer { release() }
            if let writer {
                for try await e in writer.capture(settings, on: session) {
                    switch e {
                    case .settingsResolved: sessionHoldsIt()
                    case .photoCaptured(_, let m):
                        c.sequences.append(m.sequence)
                        if firstStart == nil { firstStart = m.earliestExposureStart; delivered = realTime ? MonotonicClock.now() : nil }
                        if c.sequences.count == frames { release() }
                    case .fileWritten(let f): c.files.append(f.path)
                    case .notice(let n): notice(n)
                    default: break
                    }
                }
                c.lag = TriggerLag(trigger: t.instant, exposureStart: firstStart ?? t.instant, delivered: delivered, filesWritten: realTime ? MonotonicClock.now() : nil)
            } else {
                for try await e in await session.capture(settings) {
                    if case .settingsResolved = e { sessionHoldsIt() }
                    if case .photo(let p) = e {
                        c.sequences.append(p.metadata.sequence)
                        if firstStart == nil { firstStart = p.metadata.earliestExposureStart; delivered = realTime ? MonotonicClock.now() : nil }
                        p.release()
                        if c.sequences.count == frames { release() }
                    }
                }
                c.lag = TriggerLag(trigger: t.instant, exposureStart: firstStart ?? t.instant, delivered: delivered)
            }
            return .success(c)
        } catch let e as ShutterbugError {
            return .failure(e)
        } catch {
            return .failure(ShutterbugError(.system, "\(error)"))
        }
    }

    private func us(_ d: Duration?) -> String { d.map { String(format2: $0.microsecondsValue / 1000) + " ms" } ?? "-" }

    private func report(_ t: Trigger, _ c: Captured) {
        // One line per capture as it happens, also into a pipe.
        defer { fflush(nil) }
        if json {
            var o = JSONObject()
            o.add("trigger", Int(t.sequence))
            o.add("source", t.source)
            o.add("instantNs", t.instant.nanoseconds)
            o.add("frames", numbers: c.sequences.map(Double.init))
            o.add("lagToExposureStartUs", c.lag.toExposureStart.microsecondsValue)
            o.add("lagToDeliveredUs", c.lag.toDelivered?.microsecondsValue)
            o.add("lagToFilesUs", c.lag.toFiles?.microsecondsValue)
            o.add("busyUs", c.busy?.microsecondsValue)
            o.add("files", c.files)
            print(o.text)
        } else {
            print("trigger \(t.sequence): frame\(c.sequences.count > 1 ? "s" : "") \(c.sequences.map(String.init).joined(separator: ",")), lag to exposure start \(us(c.lag.toExposureStart)), to delivered \(us(c.lag.toDelivered)), to files \(us(c.lag.toFiles))\(c.busy.map { ", busy line held \(us($0))" } ?? "")")
        }
    }

    private func summary(_ c: TriggerCounts, lags: [TriggerLag], why: String, source: String) {
        let dists = [("exposure start", LagDistribution(lags.map(\.toExposureStart))), ("delivered", LagDistribution(lags.compactMap(\.toDelivered))),
                     ("files", LagDistribution(lags.compactMap(\.toFiles)))]
        if json {
            var o = JSONObject()
            o.add("summary", true)
            o.add("source", source)
            o.add("stoppedBy", why)
            o.add("seen", c.seen)
            o.add("captured", c.captured)
            o.add("failed", c.failed)
            o.add("coalesced", c.coalesced)
            o.add("dropped", c.dropped)
            o.add("kernelDropped", c.kernelDropped)
            for (name, d) in dists {
                guard let d else { continue }
                var l = JSONObject()
                l.add("p50Us", d.p50.microsecondsValue)
                l.add("p99Us", d.p99.microsecondsValue)
                l.add("maxUs", d.max.microsecondsValue)
                o.add("lagTo" + name.split(separator: " ").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(), object: l)
            }
            print(o.text)
            return
        }
        print("stopped by \(why): \(c.seen) triggers seen, \(c.captured) captured, \(c.failed) failed, \(c.coalesced) coalesced, \(c.dropped) dropped by us, \(c.kernelDropped) lost by the kernel")
        for (name, d) in dists {
            guard let d else { continue }
            print("  lag to \(name): p50 \(us(d.p50)), p99 \(us(d.p99)), max \(us(d.max)) over \(d.count)")
        }
    }
}
