import ArgumentParser
import JobOptions
import Capture
import CaptureScheduler
import ImageOutput
import Jobs
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
            CLOCK_MONOTONIC, the clock of SensorTimestamp); with --zsl, the frame that was \
            exposing at the instant, from the newest frames held (zero shutter lag), and with \
            --pre/--post a burst of the frames around it. One capture runs at a time; \
            triggers that come meanwhile are queued, coalesced or dropped by --policy, and \
            every one is counted. Each capture prints its lags: trigger to exposure start, to \
            the frame delivered, to the files on disk. Runs until --count captures, \
            --duration, the source ends, or SIGINT/SIGTERM; then a summary with the counts and \
            the lag distribution.
            """)

    @OptionGroup var camera: CameraOptions
    @OptionGroup var previewOptions: PreviewOptions
    @OptionGroup(title: "Upload (S3-compatible object storage; with --output)") var upload: UploadOptions
    /// The source and the capture each trigger asks for (also a service trigger's options).
    @OptionGroup var options: TriggerOptions

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Stop after this many captures (1...1000000).", valueName: "n"))
    var count: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Stop after this many seconds (0.1...31536000).", valueName: "s"))
    var duration: Double?

    @Option(name: .long, help: ArgumentHelp("Stream role: still (full resolution), video or viewfinder.", valueName: "role"))
    var role: String = "still"

    @Option(name: .long, help: ArgumentHelp("Write each capture's photos (DNG and JPEG) and sidecar here.", valueName: "dir"))
    var output: String?

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
        if upload.url != nil, output == nil { throw ValidationError("--upload-url sends the files written into --output: give --output too") }
        _ = try NumericInput.size(rawSize, "--raw-size", example: "2028x1520")
        if let count, !(1...1_000_000).contains(count) { throw ValidationError("--count must be in 1...1000000, not \(count)") }
        if let duration { try NumericInput.check(duration, "--duration", in: 0.1...31_536_000, unit: "s") }
        guard ["still", "video", "viewfinder"].contains(role) else { throw ValidationError("--role must be still, video or viewfinder, not '\(role)'") }
        if camera.virtualTime && options.simulated == nil {
            throw ValidationError("--virtual-time runs the camera on its own clock; a GPIO edge, a signal or Enter happens on CLOCK_MONOTONIC: drop --virtual-time")
        }
        _ = try pulse()
        if camera.externalTrigger && (options.zsl || options.pre != nil || options.post != nil) {
            throw ValidationError("--zsl holds the frames of a free-running sensor; with --external-trigger each pulse starts its own frame's exposure, so the lag is already the sensor's: drop one of them")
        }
        if camera.externalTrigger && options.ev != nil {
            throw ValidationError("--ev needs a free-running sensor: with --external-trigger each pulse exposes one frame for the pulse's width")
        }
    }

    /// The pulse width, 1 µs...15 s (the sensor's range is checked when the camera is open).
    func pulse() throws -> Duration {
        try NumericInput.exposure(Substring(pulseWidth), "--pulse-width", in: 1e-6...15, kind: "a time")
    }

    func run() async throws {
        let formats = try options.formats()
        let bracket = try options.bracket()
        // External-trigger mode: the sensor exposes one frame per pulse, for the pulse's width;
        // gain and white balance are fixed (as a Pi user sets --gain and --awbgains), so the
        // pipeline has nothing to converge and no start-up frames.
        let width = try pulse()
        let pulseWidth = self.pulseWidth
        let rig = try await CaptureRig.open({ try camera.open() }, processed: StreamRequest(role: StreamRole(rawValue: role)!),
                                            raw: output != nil && formats.contains(.dng) ? .forDNG(rawSize: rawSize) : .none,
                                            preview: previewOptions, bracketCount: bracket?.count ?? 1, holding: try options.heldFrames(), bursts: try options.burst().map { [$0] } ?? [], controls: { cam in
            guard let input = cam.capabilities.externalTrigger, let t = input.triggeredSensor.externalTrigger else { return nil }
            let sensor = input.triggeredSensor
            let range = sensor.exposureRange(in: sensor.fullResolution)
            guard range.contains(width + t.exposureOffset) else {
                throw ValidationError("--pulse-width \(pulseWidth) exposes for \((width + t.exposureOffset).preciseDescription); \(sensor.model) exposes \(range.lowerBound.preciseDescription)...\(range.upperBound.preciseDescription) (the pulse's width + \(t.exposureOffset.preciseDescription))")
            }
            return CameraControls(aeEnabled: false, exposureTime: width + t.exposureOffset, analogueGain: Gain(1.0), awbEnabled: false,
                                  colourGains: input.startColourGains)
        }, notice: { notice($0) })
        try await rig.closing {
            let (cam, session, config) = (rig.camera, rig.session, rig.configuration)
            if let burst = try options.burst() {
                // The camera may allocate fewer buffers than asked: a burst that cannot be held is
                // refused before any trigger, not at each one (windows at the mode's fastest rate,
                // the most frames they take).
                do {
                    try await session.validate(PhotoSettings(exposedAfter: cam.now, burst: burst.largest(fastest: session.timing.everyFramePeriod)))
                } catch let e as ShutterbugError {
                    throw ValidationError(e.message)
                }
            }
            let externalSensor = cam.capabilities.externalTrigger
            var writer: PhotoFileWriter?
            if let output {
                writer = try rig.writer(try OutputDirectory(path: output, reserve: 64 << 20), formats: formats)
            }
            // With --upload-url each capture's files are queued as they are written and sent meanwhile.
            let uploads = try CommandUploads(upload, output: output)
            defer { uploads?.cancel() }
            let busy = try busyLine.map { try GPIOOutputLine.request(line: $0, activeLow: busyActiveLow) }
            if let busy, !json { notice("busy line: \(busyLine!) (\(busy.chipPath) line \(busy.offset))\(busyActiveLow ? ", active-low" : "")") }

            // The source, opened on the camera's clock once the job has armed on settled frames.
            let open = try options.source(realTime: !camera.virtualTime, announce: { notice($0) })
            let job = TriggerJob(options: try options.jobOptions(count: count, pulseWidth: width),
                                 session: session, camera: cam, writer: writer, busy: busy, open: open)
            let stops = try [SignalTriggerSource(signal: SIGINT, name: "SIGINT"), SignalTriggerSource(signal: SIGTERM, name: "SIGTERM")]
            var tasks = stops.map { s in Task { for await _ in s.triggers() { job.stop(s.name); return } } }
            if let duration { tasks.append(Task { try? await Task.sleep(for: .seconds(duration)); job.stop("--duration") }) }
            defer {
                tasks.forEach { $0.cancel() }
                stops.forEach { $0.stop() }
            }
            let (json, policy) = (json, options.policy)
            let (held, pooled) = (await session.heldFramesCapacity, await session.heldFramesPooled)
            let pool = pooled.frames > 0 ? ", \(pooled.frames) of them as copies in a pool of \(MemoryBudget.megabytes(pooled.bytes)) (the camera's buffers spare \(held - pooled.frames))" : ""
            let header = "trigger on \(cam.info.id) (\(externalSensor.map { _ in "external trigger, each pulse \(pulseWidth) wide" } ?? "free-running")\(held > 0 ? ", zero shutter lag from the newest \(held) frames held\(pool)" : "")): \(config.streams[0])"
            let printing = Task { () -> TriggerJob.Summary? in
                var summary: TriggerJob.Summary?
                for await e in job.events {
                    switch e {
                    case .listening(let source):
                        if !json { print("\(header), source \(source), policy \(policy)") }
                    case .notice(let n): notice(n)
                    case .captured(let t, let c): Self.report(t, c, json: json)
                    case .failed(let t, let error): notice("trigger \(t.sequence): \(error)")
                    case .dropped(let t, let reason): if !json { print("trigger \(t.sequence): dropped (\(reason))") }
                    case .coalesced(let t): if !json { print("trigger \(t.sequence): coalesced into a later one") }
                    case .progress: break
                    case .finished(let s): summary = s
                    }
                    fflush(nil)
                }
                return summary
            }
            do {
                try await job.run()
            } catch {
                _ = await printing.value
                throw error
            }
            let summary = await printing.value
            await session.stop()
            if let preview = rig.preview {
                preview.close()
                notice(preview.summaryLine)
            }
            await uploads?.finish()
            guard let summary else { return }
            Self.summary(summary, json: json)
            // Exit non-zero when the source broke down, or when any trigger asked for a photo that
            // was not taken: a shutter that silently failed is the worst kind.
            if let failure = summary.sourceFailure { throw failure }
            let c = summary.counts
            if c.failed > 0 {
                throw ShutterbugError(.system, "\(c.failed) of \(c.seen) triggers' captures failed (\(c.captured) captured); the reasons are above")
            }
        }
    }

    private static func us(_ d: Duration?) -> String { d.map { String(format2: $0.microsecondsValue / 1000) + " ms" } ?? "-" }

    private static func report(_ t: Trigger, _ c: TriggerJob.Captured, json: Bool) {
        // One line per capture as it happens, also into a pipe.
        defer { fflush(nil) }
        if json {
            print(CaptureReport.jsonText(TriggerCaptureReport(t, c)))
        } else {
            let zsl = c.zeroShutterLag.map { $0.covered ? " (exposing at the trigger)" : " (none exposing at the trigger: \($0.fallback ?? "-"))" } ?? ""
            print("trigger \(t.sequence): frame\(c.sequences.count > 1 ? "s" : "") \(c.sequences.map(String.init).joined(separator: ","))\(zsl), lag to exposure start \(us(c.lag.toExposureStart)), to delivered \(us(c.lag.toDelivered)), to files \(us(c.lag.toFiles))\(c.busy.map { ", busy line held \(us($0))" } ?? "")")
        }
    }

    private static func summary(_ s: TriggerJob.Summary, json: Bool) {
        // One report for both forms: the lags' percentiles are worked out once.
        let r = TriggerSummaryReport(s)
        if json {
            print(CaptureReport.jsonText(r))
            return
        }
        let c = s.counts
        print("stopped by \(s.stoppedBy): \(c.seen) triggers seen, \(c.captured) captured, \(c.failed) failed, \(c.coalesced) coalesced, \(c.dropped) dropped by us, \(c.kernelDropped) lost by the kernel")
        func ms(_ us: Double) -> String { String(format2: us / 1000) + " ms" }
        for (name, lag) in [("exposure start", r.lagToExposureStart), ("delivered", r.lagToDelivered), ("files", r.lagToFiles)] {
            guard let lag else { continue }
            print("  lag to \(name): p50 \(ms(lag.p50Us)), p99 \(ms(lag.p99Us)), max \(ms(lag.maxUs)) over \(lag.count)")
        }
    }
}

/// The busy line is a GPIO output line.
extension GPIOOutputLine: BusyLine {}
