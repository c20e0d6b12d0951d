import Capture
import CoreMetrics
import Prometheus
import ShutterbugCore
import Synchronization

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

    /// The Prometheus text exposition.
    func text() -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}

extension String {
    /// `shutterbug.capture.seconds` as Prometheus names it: `shutterbug_capture_seconds`.
    func replacingDots() -> String { String(map { $0 == "." ? "_" : $0 }) }
}
