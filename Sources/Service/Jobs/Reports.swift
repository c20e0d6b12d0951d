import CaptureScheduler
import ImageOutput
import Journal
import ShutterbugCore
import Timelapse

// The jobs' reports: one Codable value each for what `shutterbug timelapse --json` and
// `shutterbug trigger --json` print and what the HTTP API serves, so the two say the same thing
// in the same words. Absent values are left out (never `null`); a value that is not finite
// (a mean of nothing) is absent too, since JSON has no NaN.

/// One timelapse slot: a line of `shutterbug timelapse --json`, and a job's `lastSlot` in
/// `/api/jobs`.
public struct SlotReport: Sendable, Codable, Equatable {
    /// The exposure ramp's decision for the next slot.
    public struct Ramp: Sendable, Codable, Equatable {
        /// The metered frame's mean, 0...1.
        public var metered: Double
        public var errorEV: Double
        public var stepEV: Double
        public var nightOffsetEV: Double
        /// "day", "dusk" or "night".
        public var phase: String
        public var note: String
        public var nextExposureUs: Double
        public var nextGain: Double
    }

    /// The white balance measured on the slot's frames and the gains applied to the next.
    public struct WhiteBalance: Sendable, Codable, Equatable {
        public var measuredRed: Double
        public var measuredBlue: Double
        public var appliedRed: Double
        public var appliedBlue: Double
    }

    public var slot: Int
    /// The slot's wall time, UTC.
    public var wall: String
    /// taken, skipped, missed or failed.
    public var state: String
    public var reason: String?
    public var instantNs: Int64?
    public var exposureStartNs: Int64?
    /// The first step's exposure start less the slot's instant.
    public var scheduleErrorUs: Double?
    /// How the phase lock went (locked on which frame, or why not).
    public var phaseLock: String?
    /// The 0 EV photo's mean luma (0...255): how bright the picture came out.
    public var meanLuma: Double?
    /// The sensor frames of the slot's steps, in step order.
    public var frames: [UInt32]
    public var exposuresUs: [Double]
    public var gains: [Double]
    public var lux: Double?
    /// The first frame's colour gains (red, blue).
    public var colourGains: [Double]?
    public var ramp: Ramp?
    public var whiteBalance: WhiteBalance?
    /// The slot's files (paths as written, or relative to the service's output directory in the API).
    public var files: [String]

    public init(_ r: TimelapseRun.SlotResult) {
        slot = r.index
        wall = r.wall.description
        state = r.state.rawValue
        reason = r.reason
        instantNs = r.instant?.nanoseconds
        exposureStartNs = r.start?.nanoseconds
        scheduleErrorUs = r.start.flatMap { start in r.instant.map { (start - $0).microsecondsValue } }
        phaseLock = r.lock
        meanLuma = finite(r.luma)
        frames = r.frames.map(\.metadata.sequence)
        exposuresUs = r.frames.compactMap { $0.metadata.exposureTime?.microsecondsValue }
        gains = r.frames.compactMap { $0.metadata.analogueGain?.value }
        lux = finite(r.frames.first?.metadata.lux)
        colourGains = r.frames.compactMap { $0.metadata.colourGains.map { [$0.red, $0.blue] } }.first
        ramp = r.decision.map {
            Ramp(metered: $0.metered, errorEV: $0.errorEV, stepEV: $0.stepEV, nightOffsetEV: $0.nightOffsetEV, phase: $0.phase, note: $0.note,
                 nextExposureUs: $0.to.exposure.microsecondsValue, nextGain: $0.to.gain)
        }
        whiteBalance = r.whiteBalance.map {
            WhiteBalance(measuredRed: $0.measured.red, measuredBlue: $0.measured.blue, appliedRed: $0.applied.red, appliedBlue: $0.applied.blue)
        }
        files = r.files
    }

    /// The same report with its paths relative to `directory` where they are under it.
    public func paths(relativeTo directory: String) -> SlotReport {
        var r = self
        r.files = files.map { relativePath($0, under: directory) }
        return r
    }
}

/// How a timelapse run ended: the last line of `shutterbug timelapse --json`.
public struct TimelapseSummaryReport: Sendable, Codable, Equatable {
    /// Always true: tells the summary from the slot lines.
    public var summary = true
    public var job: String
    public var stoppedBy: String
    /// This run's slots by state.
    public var thisTaken: Int
    public var thisSkipped: Int
    public var thisMissed: Int
    public var thisFailed: Int
    /// The journal's slots by state, every run of the job.
    public var journalTaken: Int
    public var journalSkipped: Int
    public var journalMissed: Int
    public var journalFailed: Int
    /// Slot instant to the first exposure start, this run.
    public var scheduleErrorP50Us: Double?
    public var scheduleErrorP99Us: Double?
    public var scheduleErrorMaxUs: Double?
    public var phaseLocked: Bool
    public var journal: String
    public var journalIntegrity: String
    public var cameraReopened: Int
    public var cameraStoppedWhileIdle: Int
    public var cameraStartupMsMax: Double
    public var slotsDeletedByRetention: Int
    public var bytesKept: Int64
    /// Slots taken whose journal entry could not be written (their files are on disk).
    public var unjournalled: Int
    public var keogram: String?
    public var contactSheet: String?

    public init(_ s: TimelapseJob.Summary) {
        job = s.job
        stoppedBy = s.stoppedBy
        let (this, all) = (s.counts, s.journalCounts)
        (thisTaken, thisSkipped, thisMissed, thisFailed) = (this[.taken] ?? 0, this[.skipped] ?? 0, this[.missed] ?? 0, this[.failed] ?? 0)
        (journalTaken, journalSkipped, journalMissed, journalFailed) = (all[.taken] ?? 0, all[.skipped] ?? 0, all[.missed] ?? 0, all[.failed] ?? 0)
        scheduleErrorP50Us = s.scheduleError?.p50.microsecondsValue
        scheduleErrorP99Us = s.scheduleError?.p99.microsecondsValue
        scheduleErrorMaxUs = s.scheduleError?.max.microsecondsValue
        phaseLocked = s.phaseLocked
        journal = s.journalPath
        journalIntegrity = s.journalIntegrity
        cameraReopened = s.cameraReopened
        cameraStoppedWhileIdle = s.cameraStoppedWhileIdle
        cameraStartupMsMax = s.slowestStartup.microsecondsValue / 1000
        slotsDeletedByRetention = s.slotsDeletedByRetention
        bytesKept = s.bytesKept
        unjournalled = s.unjournalled
        keogram = s.keogram
        contactSheet = s.contactSheet
    }
}

/// One trigger's capture: a line of `shutterbug trigger --json`.
public struct TriggerCaptureReport: Sendable, Codable, Equatable {
    /// The trigger's number from its source (1, 2, ...).
    public var trigger: Int
    public var source: String
    /// The trigger's instant on the camera's clock.
    public var instantNs: Int64
    /// The sensor frames of the capture's steps.
    public var frames: [UInt32]
    public var lagToExposureStartUs: Double
    public var lagToDeliveredUs: Double?
    public var lagToFilesUs: Double?
    /// How long the busy line was held.
    public var busyUs: Double?
    public var files: [String]
    /// Files that could not be written (format: why); the frames were captured.
    public var failures: [String]?
    /// Zero shutter lag: the frame's exposure covered the trigger's instant (the lag to
    /// exposure start is then at most zero); false, with `zeroShutterLagFallback` saying why,
    /// when none did and the first frame exposed after was taken.
    public var zeroShutterLag: Bool?
    public var zeroShutterLagFallback: String?

    public init(_ t: Trigger, _ c: TriggerJob.Captured) {
        trigger = Int(t.sequence)
        source = t.source
        instantNs = t.instant.nanoseconds
        frames = c.sequences
        lagToExposureStartUs = c.lag.toExposureStart.microsecondsValue
        lagToDeliveredUs = c.lag.toDelivered?.microsecondsValue
        lagToFilesUs = c.lag.toFiles?.microsecondsValue
        busyUs = c.busy?.microsecondsValue
        files = c.files.map(\.path)
        failures = c.failures.isEmpty ? nil : c.failures
        zeroShutterLag = c.zeroShutterLag?.covered
        zeroShutterLagFallback = c.zeroShutterLag?.fallback
    }
}

/// A trigger's counts and lags: the last line of `shutterbug trigger --json`, and the body of a
/// trigger's status in `/api/triggers` (there without `summary` and, while it listens, without
/// `stoppedBy`).
public struct TriggerSummaryReport: Sendable, Codable, Equatable {
    /// Percentiles of one lag, over `count` captures.
    public struct Lag: Sendable, Codable, Equatable {
        public var p50Us: Double
        public var p99Us: Double
        public var maxUs: Double
        public var count: Int

        init?(_ values: [Duration]) {
            guard let d = LagDistribution(values) else { return nil }
            (p50Us, p99Us, maxUs, count) = (d.p50.microsecondsValue, d.p99.microsecondsValue, d.max.microsecondsValue, d.count)
        }
    }

    /// True on the command's last line: tells the summary from the capture lines.
    public var summary: Bool?
    public var source: String?
    public var stoppedBy: String?
    public var seen = 0
    public var captured = 0
    public var failed = 0
    public var coalesced = 0
    /// Dropped by the queue's policy.
    public var dropped = 0
    /// Lost by the kernel (its event buffer overflowed).
    public var kernelDropped = 0
    /// Trigger instant to the first exposure start, to the frames delivered, to the files written.
    public var lagToExposureStart: Lag?
    public var lagToDelivered: Lag?
    public var lagToFiles: Lag?

    public init() {}

    /// The counts and lags so far (`stoppedBy` nil: still listening).
    public init(source: String?, counts c: TriggerCounts, lags: some Collection<TriggerLag>, stoppedBy: String? = nil) {
        self.source = source
        self.stoppedBy = stoppedBy
        (seen, captured, failed, coalesced, dropped, kernelDropped) = (c.seen, c.captured, c.failed, c.coalesced, c.dropped, c.kernelDropped)
        lagToExposureStart = Lag(lags.map(\.toExposureStart))
        lagToDelivered = Lag(lags.compactMap(\.toDelivered))
        lagToFiles = Lag(lags.compactMap(\.toFiles))
    }

    /// The job's summary, as the command prints it last.
    public init(_ s: TriggerJob.Summary) {
        self.init(source: s.source, counts: s.counts, lags: s.lags, stoppedBy: s.stoppedBy)
        summary = true
    }
}

private func finite(_ v: Double?) -> Double? { v.flatMap { $0.isFinite ? $0 : nil } }
