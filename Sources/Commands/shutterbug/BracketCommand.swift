import ArgumentParser
import Capture
import ImageOutput
import JobOptions
import KMS
import CaptureScheduler
import LibcameraBackend
import ShutterbugCore
import SimulatedCamera

struct Bracket: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Capture an exposure or focus bracket on consecutive sensor frames.",
        discussion: """
            Each step is identified by the metadata of the frame that carries it, never by \
            request order. Prints one row per step (requested, planned, actual, frame, \
            timestamp) and how many sensor frames the bracket spanned.
            """)

    @OptionGroup var camera: CameraOptions
    @OptionGroup var previewOptions: PreviewOptions
    @OptionGroup(title: "Upload (S3-compatible object storage; with --output)") var upload: UploadOptions

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Exposure biases in stops from the metered exposure, e.g. -2,0,2.", valueName: "ev,..."))
    var ev: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Manual exposures, e.g. 1/1000,1/250,1/60.", valueName: "t,..."))
    var exposures: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Analogue gain for --exposures, 1...1000 (1.0 = ISO 100; default 1.0; past the sensor's maximum it is adjusted and said so).", valueName: "gain"))
    var gain: Double?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Lens positions in dioptres for a focus bracket, e.g. 0.5,1,2.", valueName: "dpt,..."))
    var focusSteps: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Lock focus at this lens position (dioptres) first.", valueName: "dpt"))
    var lens: Double?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Lock white balance at these red and blue gains first (AWB off), e.g. 2.1,1.6; each 0.1...32.", valueName: "red,blue"))
    var colourGains: String?

    @Option(name: .long, help: ArgumentHelp("Stream role: still (full resolution), video or viewfinder.", valueName: "role"))
    var role: String = "still"

    @Flag(name: .long, help: "One JSON object per step, then a summary object.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Write the photos into this directory (created if needed), durably, with a JSON sidecar per capture.", valueName: "dir"))
    var output: String?

    @Option(name: .long, help: ArgumentHelp("File formats with --output: dng (raw), jpeg, or both.", valueName: "dng,jpeg"))
    var format: String = "dng,jpeg"

    @Option(name: .long, help: ArgumentHelp("With DNG: the raw stream's size, which picks the sensor mode on a Pi (e.g. 4056x3040 for the HQ camera's full-resolution mode); default the mode the processed stream runs in alone.", valueName: "WxH"))
    var rawSize: String?

    @Flag(name: .long, help: "With --output: also write a contact sheet, ..._sheet.jpg: the steps side by side, each labelled with its exposure, gain and frame, with a histogram under each.")
    var contactSheet = false

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("JPEG quality, 1...100.", valueName: "q"))
    var quality: Int = 92

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("MiB that must stay free on the output filesystem; a capture that would use them is refused.", valueName: "MiB"))
    var reserve: Int = 64

    @Option(name: .long, help: ArgumentHelp("File names under --output: tokens {date} {time} {capture} {id} {step} {steps} {camera}; '/' makes folders.", valueName: "template"))
    var name: String = FileNameTemplate.default.pattern

    func validate() throws {
        if upload.url != nil, output == nil { throw ValidationError("--upload-url sends the files written into --output: give --output too") }
        let given = [ev, exposures, focusSteps].compactMap { $0 }.count
        guard given == 1 else { throw ValidationError("give exactly one of --ev, --exposures or --focus-steps") }
        guard ["still", "video", "viewfinder"].contains(role) else { throw ValidationError("--role must be still, video or viewfinder, not '\(role)'") }
        _ = try NumericInput.size(rawSize, "--raw-size", example: "2028x1520")
        if rawSize != nil, output == nil || !format.lowercased().contains("dng") {
            throw ValidationError("--raw-size sizes the raw stream, which only DNG output uses: add --output DIR with --format dng")
        }
        if let gain {
            guard exposures != nil else {
                throw ValidationError("--gain applies to --exposures only; an --ev bracket meters its own gain and a --focus-steps bracket keeps the exposure in force")
            }
            try NumericInput.check(gain, "--gain", in: 1...1000)
        }
        if let lens { try NumericInput.check(lens, "--lens", in: 0...100, unit: "dioptres") }
        _ = try lockedGains()
        _ = try bracketSettings()
        _ = try formats()
        if contactSheet, output == nil { throw ValidationError("--contact-sheet is written beside the photos: add --output DIR") }
        guard JPEGEncoder.qualityRange.contains(quality) else { throw ValidationError("--quality must be in 1...100, not \(quality)") }
        guard (0...1_048_576).contains(reserve) else { throw ValidationError("--reserve must be in 0...1048576 MiB, not \(reserve)") }
        do { _ = try FileNameTemplate(validating: name) } catch let e as ShutterbugError { throw ValidationError("--name: \(e.message)") }
    }

    /// The white balance to lock, from --colour-gains.
    func lockedGains() throws -> ColourGains? {
        guard let colourGains else { return nil }
        let v = try NumericInput.numbers(colourGains, "--colour-gains", in: 0.1...32, unit: "", example: "2.1,1.6")
        guard v.count == 2 else { throw ValidationError("--colour-gains takes two gains, red and blue (e.g. 2.1,1.6), not \(v.count)") }
        return ColourGains(red: v[0], blue: v[1])
    }

    func formats() throws -> Set<PhotoFormat> { try Self.formats(parsing: format) }

    /// `--format`: dng, jpeg or both, comma-separated (shared with `trigger`).
    static func formats(parsing format: String) throws -> Set<PhotoFormat> { try PhotoFormats.parse(format) }

    /// What the files say about the camera: its profile, or what libcamera reports of it.
    static func cameraDescription(_ cam: any CameraBackend, _ config: CameraConfiguration) -> CameraDescription {
        cam.sensorProfile.map { CameraDescription(profile: $0) }
            ?? CameraDescription(model: cam.info.model, blackLevel: 0, bitDepth: config.streams.compactMap { $0.pixelFormat.bayer?.bits }.first ?? 16)
    }

    func bracketSettings() throws -> BracketSettings {
        if let ev {
            return .exposureBias(try NumericInput.numbers(ev, "--ev", in: -8...8, unit: "stops", example: "-2,0,2"))
        }
        if let exposures {
            let items = try NumericInput.list(exposures, "--exposures", example: "1/1000,1/250,1/60")
            let g = Gain(gain ?? 1)
            return .manualExposure(try items.map { (try NumericInput.exposure($0, "--exposures value"), g) })
        }
        let v = try NumericInput.numbers(focusSteps ?? "", "--focus-steps", in: 0...100, unit: "dioptres", example: "0.5,1,2")
        return .lensPositions(v.map { Dioptres($0) })
    }

    func run() async throws {
        let settings = try bracketSettings()
        let formats = try self.formats()
        let rig = try await CaptureRig.open({ try camera.open() }, processed: StreamRequest(role: StreamRole(rawValue: role)!),
                                            raw: output != nil && formats.contains(.dng) ? .forDNG(rawSize: rawSize) : .none,
                                            preview: previewOptions, bracketCount: settings.count, notice: { notice($0) })
        try await rig.closing {
            let (cam, session, config, preview) = (rig.camera, rig.session, rig.configuration, rig.preview)
            let mode = cam.sensorModeReport
            let photoSettings = PhotoSettings(bracket: settings, formats: formats)
            do {
                try await session.validate(photoSettings)
            } catch let e as ShutterbugError where e.code == .invalidArgument {
                // More than this camera can hold: a usage error (exit 64), said before capturing.
                throw ValidationError(e.message)
            }
            var writer: PhotoFileWriter?
            if let output {
                writer = try rig.writer(try OutputDirectory(path: output, reserve: Int64(reserve) << 20), formats: formats,
                                        template: try FileNameTemplate(validating: name), jpegQuality: quality, contactSheet: contactSheet)
            }
            // With --upload-url the bracket's files are queued as they are written and sent before
            // the command ends (two minutes at most; what is left stays queued).
            let uploads = try CommandUploads(upload, output: output)
            defer { uploads?.cancel() }
            var focusSync: SyncPoint?
            if let lens {
                let r = try await session.configure { $0.lockedFocus = Dioptres(lens) }
                for a in r.adjustments { notice("adjusted: \(a)") }
                focusSync = r.focus
            }
            var whiteBalanceSync: SyncPoint?
            if let gains = try lockedGains() {
                let r = try await session.configure { $0.lockedWhiteBalance = gains }
                for a in r.adjustments { notice("adjusted: \(a)") }
                whiteBalanceSync = r.whiteBalance
            }
            if !json {
                print("bracket on \(cam.info.id): \(config.streams[0]), \(settings.count) steps")
                if let w = whiteBalanceSync, let g = try lockedGains() { print("white balance locked at \(g): first frame carrying it \(w.sequence) (\(w.framesAfterRequest) frames after its request)") }
                if let mode { print("sensor mode \(mode); buffers \(config.bufferDescription)") }
                if let f = focusSync { print("focus locked at \(String(format2: lens!)) dpt: first frame carrying it \(f.sequence) (\(f.framesAfterRequest) frames after its request)") }
            }
            let fileWriter = writer
            // No watchdog of our own: every wait in the session is bounded by what the planned
            // frames need (the bracket's stall limit covers its longest exposure).
            let outcome = await { () async -> Outcome in
                var o = Outcome(report: CaptureReport.Builder(photoSettings))
                // A bracket that fails part-way keeps what it captured: the steps already in are
                // reported (and with --output written), then the command fails.
                do {
                    for try await event in await OutputEvent.capture(photoSettings, on: session, writer: fileWriter) {
                        o.report.observe(event)
                        switch event {
                        case .settingsResolved(let r):
                            o.planned = r
                            for a in r.adjustments { notice("adjusted: \(a)") }
                        case .backPressure(let waited): notice("waited \(waited) for the image writers to catch up")
                        case .exposureStarted(let t): o.started = t
                        case .exposureEnded(let t): o.ended = t
                        case .photoCaptured(let step, let m): o.photos.append((step, m))
                        case .captureFinished(let r):
                            o.resolved = r
                            // The camera is done; only the writers remain.
                            await session.stop()
                        case .fileWritten(let f): o.files.append(f)
                        case .writeFailed(let step, let format, let error):
                            o.failures.append(error)
                            notice("step \(step.map(String.init) ?? "-") \(format): \(error)")
                        case .notice(let n): notice(n)
                        case .filesFinished, .photoMetered: break
                        }
                    }
                } catch {
                    o.error = error
                }
                return o
            }()
            await session.stop()
            if let preview {
                preview.close()
                notice(preview.summaryLine)
            }
            guard let resolved = outcome.resolved ?? outcome.planned else {
                throw outcome.error ?? ShutterbugError(.system, "the bracket ended without a result")
            }
            if json {
                printJSON(outcome.report.report(error: outcome.error), focus: focusSync, camera: cam.info.id, mode: mode, bufferBytes: config.bufferBytes, preview: preview)
            } else {
                report(resolved, photos: outcome.photos, started: outcome.started, ended: outcome.ended, focus: focusSync, camera: cam.info.id, files: outcome.files,
                       mode: mode, bufferBytes: config.bufferBytes, preview: preview, error: outcome.error)
            }
            await uploads?.finish()
            if let error = outcome.error { throw error }
            if let first = outcome.failures.first {
                throw ShutterbugError(first.code, "\(outcome.failures.count) file(s) could not be written; \(outcome.files.count) written. First: \(first)")
            }
        }
    }

    private struct Outcome {
        /// What `--json` prints, in the words the HTTP API uses.
        var report: CaptureReport.Builder
        var photos: [(step: ResolvedStep, metadata: FrameMetadata)] = []
        var resolved: ResolvedPhotoSettings?
        /// The plan, from the first event: what a bracket that failed part-way reports against.
        var planned: ResolvedPhotoSettings?
        var error: (any Error)?
        var started: SensorTime?, ended: SensorTime?
        var files: [WrittenFile] = []
        var failures: [ShutterbugError] = []
    }

    /// `--json`: a line per step, then the capture's report (what `POST /api/capture` answers)
    /// with what the command adds: the camera, the focus lock, the sensor mode, the preview.
    private func printJSON(_ report: CaptureReport, focus: SyncPoint?, camera: String, mode: SensorModeReport?, bufferBytes: Int, preview: PreviewSink?) {
        for step in report.steps { print(CaptureReport.jsonText(step)) }
        var o = JSONObject()
        o.add("summary", true)
        o.add("camera", camera)
        o.add(membersOf: report.jsonText)
        o.add("focusSyncFrame", focus.map { Int($0.sequence) })
        if output != nil {
            o.add("sidecar", report.files.first { $0.format == "json" }?.path)
            if contactSheet { o.add("contactSheet", report.files.first { $0.format == "contact-sheet" }?.path) }
        }
        if let mode { o.add("sensorMode", object: mode.json) }
        o.add("bufferBytes", bufferBytes)
        preview?.add(to: &o)
        print(o.text)
    }

    private func report(_ r: ResolvedPhotoSettings, photos: [(step: ResolvedStep, metadata: FrameMetadata)], started: SensorTime?, ended: SensorTime?, focus: SyncPoint?, camera: String, files: [WrittenFile],
                        mode: SensorModeReport?, bufferBytes: Int, preview: PreviewSink?, error: (any Error)? = nil) {
        let seqs = photos.map(\.metadata.sequence)
        let span = (seqs.max() ?? 0) - (seqs.min() ?? 0) + 1
        // Photos are delivered in step order; a retried step's frame may have come later than
        // the steps after it, and the output says so rather than implying sensor order.
        let captureOrder = photos.sorted { $0.metadata.sequence < $1.metadata.sequence }.map { $0.step.index + 1 }
        let inOrder = captureOrder == captureOrder.sorted()
        if let e = r.meteredExposure { print("metered: \(e.exposureDescription) at gain \(String(format2: r.meteredGain ?? 1))") }
        print("step  requested          planned                  actual                        frame  timestamp")
        for p in photos {
            let actual = [p.metadata.exposureTime.map { "\(Int($0.microsecondsValue.rounded())) µs" }, p.metadata.analogueGain.map { "gain \(String(format2: $0.value))" }, p.metadata.lensPosition.map { "lens \(String(format2: $0.value))" }]
                .compactMap { $0 }.joined(separator: " ")
            print("\(pad(String(p.step.index + 1), 4))  \(pad(p.step.requested, 17))  \(pad(p.step.planned.description, 23))  \(pad(actual, 28))  \(pad(String(p.metadata.sequence), 5))  \(p.metadata.sensorTimestamp?.description ?? "-")")
        }
        if error != nil {
            let got = Set(photos.map { $0.step.index + 1 })
            print("incomplete: step(s) \((1...max(r.steps.count, 1)).filter { !got.contains($0) }.map(String.init).joined(separator: ",")) not captured")
        }
        var line = "\(photos.count) steps on \(span) sensor frames from first to last\(span == photos.count ? " (consecutive)" : "")"
        line += ", \(r.retries) retr\(r.retries == 1 ? "y" : "ies"), \(r.discarded.count) frame\(r.discarded.count == 1 ? "" : "s") discarded"
        if !inOrder { line += "; frames captured in step order \(captureOrder.map(String.init).joined(separator: ",")) (a retried step came later)" }
        if let s = started, let e = ended { line += ", exposure \(s) to \(e)" }
        print(line)
        for d in r.discarded { print("  discarded frame \(d.sequence): \(d.reason)") }
        for f in files.sorted(by: { ($0.step ?? 99, $0.format) < ($1.step ?? 99, $1.format) }) {
            print("wrote \(f.path) (\(f.bytes) bytes)")
        }
    }

    private func pad(_ s: String, _ w: Int) -> String { s.count >= w ? s : s + String(repeating: " ", count: w - s.count) }
}
