import ArgumentParser
import CSystemShims
import Capture
import ImageOutput
import Jobs
import ShutterbugCore
import Timelapse

#if canImport(Glibc)
import Glibc
#endif

/// A timelapse job's options: what `shutterbug timelapse` takes beside the camera and the
/// output, what a job file and the service's `jobs:` give, and what `POST /api/jobs` takes as
/// words. Parsed and validated here, so the command line's options are the one schema of a job
/// and the service builds its jobs without the command (`JobDefinition(name:words:)`).
public struct TimelapseJobOptions: ParsableArguments, Sendable {
    public init() {}

    /// The job's name when none is given; its keogram and contact sheet keep plain names.
    public static let defaultJob = "timelapse"

    /// The options a job in the service may give, as their long names (the others are the
    /// service's: output, size, the camera's, stop-camera-when-idle).
    public static let serviceKeys = ["interval", "at", "count", "until", "start", "ev", "exposures", "gain", "format", "lens", "max-exposure", "max-gain",
                                     "ramp-step", "night-offset", "wb-step", "reserve", "keep", "keep-days", "no-phase-lock", "ignore-existing-photos"]

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Time between slots: 10s, 5m, 1h (0.1 s...7 d; default 30s).", valueName: "period"))
    public var interval: String?

    @Option(name: .long, help: ArgumentHelp("Slots at these times instead of a grid: dates and times, 2026-12-01T08:00,2026-12-01T12:00 (local, or ...Z for UTC), or times of day taken every day, 06:30,12:00,18:00 (local; with --count or --until). At most 100000 slots; a time given twice is one slot.", valueName: "time,..."))
    public var at: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Slots in all, taken or not (1...10000000).", valueName: "n"))
    public var count: Int?

    @Option(name: .long, help: ArgumentHelp("No slot at or after this time: 2026-12-01T08:00 (local) or ...Z (UTC); or 'stopped' to run until stopped (SIGINT, SIGTERM).", valueName: "time|stopped"))
    public var until: String?

    @Option(name: .long, help: ArgumentHelp("The first slot at or after this time (default now): 2026-12-01T06:00 (local) or ...Z (UTC).", valueName: "time"))
    public var start: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Exposure biases per slot around the ramped exposure, e.g. -2,0,2 (default 0).", valueName: "ev,..."))
    public var ev: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("A manual bracket at every slot instead of a ramped one: exposures 1/1000,1/250,1/60, the same each slot (no ramp).", valueName: "t,..."))
    public var exposures: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Analogue gain for --exposures (1...64; default 1).", valueName: "gain"))
    public var gain: Double?

    @Option(name: .long, help: ArgumentHelp("File formats: dng, jpeg, or both.", valueName: "dng,jpeg"))
    public var format: String = "jpeg"

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Lock focus at this lens position (dioptres) before the first slot, and again whenever the camera is started (a camera with a focus motor, such as sim:imx708).", valueName: "dpt"))
    public var lens: Double?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The longest exposure the ramp uses, then gain: 1/30, 2s (default: the bracket's brightest step at most an eighth of the interval, at most 4 s, and phase-locked at most 1/32 of the interval, so the frames before a slot fit between slots).", valueName: "time"))
    public var maxExposure: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The highest analogue gain the ramp uses (1...64).", valueName: "gain"))
    public var maxGain: Double = 16

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The most the exposure changes from one slot to the next, in EV (0.01...3).", valueName: "ev"))
    public var rampStep: Double = 1.0 / 3.0

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("How much darker the night is kept, in EV (-4...0).", valueName: "ev"))
    public var nightOffset: Double = -1

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("White balance cross-faded: each slot is taken with gains moved towards what AWB measures between slots, halfway and at most this many stops per slot (0.01...2); 0 leaves AWB to the camera frame by frame.", valueName: "stops"))
    public var wbStep: Double = 0.1

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Free space to leave on the output filesystem, in MiB (0...1048576): below it the job pauses, and resumes when space returns.", valueName: "MiB"))
    public var reserve: Int = 64

    @Option(name: .long, help: ArgumentHelp("Retention: keep at most this much of the job's files (e.g. 1GB, 500MB); the oldest slots' files go first, whole.", valueName: "size"))
    public var keep: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Retention: delete slots' files older than this many days (0.001...36500).", valueName: "days"))
    public var keepDays: Double?

    @Flag(name: .long, help: "Start a new job even where --output already holds photos that no journal there knows (its journal lost, emptied or deleted): they stay as they are, uncounted by --keep. Without it such a start is refused.")
    public var ignoreExistingPhotos = false

    @Flag(name: .long, help: "Take each slot's first frame exposed after the instant (up to a frame period late) instead of phase-locking: planning the frames before the slot so the first step's exposure begins at the instant within a line time.")
    public var noPhaseLock = false

    public func validate() throws {
        if interval != nil, at != nil { throw ValidationError("--interval and --at exclude each other: give a grid (--interval 30s) or a list of times (--at 08:00,12:00)") }
        _ = try period()
        if let count, !(1...10_000_000).contains(count) { throw ValidationError("--count must be in 1...10000000, not \(count)") }
        let now = WallClockTime(nanoseconds: MonotonicClock.now().nanoseconds + sbshim_realtime_offset_ns())
        let first = try start.map { try NumericInput.wallTime($0, "--start") }
        if let until, let end = try endTime() {
            guard end > now else { throw ValidationError("--until \(until) is already past (it is \(now)): give a time to come") }
            if let first, let start, end <= first { throw ValidationError("--until \(until) is not after --start \(start): no slot would be taken") }
        }
        let slots = try atList()
        if case .dates(let times) = slots {
            guard times.contains(where: { $0 > now }) else { throw ValidationError("every --at time is already past (it is \(now)): give a time to come") }
        } else {
            guard count != nil || until != nil else { throw ValidationError("give --count N or --until TIME: a timelapse needs an end (--until stopped runs until it is stopped)") }
        }
        if ev != nil, exposures != nil { throw ValidationError("--ev and --exposures exclude each other: a ramped bracket (--ev -1,0,1) or a manual one (--exposures 1/1000,1/250)") }
        if let gain {
            guard exposures != nil else { throw ValidationError("--gain applies to --exposures only; the ramp chooses the gain of an --ev bracket (up to --max-gain)") }
            try NumericInput.check(gain, "--gain", in: 1...64)
        }
        _ = try biases()
        _ = try manualSteps()
        _ = try PhotoFormats.parse(format)
        if let maxExposure { _ = try NumericInput.exposure(Substring(maxExposure), "--max-exposure", in: 1e-5...60) }
        try NumericInput.check(maxGain, "--max-gain", in: 1...64)
        try NumericInput.check(rampStep, "--ramp-step", in: 0.01...3, unit: "EV")
        try NumericInput.check(nightOffset, "--night-offset", in: -4...0, unit: "EV")
        if wbStep != 0 { try NumericInput.check(wbStep, "--wb-step", in: 0.01...2, unit: "stops (or 0)") }
        _ = try keepBytes()
        if let keepDays { try NumericInput.check(keepDays, "--keep-days", in: 0.001...36_500, unit: "days") }
        guard (0...1_048_576).contains(reserve) else { throw ValidationError("--reserve must be in 0...1048576 MiB, not \(reserve)") }
        if let lens { try NumericInput.check(lens, "--lens", in: 0...32, unit: "dioptres") }
    }


    public func endTime() throws -> WallClockTime? {
        guard let until, until.lowercased() != "stopped" else { return nil }
        return try NumericInput.wallTime(until, "--until")
    }

    /// --keep as bytes: 500MB, 1GB, 2TB (1 MB...1000 TB).
    public func keepBytes() throws -> Int64? {
        guard let keep else { return nil }
        let t = keep.uppercased()
        let units: [(String, Double)] = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6)]
        for (u, scale) in units where t.hasSuffix(u) {
            if let v = Double(t.dropLast(u.count)), v.isFinite, (1e6...1e15).contains(v * scale) { return Int64(v * scale) }
        }
        throw ValidationError("--keep must be a size from 1MB to 1000TB, written 500MB, 1GB or 2TB, not '\(keep)'")
    }

    public func period() throws -> Duration { try NumericInput.period(interval ?? "30s", "--interval", in: 0.1...(86_400 * 7)) }

    /// Each step's bias in EV: --ev's, or for a manual bracket each exposure against the middle step's.
    public func biases() throws -> [Double] {
        if let manual = try manualSteps() {
            let reference = manual[manual.count / 2].exposure.secondsValue
            return manual.map { log2($0.exposure.secondsValue / reference) }
        }
        let b = try ev.map { try NumericInput.numbers($0, "--ev", in: -8...8, unit: "stops", example: "-2,0,2") } ?? [0]
        guard (1...9).contains(b.count) else { throw ValidationError("--ev takes 1 to 9 biases, not \(b.count)") }
        return b
    }

    /// --exposures with --gain: the same steps every slot.
    public func manualSteps() throws -> [ExposureRamp.Settings]? {
        guard let exposures else { return nil }
        let items = try NumericInput.list(exposures, "--exposures", example: "1/1000,1/250,1/60", maxCount: 9)
        return try items.map { ExposureRamp.Settings(exposure: try NumericInput.exposure($0, "--exposures value", in: 1e-5...60), gain: gain ?? 1) }
    }

    /// --at: dates and times, or times of day taken every day.
    public enum SlotTimes: Sendable {
        case dates([WallClockTime])
        /// Seconds into a local day.
        case daily([Int])
    }

    public func atList() throws -> SlotTimes? {
        guard let at else { return nil }
        let items = try NumericInput.list(at, "--at", example: "2026-12-01T08:00,2026-12-01T12:00 or 06:30,18:00", maxCount: TimelapseSchedule.Plan.maxTimes)
        let daily = items.map { $0.contains("T") || $0.filter({ $0 == "-" }).count >= 2 }
        if daily.allSatisfy({ !$0 }) {
            return .daily(try items.map { item in
                let p = item.split(separator: ":").map { Int($0) }
                guard (2...3).contains(p.count), p.allSatisfy({ $0 != nil }), (0...23).contains(p[0]!), (0...59).contains(p[1]!), (0...59).contains(p.count > 2 ? p[2]! : 0) else {
                    throw ValidationError("--at: '\(item)' is not a time of day like 06:30 or 18:00:30, nor a date and time like 2026-12-01T08:00")
                }
                return p[0]! * 3600 + p[1]! * 60 + (p.count > 2 ? p[2]! : 0)
            })
        }
        guard daily.allSatisfy({ $0 }) else { throw ValidationError("--at takes dates and times (2026-12-01T08:00) or times of day (08:00), not both in one list") }
        // Whole seconds, so two different times are a second apart at least; a time given twice
        // is one slot.
        return .dates(try items.map { try NumericInput.wallTime(String($0), "--at") })
    }

    /// The slots' wall times for --at, from `from` (the job's first slot, or now on its first
    /// run) to the end or the count, at most `Plan.maxTimes`. Times of day are local, each day's
    /// through the time zone's rules on that day (a daylight-saving change keeps 12:00 at noon).
    public static func slotTimes(_ slots: SlotTimes, from: WallClockTime, end: WallClockTime?, count: Int?) -> [WallClockTime] {
        switch slots {
        case .dates(let times):
            return times
        case .daily(let seconds):
            let limit = min(count ?? TimelapseSchedule.Plan.maxTimes, TimelapseSchedule.Plan.maxTimes)
            var out: [WallClockTime] = []
            var day = time_t(from.nanoseconds / 1_000_000_000)
            var base = tm()
            localtime_r(&day, &base)
            for d in 0... {
                for s in Set(seconds).sorted() {
                    var t = base
                    t.tm_mday += Int32(d)
                    t.tm_hour = Int32(s / 3600)
                    t.tm_min = Int32(s / 60 % 60)
                    t.tm_sec = Int32(s % 60)
                    t.tm_isdst = -1
                    let w = WallClockTime(nanoseconds: Int64(mktime(&t)) * 1_000_000_000)
                    if let end, w >= end { return out }
                    if w >= from { out.append(w) }
                    if out.count >= limit { return out }
                }
            }
            return out
        }
    }

    public func journalSpec(camera: String?) throws -> String {
        // A grid job's text is as it was before lists and manual brackets, so its journals resume.
        let slots = try at.map { "at=\($0)" } ?? "interval=\(try period().nanosecondsValue)ns"
        let steps = try manualSteps().map { "exposures=\($0.map { String($0.exposure.nanosecondsValue) }.joined(separator: ","))ns gain=\(gain ?? 1)" }
            ?? "ev=\(try biases().map { String($0) }.joined(separator: ","))"
        return "\(slots) \(steps) format=\(format) camera=\(camera ?? "default")"
    }

    /// The job as `TimelapseJob` runs it, named `job` (its keogram and sheet say so unless it
    /// is `defaultJob`), its files named by `template`, on `camera` (nil: the default one).
    public func jobSpec(job: String, template: String, camera: String?) throws -> TimelapseJobSpec {
        let end = try endTime()
        let slots = try atList()
        let every = try period()
        let count = self.count
        var spec = TimelapseJobSpec(name: job, biases: try biases(), manual: try manualSteps(), formats: try PhotoFormats.parse(format), template: template,
                                    journalSpec: try journalSpec(camera: camera), start: try start.map { try NumericInput.wallTime($0, "--start") }) { start, anchor in
            // A list's numbering starts at the job's first slot, kept in the journal.
            if let slots {
                let from = anchor ?? start
                return TimelapseSchedule.Plan(times: Self.slotTimes(slots, from: from, end: end, count: count), start: from, end: end, count: count)
            }
            return TimelapseSchedule.Plan(interval: every, start: start, end: end, count: count)
        }
        spec.maxExposure = try maxExposure.map { try NumericInput.exposure(Substring($0), "--max-exposure", in: 1e-5...60) }
        spec.maxGain = maxGain
        spec.rampStep = rampStep
        spec.nightOffset = nightOffset
        spec.wbStep = wbStep
        spec.keepBytes = try keepBytes()
        spec.keepDays = keepDays
        spec.phaseLock = !noPhaseLock
        spec.ignoreExistingPhotos = ignoreExistingPhotos
        // Two jobs in one folder keep a keogram and a contact sheet each.
        spec.pictureSuffix = job == Self.defaultJob ? "" : "-" + job
        return spec
    }
}

/// File formats as options name them: dng, jpeg or both.
public enum PhotoFormats {
    public static func parse(_ format: String) throws -> Set<PhotoFormat> {
        var set = Set<PhotoFormat>()
        for item in format.split(separator: ",") {
            let word = item.filter { $0 != " " }.lowercased()
            switch word {
            case "dng", "raw": set.insert(.dng)
            case "jpeg", "jpg": set.insert(.jpeg)
            default: throw ValidationError("--format takes dng, jpeg or dng,jpeg, not '\(format)'")
            }
        }
        guard !set.isEmpty else { throw ValidationError("--format takes dng, jpeg or dng,jpeg, not '\(format)'") }
        return set
    }
}

extension ParsableArguments {
    /// The first line of ArgumentParser's message for `error` (no usage text after it).
    public static func plainMessage(for error: Error) -> String {
        let message = message(for: error)
        return String(message.split(separator: "\n").first ?? Substring(message))
    }
}
