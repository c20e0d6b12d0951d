import Capture
import CoreMetrics
import Prometheus
import ShutterbugCore
import Synchronization
import Upload

/// The service's metrics: swift-metrics objects (names dotted and stable, as
/// `shutterbug.captures.total`) backed by a Prometheus registry of the service's own, so nothing is
/// bootstrapped globally and a test can run several. `/metrics` is the registry's text
/// exposition, with dots as underscores.
final class ServiceMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let factory: PrometheusMetricsFactory

    // Counted as they happen.
    let captures: CoreMetrics.Counter
    let captureFailures: CoreMetrics.Counter
    /// Files a capture could not write (the capture itself partial).
    let filesFailed: CoreMetrics.Counter
    let photos: CoreMetrics.Counter
    let bytesWritten: CoreMetrics.Counter
    /// From the capture being asked for to its last file written.
    let captureSeconds: CoreMetrics.Timer
    /// Frames between a bracket's first and last step, over its steps (1 on consecutive frames).
    let bracketFramesPerStep: CoreMetrics.Recorder
    /// Frames a capture asked for again (a step whose frame did not carry its settings).
    let retries: CoreMetrics.Counter
    /// Captures that waited for encoder memory, and how long in all.
    let backPressureWaits: CoreMetrics.Counter
    let backPressureSeconds: CoreMetrics.FloatingPointCounter
    /// A timelapse slot's first exposure start less its instant, in seconds (signed).
    let scheduleError: CoreMetrics.Recorder
    /// A trigger's instant to its capture's first exposure start.
    let triggerLag: CoreMetrics.Timer

    // The session's frame counts, brought up to date at each scrape.
    let frames: CoreMetrics.Counter
    let startupFrames: CoreMetrics.Counter
    let errorFrames: CoreMetrics.Counter
    let droppedFrames: CoreMetrics.Counter
    private let counted = Mutex(CaptureSession.FrameStatistics())

    // Gauges, read at each scrape.
    let up: CoreMetrics.Gauge
    let diskFree: CoreMetrics.Gauge
    let sensorTemperature: CoreMetrics.Gauge
    let exposureSeconds: CoreMetrics.Gauge
    let analogueGain: CoreMetrics.Gauge
    let encodeQueue: CoreMetrics.Gauge
    let encodeWaiting: CoreMetrics.Gauge
    let journalBytes: CoreMetrics.Gauge
    let jobsRunning: CoreMetrics.Gauge
    let uploadsWaiting, uploadsWaitingBytes, uploadsOldest, uploadsDone, uploadsDoneBytes, uploadsFailed, uploadTriesFailed: CoreMetrics.Gauge

    init() {
        var f = PrometheusMetricsFactory(registry: registry)
        f.nameAndLabelSanitizer = { name, labels in (name.replacingDots(), labels) }
        f.defaultDurationHistogramBuckets = [.milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5), .seconds(10), .seconds(30), .seconds(60)]
        f.valueHistogramBuckets = ["shutterbug_bracket_frames_per_step": [1, 1.25, 1.5, 2, 3, 5],
                                   "shutterbug_timelapse_schedule_error_seconds": [-0.1, -0.01, -0.001, -0.0001, -0.00001, 0, 0.00001, 0.0001, 0.001, 0.01, 0.1, 1]]
        f.durationHistogramBuckets = ["shutterbug_trigger_lag_seconds": [.microseconds(500), .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(20), .milliseconds(35),
                                                                         .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1)]]
        factory = f
        captures = CoreMetrics.Counter(label: "shutterbug.captures.total", factory: f)
        captureFailures = CoreMetrics.Counter(label: "shutterbug.capture.failures.total", factory: f)
        filesFailed = CoreMetrics.Counter(label: "shutterbug.files.failed.total", factory: f)
        photos = CoreMetrics.Counter(label: "shutterbug.photos.total", factory: f)
        bytesWritten = CoreMetrics.Counter(label: "shutterbug.bytes.written.total", factory: f)
        captureSeconds = CoreMetrics.Timer(label: "shutterbug.capture.seconds", factory: f)
        bracketFramesPerStep = CoreMetrics.Recorder(label: "shutterbug.bracket.frames.per.step", aggregate: true, factory: f)
        retries = CoreMetrics.Counter(label: "shutterbug.capture.retries.total", factory: f)
        backPressureWaits = CoreMetrics.Counter(label: "shutterbug.encode.backpressure.waits.total", factory: f)
        backPressureSeconds = CoreMetrics.FloatingPointCounter(label: "shutterbug.encode.backpressure.seconds.total", factory: f)
        scheduleError = CoreMetrics.Recorder(label: "shutterbug.timelapse.schedule.error.seconds", aggregate: true, factory: f)
        triggerLag = CoreMetrics.Timer(label: "shutterbug.trigger.lag.seconds", factory: f)
        frames = CoreMetrics.Counter(label: "shutterbug.frames.total", factory: f)
        startupFrames = CoreMetrics.Counter(label: "shutterbug.frames.startup.total", factory: f)
        errorFrames = CoreMetrics.Counter(label: "shutterbug.frames.error.total", factory: f)
        droppedFrames = CoreMetrics.Counter(label: "shutterbug.frames.dropped.total", factory: f)
        up = CoreMetrics.Gauge(label: "shutterbug.up", factory: f)
        diskFree = CoreMetrics.Gauge(label: "shutterbug.disk.free.bytes", factory: f)
        sensorTemperature = CoreMetrics.Gauge(label: "shutterbug.sensor.temperature.celsius", factory: f)
        exposureSeconds = CoreMetrics.Gauge(label: "shutterbug.exposure.seconds", factory: f)
        analogueGain = CoreMetrics.Gauge(label: "shutterbug.analogue.gain", factory: f)
        encodeQueue = CoreMetrics.Gauge(label: "shutterbug.encode.queue.depth", factory: f)
        encodeWaiting = CoreMetrics.Gauge(label: "shutterbug.encode.waiting.captures", factory: f)
        journalBytes = CoreMetrics.Gauge(label: "shutterbug.journal.bytes", factory: f)
        jobsRunning = CoreMetrics.Gauge(label: "shutterbug.jobs.running", factory: f)
        uploadsWaiting = CoreMetrics.Gauge(label: "shutterbug.uploads.waiting.files", factory: f)
        uploadsWaitingBytes = CoreMetrics.Gauge(label: "shutterbug.uploads.waiting.bytes", factory: f)
        uploadsOldest = CoreMetrics.Gauge(label: "shutterbug.uploads.oldest.waiting.seconds", factory: f)
        uploadsDone = CoreMetrics.Gauge(label: "shutterbug.uploads.uploaded.files", factory: f)
        uploadsDoneBytes = CoreMetrics.Gauge(label: "shutterbug.uploads.uploaded.bytes", factory: f)
        uploadsFailed = CoreMetrics.Gauge(label: "shutterbug.uploads.failed.files", factory: f)
        uploadTriesFailed = CoreMetrics.Gauge(label: "shutterbug.uploads.failed.tries", factory: f)
    }

    /// The upload queue's gauges from its status (the journal's counts).
    func update(_ u: Uploader.Status) {
        uploadsWaiting.record(u.waiting)
        uploadsWaitingBytes.record(u.waitingBytes)
        uploadsOldest.record(u.oldestWaitingSeconds ?? 0)
        uploadsDone.record(u.uploaded)
        uploadsDoneBytes.record(u.uploadedBytes)
        uploadsFailed.record(u.failed)
        uploadTriesFailed.record(u.failedTries)
    }

    /// Timelapse slots by job and state (taken, skipped, missed, failed).
    func slots(job: String, state: String) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: "shutterbug.timelapse.slots.total", dimensions: [("job", job), ("state", state)], factory: factory)
    }

    /// Triggers by trigger and outcome (seen, captured, failed, coalesced, dropped).
    func triggers(_ name: String, _ outcome: String) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: "shutterbug.triggers.total", dimensions: [("trigger", name), ("outcome", outcome)], factory: factory)
    }

    /// Brings the frame counters up to the session's counts (they only rise).
    func update(_ s: CaptureSession.FrameStatistics) {
        let before = counted.withLock { old in defer { old = s }; return old }
        frames.increment(by: max(0, s.frames - before.frames))
        startupFrames.increment(by: max(0, s.startup - before.startup))
        errorFrames.increment(by: max(0, s.errors - before.errors))
        droppedFrames.increment(by: max(0, s.dropped - before.dropped))
    }

    /// The Prometheus text exposition, each family with its `# HELP` line (swift-metrics carries
    /// no help text, so it is added here, before the family's `# TYPE`).
    func text() -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return Self.withHelp(String(decoding: buffer, as: UTF8.self))
    }

    static func withHelp(_ exposition: String) -> String {
        var out = ""
        out.reserveCapacity(exposition.utf8.count + 4096)
        for line in exposition.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE ") {
                let name = line.dropFirst(7).prefix { $0 != " " }
                out += "# HELP \(name) \(help[String(name)] ?? "Shutterbug's \(name.replacingOccurrences(of: "_", with: " ").dropFirst(11))")\n"
            }
            out += line
            out += "\n"
        }
        return String(out.dropLast())
    }

    /// What each family means, in Prometheus' words (base units: seconds, bytes, degrees Celsius).
    static let help: [String: String] = [
        "shutterbug_captures_total": "Captures (photos and brackets) that wrote at least one file.",
        "shutterbug_uploads_waiting_files": "Files queued for object storage or being sent (the upload journal's count).",
        "shutterbug_uploads_waiting_bytes": "Bytes of the files queued for object storage or being sent.",
        "shutterbug_uploads_oldest_waiting_seconds": "How long the oldest file waiting for upload has waited (0: none waits).",
        "shutterbug_uploads_uploaded_files": "Files uploaded and verified (their ETag the file's MD5), as the upload journal counts them.",
        "shutterbug_uploads_uploaded_bytes": "Bytes of the files uploaded and verified.",
        "shutterbug_uploads_failed_files": "Files that cannot be uploaded any more (gone from the card before their upload).",
        "shutterbug_uploads_failed_tries": "Upload tries that failed since the service started (each retried with backoff).",
        "shutterbug_capture_failures_total": "Captures that failed: nothing captured, or nothing written.",
        "shutterbug_files_failed_total": "Files a capture could not write (the capture itself partial or failed).",
        "shutterbug_photos_total": "Photos (a bracket's steps each count) written.",
        "shutterbug_bytes_written_total": "Bytes of photo files written.",
        "shutterbug_capture_seconds": "From a capture being asked for to its last file written.",
        "shutterbug_bracket_frames_per_step": "Sensor frames between a bracket's first and last step, over its steps (1: consecutive frames).",
        "shutterbug_capture_retries_total": "Frames asked for again because the frame did not carry its step's settings.",
        "shutterbug_encode_backpressure_waits_total": "Captures that waited for encoder memory.",
        "shutterbug_encode_backpressure_seconds_total": "Seconds captures waited for encoder memory, in all.",
        "shutterbug_timelapse_schedule_error_seconds": "A timelapse slot's first exposure start less its instant (signed).",
        "shutterbug_trigger_lag_seconds": "A trigger's instant to its capture's first exposure start.",
        "shutterbug_frames_total": "Frames the camera completed.",
        "shutterbug_frames_startup_total": "Start-up frames (the pipeline's own, not handed out).",
        "shutterbug_frames_error_total": "Frames the camera completed with an error.",
        "shutterbug_frames_dropped_total": "Frames the camera dropped (sequence gaps).",
        "shutterbug_up": "1 while the service runs.",
        "shutterbug_disk_free_bytes": "Bytes free for the output folder.",
        "shutterbug_sensor_temperature_celsius": "The sensor's temperature in the newest frame, where it reports one.",
        "shutterbug_exposure_seconds": "The newest frame's exposure time.",
        "shutterbug_analogue_gain": "The newest frame's analogue gain.",
        "shutterbug_encode_queue_depth": "Photos waiting to be encoded and written.",
        "shutterbug_encode_waiting_captures": "Captures waiting for encoder memory now.",
        "shutterbug_journal_bytes": "Bytes of the timelapse journals (with their write-ahead logs).",
        "shutterbug_jobs_running": "Timelapse jobs running now.",
        "shutterbug_timelapse_slots_total": "Timelapse slots by job and state (taken, skipped, missed, failed).",
        "shutterbug_triggers_total": "Triggers by trigger and outcome (seen, captured, failed, coalesced, dropped).",
    ]
}

extension String {
    /// `shutterbug.capture.seconds` as Prometheus names it: `shutterbug_capture_seconds`.
    func replacingDots() -> String { String(map { $0 == "." ? "_" : $0 }) }
}
