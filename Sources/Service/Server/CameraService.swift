import Capture
import CaptureScheduler
import Fleet
import Logging
import ImageOutput
import ShutterbugCore
import Synchronization
import Upload

#if canImport(Glibc)
import Glibc
#endif

/// The camera as a service: one session, one writer, the captures asked for over the API, one
/// at a time, and what the status and metrics report. Everything the HTTP layer needs, and
/// nothing of HTTP.
public actor CameraService {
    public nonisolated let session: CaptureSession
    public nonisolated let camera: any CameraBackend
    private let latestFrame = LatestFrameJPEG(maxAge: .milliseconds(500))
    public let writer: PhotoFileWriter
    public let directory: OutputDirectory
    public let started: SensorTime

    /// A capture asked for over the API, as the API reports it.
    public struct CaptureRecord: Sendable, Codable {
        public var id: String
        public var kind: String
        public var steps: Int
        public var exposureStartNs: Int64?
        /// Paths relative to the output directory (what `/api/files/` serves).
        public var files: [String]
        public var adjustments: [String]
        public var failures: [String]
        /// Some of the capture's files could not be written (`failures` says which and why);
        /// the frames were captured, and the files listed are whole.
        public var partial: Bool? = nil
        /// The trigger that asked for it, for a trigger's capture (nil: over the API).
        public var trigger: String? = nil
        /// Zero-shutter-lag captures (`"at"`, `--zsl`): the frame's exposure covered the
        /// instant; false when none did and the first frame exposed after was taken (the
        /// adjustments say why).
        public var zeroShutterLag: Bool? = nil
        /// Every step's plan and frame, the files and what went wrong: the report `bracket --json`
        /// prints, paths relative to the output directory.
        public var report: CaptureReport? = nil
    }

    /// A capture whose frames came but none of whose files could be written (a full disk): a
    /// failure, with what it did and why (the API answers 507, or 500 for another cause).
    public struct NothingWritten: Error, Sendable, CustomStringConvertible {
        public var record: CaptureRecord
        /// Every file failed for want of space.
        public var noSpace: Bool
        public var description: String { "capture \(record.id): no file could be written: \(record.failures.joined(separator: "; "))" }
    }

    /// What a capture request asks for.
    public struct CaptureRequest: Sendable, Codable {
        /// EV biases around the metered exposure (an AE bracket), -8...8, 1 to 9 of them.
        public var ev: [Double]?
        /// Manual exposures in microseconds (10...60,000,000), 1 to 9 of them, at `gain`.
        public var exposuresUs: [Double]?
        /// Analogue gain for `exposuresUs` (1...64).
        public var gain: Double?
        /// "jpeg", "dng" (default ["jpeg"]).
        public var formats: [String]?
        /// An instant in the recent past (or the next second): the photo is the frame that was
        /// exposing then, from the frames the service holds (zero shutter lag).
        public var at: Instant?

        public init(ev: [Double]? = nil, exposuresUs: [Double]? = nil, gain: Double? = nil, formats: [String]? = nil, at: Instant? = nil) {
            self.ev = ev
            self.exposuresUs = exposuresUs
            self.gain = gain
            self.formats = formats
            self.at = at
        }

        /// `"at"`: nanoseconds on the camera's clock (a number, as `exposureStartNs` and a
        /// trigger's instant are), or wall time in ISO 8601 with a zone (a string).
        public enum Instant: Sendable, Codable, Equatable {
            case camera(SensorTime)
            case wall(String)

            public init(from decoder: any Decoder) throws {
                let c = try decoder.singleValueContainer()
                if let ns = try? c.decode(Int64.self) {
                    self = .camera(SensorTime(nanoseconds: ns))
                } else {
                    self = .wall(try c.decode(String.self))
                }
            }

            public func encode(to encoder: any Encoder) throws {
                var c = encoder.singleValueContainer()
                switch self {
                case .camera(let t): try c.encode(t.nanoseconds)
                case .wall(let s): try c.encode(s)
                }
            }
        }
    }

    /// How far back `"at"` may reach: the frames held cover far less; older is refused as
    /// gone rather than looked for.
    public static let atRange: ClosedRange<Duration> = .seconds(-60)...(.seconds(1))

    /// An `"at"` the service cannot answer, though well-formed JSON: older than anything held
    /// (`gone`, 410), or an instant it cannot read or too far ahead (422).
    public struct AtRefused: Error, Sendable, CustomStringConvertible {
        public var message: String
        public var gone: Bool
        public var description: String { message }
    }

    private(set) var recent: [CaptureRecord] = []
    private(set) var capturesTaken = 0
    private(set) var captureFailures = 0
    private(set) var bytesWritten: Int64 = 0
    private(set) var framesCaptured = 0
    let metrics = ServiceMetrics()
    /// Captures and slots as they happen, for MQTT and whatever else reports them.
    public nonisolated let events = ServiceEvents()
    /// The files' way off the card (`serve --upload-url`), set once the service starts one;
    /// its queue is in the status, the metrics and the MQTT state.
    public nonisolated let uploader = Mutex<Uploader?>(nil)
    /// Where the service's messages go (standard error; the journal under systemd, with
    /// priorities).
    public let logger: Logger
    /// Jobs in the order they were started (those over stay listed until replaced).
    var jobs: [ServiceJob] = []
    /// Jobs the configuration declares (the others were created over the API).
    var configuredJobs: Set<String> = []
    var triggers: [ServiceTrigger] = []
    /// The sensor's modes, where the camera tells them (the simulated profiles do).
    public let sensorModes: [SensorModeReport]
    /// What the configuration declared, as last applied.
    var declared = Declared()

    public init(session: CaptureSession, camera: any CameraBackend, writer: PhotoFileWriter, directory: OutputDirectory,
                logger: Logger = Logger(label: "shutterbug", factory: { _ in SwiftLogNoOpLogHandler() }), sensorModes: [SensorModeReport] = []) {
        self.sensorModes = sensorModes
        self.session = session
        self.camera = camera
        self.writer = writer
        self.directory = directory
        self.logger = logger
        started = camera.now
    }

    /// Checks a request, naming the field and the accepted range (`invalidArgument`).
    ///
    /// - Parameters:
    ///   - now: the camera's clock, and `offset` its distance to wall time, for `"at"`.
    public static func settings(for r: CaptureRequest, now: SensorTime? = nil, offset: ClockOffset = ClockOffset(nanoseconds: 0)) throws -> PhotoSettings {
        var formats = Set<PhotoFormat>()
        for f in r.formats ?? ["jpeg"] {
            switch f.lowercased() {
            case "jpeg", "jpg": formats.insert(.jpeg)
            case "dng", "raw": formats.insert(.dng)
            default: throw ShutterbugError(.invalidArgument, "formats: each is \"jpeg\" or \"dng\", not \"\(f)\"")
            }
        }
        guard !formats.isEmpty else { throw ShutterbugError(.invalidArgument, "formats: give \"jpeg\", \"dng\" or both") }
        if r.ev != nil && r.exposuresUs != nil { throw ShutterbugError(.invalidArgument, "give ev or exposuresUs, not both") }
        if r.gain != nil && r.exposuresUs == nil { throw ShutterbugError(.invalidArgument, "gain goes with exposuresUs") }
        // The bracket's fields first: a request with a field out of range is a 400 whatever its
        // "at" (a 410 for an old instant would hide the bad field).
        var bracket: BracketSettings?
        if let ev = r.ev {
            guard (1...9).contains(ev.count) else { throw ShutterbugError(.invalidArgument, "ev: 1 to 9 biases, not \(ev.count)") }
            for v in ev where !(v.isFinite && (-8...8).contains(v)) { throw ShutterbugError(.invalidArgument, "ev: each bias is -8...8 stops, not \(v)") }
            bracket = .exposureBias(ev)
        }
        if let us = r.exposuresUs {
            guard (1...9).contains(us.count) else { throw ShutterbugError(.invalidArgument, "exposuresUs: 1 to 9 exposures, not \(us.count)") }
            for v in us where !(v.isFinite && (10...60_000_000).contains(v)) { throw ShutterbugError(.invalidArgument, "exposuresUs: each is 10...60000000 µs, not \(v)") }
            let g = r.gain ?? 1
            guard g.isFinite, (1...64).contains(g) else { throw ShutterbugError(.invalidArgument, "gain: 1...64, not \(g)") }
            bracket = .manualExposure(us.map { (Duration.nanoseconds(Int64($0 * 1000)), Gain(g)) })
        }
        var instant: SensorTime?
        if let at = r.at {
            guard let now else { throw ShutterbugError(.unsupported, "at needs the camera's clock") }
            let t: SensorTime
            switch at {
            case .camera(let c): t = c
            case .wall(let text):
                // Checked: a wall time centuries away is out of range, not an overflow.
                guard let w = FleetCommand.instant(text), case (let n, false) = w.nanoseconds.subtractingReportingOverflow(offset.nanoseconds) else {
                    throw AtRefused(message: "at: an ISO 8601 time with a zone (2026-11-27T08:15:02.250Z) or nanoseconds on the camera's clock, not \"\(text.prefix(64))\"", gone: false)
                }
                t = SensorTime(nanoseconds: n)
            }
            let (d, overflow) = t.nanoseconds.subtractingReportingOverflow(now.nanoseconds)
            guard !overflow, atRange.contains(.nanoseconds(d)) else {
                let away = overflow ? "" : " is \(Duration.nanoseconds(d).millisecondsDescription) from the camera's clock (\(now))"
                let past = overflow ? t < now : d < 0
                throw AtRefused(message: "at: \(t)\(away); accepted: the last 60 s to 1 s ahead\(past ? ", and only what the frames held reach" : "")", gone: past)
            }
            instant = t
        }
        // With at, zero shutter lag: the frame exposing then, or a bracket's step 1 from it.
        return PhotoSettings(bracket: bracket, formats: formats, exposedAfter: instant, zeroShutterLag: instant != nil)
    }

    /// Captures now and writes the files; returns what was written.
    ///
    /// - Throws: `invalidArgument` or `unsupported` when this camera, as configured, cannot
    ///   take settings that are valid in themselves (a bracket whose steps it cannot tell
    ///   apart, a focus bracket without a focus motor); others when the camera fails.
    public func capture(_ settings: PhotoSettings) async throws -> CaptureRecord {
        try await session.validate(settings)
        try writer.check(settings.formats)
        var record = CaptureRecord(id: String(PhotoFacts.uniqueID(captureID: settings.uniqueID, step: 0).dropLast(4)),
                                   kind: settings.bracket.map { "bracket of \($0.count)" } ?? settings.burst.map { "burst of \($0.count)" } ?? "photo", steps: settings.stepCount,
                                   exposureStartNs: nil, files: [], adjustments: [], failures: [])
        let prefix = directory.path.hasSuffix("/") ? directory.path : directory.path + "/"
        let began = ContinuousClock.now
        var sequences: [UInt32] = []
        var allNoSpace = true
        var report = CaptureReport.Builder(settings)
        do {
            for try await e in writer.capture(settings, on: session) {
                observe(e)
                report.observe(e)
                switch e {
                case .settingsResolved(let r): record.adjustments += r.adjustments
                case .exposureStarted(let t): record.exposureStartNs = t.nanoseconds
                case .captureFinished(let r): record.zeroShutterLag = r.zeroShutterLag?.covered
                case .photoCaptured(_, let m):
                    framesCaptured += 1
                    sequences.append(m.sequence)
                    metrics.photos.increment()
                case .fileWritten(let f):
                    record.files.append(f.path.hasPrefix(prefix) ? String(f.path.dropFirst(prefix.count)) : f.path)
                    bytesWritten += f.bytes
                    metrics.bytesWritten.increment(by: Int(f.bytes))
                case .writeFailed(_, let format, let error):
                    record.failures.append("\(format): \(error.message)")
                    if error.code != .noSpace { allNoSpace = false }
                case .notice(let n): logger.warning("\(n)")
                default: break
                }
            }
        } catch {
            captureFailures += 1
            metrics.captureFailures.increment()
            logger.error("capture \(record.id) failed: \((error as? ShutterbugError)?.message ?? "\(error)")")
            events.send(.captureFailed(id: record.id, trigger: nil, reason: (error as? ShutterbugError)?.message ?? "\(error)"))
            throw error
        }
        record.report = report.report().paths(relativeTo: directory.path)
        if !record.failures.isEmpty {
            // A capture that wrote no photo is a failure, whatever it captured; one that wrote
            // some says so. The log and the metrics agree with the answer.
            if !record.files.contains(where: { !$0.hasSuffix(".json") }) {
                captureFailures += 1
                metrics.captureFailures.increment()
                let failed = NothingWritten(record: record, noSpace: allNoSpace)
                logger.error("\(failed)")
                events.send(.captureFailed(id: record.id, trigger: nil, reason: failed.description))
                throw failed
            }
            record.partial = true
            metrics.filesFailed.increment(by: record.failures.count)
            logger.warning("capture \(record.id): \(record.failures.count) file\(record.failures.count == 1 ? "" : "s") could not be written (\(record.failures.joined(separator: "; "))); \(record.files.count) written")
        }
        capturesTaken += 1
        metrics.captures.increment()
        metrics.captureSeconds.record(duration: ContinuousClock.now - began)
        if sequences.count > 1, let lo = sequences.min(), let hi = sequences.max() {
            metrics.bracketFramesPerStep.record(Double(hi - lo + 1) / Double(sequences.count))
        }
        remember(record)
        events.send(.captured(record))
        return record
    }

    /// Counts a capture taken for a trigger (its files and photos were counted in the metrics
    /// as they came, by `observeJob`).
    func record(_ record: CaptureRecord, frames: [UInt32], bytes: Int64) {
        capturesTaken += 1
        framesCaptured += frames.count
        bytesWritten += bytes
        metrics.captures.increment()
        if frames.count > 1, let lo = frames.min(), let hi = frames.max() {
            metrics.bracketFramesPerStep.record(Double(hi - lo + 1) / Double(frames.count))
        }
        remember(record)
        events.send(.captured(record))
    }

    /// The newest 50 captures over the API and the newest 50 of the triggers: a busy trigger
    /// does not push the API's out of the list.
    private func remember(_ record: CaptureRecord) {
        recent.append(record)
        let sameOrigin = { (r: CaptureRecord) in (r.trigger == nil) == (record.trigger == nil) }
        if recent.filter(sameOrigin).count > 50, let oldest = recent.firstIndex(where: sameOrigin) { recent.remove(at: oldest) }
    }

    /// Counts a trigger's capture that failed.
    func recordFailure(trigger: String, reason: String) {
        events.send(.captureFailed(id: nil, trigger: trigger, reason: reason))
        captureFailures += 1
        metrics.captureFailures.increment()
    }

    public func captures() -> [CaptureRecord] { recent.reversed() }

    /// A sensor mode as `/api/cameras` reports it.
    public struct Mode: Sendable, Codable {
        public var width: Int?
        public var height: Int?
        public var bitDepth: Int?
        public var maxFps: Double?
        public var minExposureUs: Double?
        public var maxExposureUs: Double?
        public init(_ r: SensorModeReport) {
            width = r.width
            height = r.height
            bitDepth = r.bitDepth
            maxFps = r.maxFrameRate
            minExposureUs = r.exposureLimits?.lowerBound.microsecondsValue
            maxExposureUs = r.exposureLimits?.upperBound.microsecondsValue
        }
    }

    /// The camera the service owns: the mode it streams in, the modes its sensor has (where the
    /// camera says), and the streams as configured.
    public struct CameraReport: Sendable, Codable {
        public var id: String
        public var model: String
        public var simulated: Bool
        public var pixelArrayWidth: Int?
        public var pixelArrayHeight: Int?
        public var mode: Mode?
        public var modes: [Mode]
        public var streams: [String]
    }

    public func cameras() -> [CameraReport] {
        let info = camera.info
        return [CameraReport(id: info.id, model: info.model, simulated: info.isSimulated, pixelArrayWidth: info.pixelArrayWidth, pixelArrayHeight: info.pixelArrayHeight,
                             mode: camera.sensorModeReport.map(Mode.init), modes: sensorModes.map(Mode.init), streams: writer.streams.map(\.description))]
    }

    /// Counts what every capture reports, the API's, the triggers' and the jobs' slots alike.
    nonisolated func observe(_ e: OutputEvent) {
        switch e {
        case .backPressure(let waited):
            metrics.backPressureWaits.increment()
            metrics.backPressureSeconds.increment(by: waited.secondsValue)
        case .captureFinished(let r) where r.retries > 0: metrics.retries.increment(by: r.retries)
        default: break
        }
    }

    /// Counts a job slot's files and photos too.
    nonisolated func observeJob(_ e: OutputEvent) {
        observe(e)
        switch e {
        case .photoCaptured: metrics.photos.increment()
        case .fileWritten(let f): metrics.bytesWritten.increment(by: Int(f.bytes))
        default: break
        }
    }

    /// The status the API and the web page show.
    public struct Status: Sendable, Codable {
        public var camera: String
        public var model: String
        /// Frames are coming: the session runs and the newest frame is recent (within two
        /// seconds, or ten frame periods of a slow mode).
        public var streaming: Bool
        /// Why not, while not: the camera stalled (for how long) or failed.
        public var problem: String?
        public var uptimeSeconds: Double
        public var newestFrame: UInt32?
        public var exposureUs: Double?
        public var analogueGain: Double?
        public var lux: Double?
        public var sensorTemperatureC: Double?
        public var capturesTaken: Int
        public var captureFailures: Int
        public var lastCapture: CaptureRecord?
        public var output: String
        public var diskFreeBytes: Int64?
        public var bytesWritten: Int64
        public var jobs: [JobStatus]
        public var triggers: [TriggerStatus]
        /// The upload queue to object storage, where one is configured.
        public var uploads: Uploader.Status?
    }

    /// Whether frames are coming, and why not: the session failed (the camera went away), or
    /// the newest frame is older than two seconds or ten of its frame periods (a stall).
    public func health() async -> (streaming: Bool, problem: String?) {
        Self.health(failure: await session.failureReason, newest: await session.latestFrame, now: camera.now, started: started)
    }

    /// `health()` from what it looks at: the session's failure, the newest frame, the camera's
    /// time now and when the service started (before the first frame, the age counts from it).
    static func health(failure: ShutterbugError?, newest m: FrameMetadata?, now: SensorTime, started: SensorTime) -> (streaming: Bool, problem: String?) {
        if let failure { return (false, "the camera failed: \(failure.message)") }
        let age = now - (m?.sensorTimestamp ?? started)
        let limit = max(.seconds(2), (m?.frameDuration ?? .zero) * 10)
        guard age > limit else { return (true, nil) }
        if m == nil { return (false, "no frame since the camera started, \(String(format2: age.secondsValue)) s ago") }
        return (false, "the camera stalled: no frame for \(String(format2: age.secondsValue)) s")
    }

    /// Logs the camera going quiet or failing, and coming back, once each: a stall no longer
    /// passes unseen while the status said streaming. Runs until cancelled.
    public func watchHealth(every period: Duration = .seconds(1)) async {
        var was: String?
        while !Task.isCancelled {
            let (_, problem) = await health()
            if problem != was {
                if let problem { logger.error("\(problem)") } else if let was { logger.notice("frames are coming again (\(was))") }
                was = problem
            }
            try? await Task.sleep(for: period)
        }
    }

    public func status() async -> Status {
        let m = await session.latestFrame
        let (streaming, problem) = await health()
        return Status(camera: camera.info.id, model: camera.info.model, streaming: streaming, problem: problem, uptimeSeconds: (camera.now - started).secondsValue,
                      newestFrame: m?.sequence, exposureUs: m?.exposureTime?.microsecondsValue, analogueGain: m?.analogueGain?.value, lux: m?.lux,
                      sensorTemperatureC: m?.sensorTemperature, capturesTaken: capturesTaken, captureFailures: captureFailures,
                      lastCapture: recent.last, output: directory.path, diskFreeBytes: try? directory.freeBytes(), bytesWritten: bytesWritten,
                      jobs: jobs.map(\.status), triggers: triggers.map(\.status), uploads: uploader.withLock { $0 }?.status())
    }

    /// The newest frame as a JPEG 640 wide, for the page and `/api/frame.jpg`: at most two
    /// made a second whoever asks, shared by every request meanwhile, sampled from the frame's
    /// buffer in place (no copy of the whole frame) and off this actor.
    public nonisolated func frameJPEG() async throws -> [UInt8] {
        try await latestFrame.jpeg { [session, camera] in
            let photo = try await session.captureFrame(exposedAfter: camera.now, timeout: .seconds(3))
            defer { photo.release() }
            let buffer = photo.buffers.first { $0.pixelFormat == .yuv420 } ?? photo.buffers.first { FrameCopy.encodesToJPEG($0.pixelFormat) }
            guard let buffer, let jpeg = try FramePreview.jpeg(buffer, width: 640) else {
                throw ShutterbugError(.unsupported, "the camera's stream has no processed (YUV) picture to show")
            }
            return jpeg
        }
    }

    /// Prometheus text exposition (swift-metrics over swift-prometheus): the counters as they
    /// were counted, the frame counts and gauges brought up to date now.
    public func metricsText() async -> String {
        let s = await status()
        metrics.update(await session.statistics)
        metrics.up.record(s.streaming ? 1 : 0)
        if let d = s.diskFreeBytes { metrics.diskFree.record(d) }
        if let t = s.sensorTemperatureC { metrics.sensorTemperature.record(t) }
        if let e = s.exposureUs { metrics.exposureSeconds.record(e / 1e6) }
        if let g = s.analogueGain { metrics.analogueGain.record(g) }
        let load = writer.pool.load
        metrics.encodeQueue.record(load.pending)
        metrics.encodeWaiting.record(writer.pool.waitingReservations)
        metrics.jobsRunning.record(s.jobs.filter { !$0.isOver }.count)
        // The journals' files, -wal and -shm beside them.
        var journal: Int64 = 0
        for j in s.jobs {
            for suffix in ["", "-wal", "-shm"] {
                var st = stat()
                if stat(directory.path + "/" + j.folder + "/timelapse.sqlite" + suffix, &st) == 0 { journal += Int64(st.st_size) }
            }
        }
        metrics.journalBytes.record(journal)
        if let u = s.uploads { metrics.update(u) }
        return metrics.text()
    }
}
