import ArgumentParser
import CSystemShims
import Capture
import CaptureScheduler
import ImageOutput
import Jobs
import Journal
import ProcessTriggers
import ShutterbugCore
import SimulatedCamera
import Synchronization
import Systemd
import Timelapse

#if canImport(Glibc)
import Glibc
#endif

struct TimelapseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timelapse",
        abstract: "Photos or brackets on an absolute schedule, the exposure ramped from day to night, every slot journalled; run it again to resume.",
        discussion: """
            Slots fall on a grid aligned to wall time (a 30 s interval shoots at :00 and :30) \
            and are waited for on CLOCK_MONOTONIC with the camera streaming. Each slot's \
            exposure is phase-locked: the frames before it are planned (one of them \
            stretched) so that the first step's exposure begins at the slot's instant within \
            a line time, and the JSON says how each lock went. A slot more than \
            min(interval/2, 1 s) late is skipped and recorded, never fired late; a wall-clock \
            step forward skips the slots it passes, one back never repeats a slot. The \
            exposure is ramped in software: each slot's 0 EV frame is metered and the next \
            slot's exposure moves towards the target, damped, at most --ramp-step EV per slot, \
            exposure time first then gain, darker at night by --night-offset. Everything goes \
            into a SQLite journal (OUTPUT/timelapse.sqlite): the same command again continues \
            the job, numbering, ramp and all, and records the slots missed meanwhile.
            """)

    @OptionGroup var camera: CameraOptions

    @Option(name: .long, help: ArgumentHelp("Read the job's options from a YAML file whose keys are these options' long names (interval: 30s, ev: [-2, 0, 2], output: DIR); options on the command line override the file's. `shutterbug config check FILE` lists its mistakes.", valueName: "file"))
    var jobFile: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Time between slots: 10s, 5m, 1h (0.1 s...7 d; default 30s).", valueName: "period"))
    var interval: String?

    @Option(name: .long, help: ArgumentHelp("Slots at these times instead of a grid: dates and times, 2026-12-01T08:00,2026-12-01T12:00 (local, or ...Z for UTC), or times of day taken every day, 06:30,12:00,18:00 (local; with --count or --until). At most 100000 slots; a time given twice is one slot.", valueName: "time,..."))
    var at: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Slots in all, taken or not (1...10000000).", valueName: "n"))
    var count: Int?

    @Option(name: .long, help: ArgumentHelp("No slot at or after this time: 2026-12-01T08:00 (local) or ...Z (UTC); or 'stopped' to run until stopped (SIGINT, SIGTERM).", valueName: "time|stopped"))
    var until: String?

    @Option(name: .long, help: ArgumentHelp("The first slot at or after this time (default now): 2026-12-01T06:00 (local) or ...Z (UTC).", valueName: "time"))
    var start: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Exposure biases per slot around the ramped exposure, e.g. -2,0,2 (default 0).", valueName: "ev,..."))
    var ev: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("A manual bracket at every slot instead of a ramped one: exposures 1/1000,1/250,1/60, the same each slot (no ramp).", valueName: "t,..."))
    var exposures: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Analogue gain for --exposures (1...64; default 1).", valueName: "gain"))
    var gain: Double?

    @Option(name: .long, help: ArgumentHelp("Where the photos, sidecars and the journal go.", valueName: "dir"))
    var output: String

    @Option(name: .long, help: ArgumentHelp("File formats: dng, jpeg, or both.", valueName: "dng,jpeg"))
    var format: String = "jpeg"

    @Option(name: .long, help: ArgumentHelp("With DNG: the raw stream's size, which picks the sensor mode on a Pi (e.g. 4056x3040 for the HQ camera's full-resolution mode); default the mode the processed stream runs in alone.", valueName: "WxH"))
    var rawSize: String?

    @Option(name: .long, help: ArgumentHelp("The job's name in the journal: the same name resumes it.", valueName: "name"))
    var job: String = Self.defaultJob
    static let defaultJob = "timelapse"

    @Option(name: .long, help: ArgumentHelp("File names under --output: tokens {date} {time} {capture} {id} {step} {steps} {camera}; '/' makes folders.", valueName: "template"))
    var name: String = FileNameTemplate.default.pattern

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Lock focus at this lens position (dioptres) before the first slot, and again whenever the camera is started (a camera with a focus motor, such as sim:imx708).", valueName: "dpt"))
    var lens: Double?

    @Option(name: .long, help: ArgumentHelp("The processed stream's size (the sensor mode follows), e.g. 1332x990; default the sensor's full size.", valueName: "WxH"))
    var size: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The longest exposure the ramp uses, then gain: 1/30, 2s (default: the bracket's brightest step at most an eighth of the interval, at most 4 s, and phase-locked at most 1/32 of the interval, so the frames before a slot fit between slots).", valueName: "time"))
    var maxExposure: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The highest analogue gain the ramp uses (1...64).", valueName: "gain"))
    var maxGain: Double = 16

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The most the exposure changes from one slot to the next, in EV (0.01...3).", valueName: "ev"))
    var rampStep: Double = 1.0 / 3.0

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("How much darker the night is kept, in EV (-4...0).", valueName: "ev"))
    var nightOffset: Double = -1

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("White balance cross-faded: each slot is taken with gains moved towards what AWB measures between slots, halfway and at most this many stops per slot (0.01...2); 0 leaves AWB to the camera frame by frame.", valueName: "stops"))
    var wbStep: Double = 0.1

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Free space to leave on the output filesystem, in MiB (0...1048576): below it the job pauses, and resumes when space returns.", valueName: "MiB"))
    var reserve: Int = 64

    @Option(name: .long, help: ArgumentHelp("Retention: keep at most this much of the job's files (e.g. 1GB, 500MB); the oldest slots' files go first, whole.", valueName: "size"))
    var keep: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Retention: delete slots' files older than this many days (0.001...36500).", valueName: "days"))
    var keepDays: Double?

    @Flag(name: .long, help: "Start a new job even where --output already holds photos that no journal there knows (its journal lost, emptied or deleted): they stay as they are, uncounted by --keep. Without it such a start is refused.")
    var ignoreExistingPhotos = false

    @Flag(name: .long, help: "One JSON object per slot, then a summary object.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Stop the camera between slots when it would stand idle longer than this (10s...1d), to save power; it is started again its measured start-up time, and the lock's lead, before the next slot. 'never' keeps it streaming.", valueName: "period|never"))
    var stopCameraWhenIdle: String = "120s"

    @Flag(name: .long, help: "Take each slot's first frame exposed after the instant (up to a frame period late) instead of phase-locking: planning the frames before the slot so the first step's exposure begins at the instant within a line time.")
    var noPhaseLock = false

    func validate() throws {
        _ = try NumericInput.size(rawSize, "--raw-size", example: "2028x1520")
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
        _ = try Bracket.formats(parsing: format)
        if let size { _ = try Self.parseSize(size) }
        if let maxExposure { _ = try NumericInput.exposure(Substring(maxExposure), "--max-exposure", in: 1e-5...60) }
        try NumericInput.check(maxGain, "--max-gain", in: 1...64)
        try NumericInput.check(rampStep, "--ramp-step", in: 0.01...3, unit: "EV")
        try NumericInput.check(nightOffset, "--night-offset", in: -4...0, unit: "EV")
        if wbStep != 0 { try NumericInput.check(wbStep, "--wb-step", in: 0.01...2, unit: "stops (or 0)") }
        _ = try keepBytes()
        _ = try idleStop()
        if let keepDays { try NumericInput.check(keepDays, "--keep-days", in: 0.001...36_500, unit: "days") }
        guard (0...1_048_576).contains(reserve) else { throw ValidationError("--reserve must be in 0...1048576 MiB, not \(reserve)") }
        guard !job.isEmpty, job.count <= 64, job.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }), !job.hasPrefix(".") else {
            throw ValidationError("--job must be a name of 1 to 64 letters, digits, '-', '_' or '.' (it names the job's keogram and contact sheet), not '\(job)'")
        }
        do { _ = try FileNameTemplate(validating: name) } catch let e as ShutterbugError { throw ValidationError("--name: \(e.message)") }
        if let lens { try NumericInput.check(lens, "--lens", in: 0...32, unit: "dioptres") }
    }

    /// --until as a wall time; nil for none or "stopped".
    func endTime() throws -> WallClockTime? {
        guard let until, until.lowercased() != "stopped" else { return nil }
        return try NumericInput.wallTime(until, "--until")
    }

    /// --keep as bytes: 500MB, 1GB, 2TB (1 MB...1000 TB).
    func keepBytes() throws -> Int64? {
        guard let keep else { return nil }
        let t = keep.uppercased()
        let units: [(String, Double)] = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6)]
        for (u, scale) in units where t.hasSuffix(u) {
            if let v = Double(t.dropLast(u.count)), v.isFinite, (1e6...1e15).contains(v * scale) { return Int64(v * scale) }
        }
        throw ValidationError("--keep must be a size from 1MB to 1000TB, written 500MB, 1GB or 2TB, not '\(keep)'")
    }

    /// --stop-camera-when-idle: nil for never.
    func idleStop() throws -> Duration? {
        if stopCameraWhenIdle.lowercased() == "never" { return nil }
        return try NumericInput.period(stopCameraWhenIdle, "--stop-camera-when-idle", in: 10...86_400)
    }

    func period() throws -> Duration { try NumericInput.period(interval ?? "30s", "--interval", in: 0.1...(86_400 * 7)) }

    /// Each step's bias in EV: --ev's, or for a manual bracket each exposure against the middle step's.
    func biases() throws -> [Double] {
        if let manual = try manualSteps() {
            let reference = manual[manual.count / 2].exposure.secondsValue
            return manual.map { log2($0.exposure.secondsValue / reference) }
        }
        let b = try ev.map { try NumericInput.numbers($0, "--ev", in: -8...8, unit: "stops", example: "-2,0,2") } ?? [0]
        guard (1...9).contains(b.count) else { throw ValidationError("--ev takes 1 to 9 biases, not \(b.count)") }
        return b
    }

    /// --exposures with --gain: the same steps every slot.
    func manualSteps() throws -> [ExposureRamp.Settings]? {
        guard let exposures else { return nil }
        let items = try NumericInput.list(exposures, "--exposures", example: "1/1000,1/250,1/60", maxCount: 9)
        return try items.map { ExposureRamp.Settings(exposure: try NumericInput.exposure($0, "--exposures value", in: 1e-5...60), gain: gain ?? 1) }
    }

    /// --at: dates and times, or times of day taken every day.
    enum SlotTimes: Sendable {
        case dates([WallClockTime])
        /// Seconds into a local day.
        case daily([Int])
    }

    func atList() throws -> SlotTimes? {
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
    static func slotTimes(_ slots: SlotTimes, from: WallClockTime, end: WallClockTime?, count: Int?) -> [WallClockTime] {
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

    static func parseSize(_ text: String) throws -> (Int, Int) {
        let p = text.lowercased().split(separator: "x")
        guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), (16...16384).contains(w), (16...16384).contains(h) else {
            throw ValidationError("--size must be WIDTHxHEIGHT, 16...16384 each, e.g. 1332x990, not '\(text)'")
        }
        return (w, h)
    }

    /// What the journal compares when a job is resumed: the settings that make it the same job.
    func spec() throws -> String {
        // A grid job's text is as it was before lists and manual brackets, so its journals resume.
        let slots = try at.map { "at=\($0)" } ?? "interval=\(try period().nanosecondsValue)ns"
        let steps = try manualSteps().map { "exposures=\($0.map { String($0.exposure.nanosecondsValue) }.joined(separator: ","))ns gain=\(gain ?? 1)" }
            ?? "ev=\(try biases().map { String($0) }.joined(separator: ","))"
        return "\(slots) \(steps) format=\(format) camera=\(camera.camera ?? "default")"
    }

    /// The job as the engine runs it (`TimelapseRun`): here, and for the service's jobs.
    func jobSpec() throws -> TimelapseJobSpec {
        let end = try endTime()
        let slots = try atList()
        let every = try period()
        let count = self.count
        var spec = TimelapseJobSpec(name: job, biases: try biases(), manual: try manualSteps(), formats: try Bracket.formats(parsing: format), template: name,
                                    journalSpec: try self.spec(), start: try start.map { try NumericInput.wallTime($0, "--start") }) { start, anchor in
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

    func run() async throws {
        let spec = try jobSpec()
        var processed = StreamRequest(role: .still)
        if let size { (processed.width, processed.height) = try Self.parseSize(size) }
        let stream = processed
        let directory = try OutputDirectory(path: output, reserve: Int64(reserve) << 20)
        // The job's clock, which outlives each camera it opens: CLOCK_MONOTONIC, or in virtual
        // time a clock that moves with the frames and jumps over the job's idle waits.
        let virtualClock = camera.virtualTime ? VirtualCameraClock() : nil
        let jobClock: any CameraClock = virtualClock ?? MonotonicCameraClock.shared
        let (camera, formats, rawSize, biasCount) = (self.camera, spec.formats, self.rawSize, spec.biases.count)
        // The camera, its streams (the raw stream's mode chosen by the rule every command
        // shares) and what its files say of it: opened at the start, and again after a
        // failure or an idle stop.
        let open: @Sendable () async throws -> TimelapseJob.CameraLease = {
            let cam = try camera.open(virtualClock: virtualClock)
            do {
                let session = CaptureSession(backend: cam)
                let (streams, rawRule) = try RawStreamRule.streams(for: cam, processed: stream, raw: formats.contains(.dng), rawSize: rawSize)
                let config = try await session.start(streams: streams, preparedBracketCount: biasCount)
                for a in config.adjustments { notice("adjusted: \(a)") }
                if let line = rawRule?.line(cam.sensorModeReport) { notice(line) }
                return .init(camera: cam, session: session, streams: config.streams, description: Bracket.cameraDescription(cam, config))
            } catch {
                cam.release()
                throw error
            }
        }
        let job = TimelapseJob(spec: spec, output: output, reserve: Int64(reserve) << 20, source: .owned(open: open, stopWhenIdle: try idleStop()),
                               clock: jobClock, lens: lens)
        let printer = TimelapsePrinter(json: json, spec: spec, directory: directory)

        // SIGINT and SIGTERM stop the job after the slot in progress; SIGUSR1 asks for the
        // keogram and contact sheet so far.
        let refresh = try SignalTriggerSource(signal: SIGUSR1, name: "SIGUSR1")
        let stops = try [SignalTriggerSource(signal: SIGINT, name: "SIGINT"), SignalTriggerSource(signal: SIGTERM, name: "SIGTERM")]
        let watchers = stops.map { s in Task { for await _ in s.triggers() { job.stop(s.name); return } } }
            + [Task { for await _ in refresh.triggers() { job.requestPictures() } }]
        defer {
            watchers.forEach { $0.cancel() }
            (stops + [refresh]).forEach { $0.stop() }
        }
        let printing = Task { await printer.run(job.events) }
        do {
            try await job.run()
            await printing.value
        } catch {
            await printing.value
            switch error {
            case let e as ShutterbugError where e.code == .busy || e.code == .invalidArgument:
                // Said before the first slot (exit 64): another process runs the job, photos
                // no journal knows, a bracket the camera cannot take.
                throw ValidationError(e.message)
            case let gone as TimelapseJob.CameraGone:
                printer.notifier?.stopping(status: "timelapse '\(job.spec.name)': the camera failed; exiting so a new process can open it")
                notice("\(gone.message); exiting (status 75) so the service manager starts a new one, which resumes the job")
                throw ExitCode(75)
            default:
                throw error
            }
        }
    }

    /// "3 h 20 min", "4 min 10 s", "9.8 s".
    static func span(_ d: Duration) -> String {
        let s = d.secondsValue
        if s < 60 { return String(format2: s) + " s" }
        let total = Int(s.rounded())
        if total < 3600 { return "\(total / 60) min \(total % 60) s" }
        if total < 86_400 { return "\(total / 3600) h \(total % 3600 / 60) min" }
        return "\(total / 86_400) d \(total % 86_400 / 3600) h"
    }

    static func bytes(_ n: Int64) -> String {
        let g = Double(n) / Double(1 << 30)
        return g >= 1 ? String(format2: g) + " GiB" : String(format2: Double(n) / Double(1 << 20)) + " MiB"
    }
}
