import CSystemShims
import Capture
import ImageOutput
import Journal
import ShutterbugCore
import Timelapse

#if canImport(Glibc)
import Glibc
#endif

/// What makes a timelapse job, checked already (by the command line's parser, for
/// `shutterbug timelapse` and for the service's jobs alike).
public struct TimelapseJobSpec: Sendable {
    /// The job's name in the journal: the same name resumes it.
    public var name: String
    /// Each step's bias in EV around the ramped exposure (for a manual bracket, each exposure
    /// against the middle step's).
    public var biases: [Double]
    /// A manual bracket, the same each slot (no ramp).
    public var manual: [ExposureRamp.Settings]?
    public var formats: Set<PhotoFormat>
    /// The file-name template under the output directory.
    public var template: String
    /// The longest exposure the ramp uses (nil: derived from the interval).
    public var maxExposure: Duration?
    public var maxGain: Double = 16
    public var rampStep: Double = 1.0 / 3.0
    public var nightOffset: Double = -1
    public var wbStep: Double = 0.1
    public var keepBytes: Int64?
    public var keepDays: Double?
    public var phaseLock = true
    /// What the journal compares on a resume: the settings that make it the same job.
    public var journalSpec: String
    /// The slots, from the first slot's time (`start`, or now) and the journal's anchor (the
    /// job's first slot ever, on a resume).
    public var plan: @Sendable (_ start: WallClockTime, _ anchor: WallClockTime?) throws -> TimelapseSchedule.Plan
    /// The first slot at or after this (nil: now).
    public var start: WallClockTime?
    /// Start a new journal over photos no journal knows (`openJournal`).
    public var ignoreExistingPhotos = false
    /// After `keogram` and `contact-sheet` in their file names: a job sharing its folder with
    /// others names its own ("-roof").
    public var pictureSuffix = ""

    public init(name: String, biases: [Double], manual: [ExposureRamp.Settings]?, formats: Set<PhotoFormat>, template: String, journalSpec: String,
                start: WallClockTime?, plan: @escaping @Sendable (WallClockTime, WallClockTime?) throws -> TimelapseSchedule.Plan) {
        self.name = name
        self.biases = biases
        self.manual = manual
        self.formats = formats
        self.template = template
        self.journalSpec = journalSpec
        self.start = start
        self.plan = plan
    }
}

/// One timelapse job's slots taken on a running capture session: the exposure ramp, the white
/// balance fade, the space check and retention, the journal (slots it cannot take yet are kept
/// until it can), the keogram and the contact sheet. Who runs it owns the camera and the
/// schedule: `shutterbug timelapse` (which stops and reopens the camera) and the service's jobs
/// (which share the service's session).
///
/// Not thread-safe: one task drives it.
public final class TimelapseRun {
    public let spec: TimelapseJobSpec
    public let journal: TimelapseJournal
    public let directory: OutputDirectory
    /// The camera has no exposure control: a photo per slot at its own exposure.
    public let plain: Bool
    /// Slots are phase-locked (the camera has frame-duration control and the job wants it).
    public let lockable: Bool
    public let fadesWhiteBalance: Bool
    /// The interval, or the shortest gap of a list: what a slot's work must fit in.
    public let every: Duration
    public private(set) var ramp: ExposureRamp
    var whiteBalance: WhiteBalanceFade
    /// The next slot's white balance, locked on the camera already (sent without a wait, right
    /// after a slot or a camera start, so it never delays a slot's phase lock).
    var nextWhiteBalance: (measured: ColourGains, applied: ColourGains)?
    /// Slots this run, by state.
    public private(set) var counts: [TimelapseJournal.SlotState: Int] = [:]
    /// Each taken slot's exposure start less its instant.
    public private(set) var errors: [Duration] = []
    public private(set) var deletedSlots = 0
    /// The slot retention waits at for its files to be uploaded (said once).
    var retentionWaiting: Int?
    /// The 0 EV step's settings at the last slot, and the ramp's phase then.
    public private(set) var lastSettings: ExposureRamp.Settings
    public private(set) var lastPhase = "-"
    /// Why slots are not being written (the disk too full), while they are not.
    public private(set) var pausedForSpace: String?
    /// A slot has been taken in this run.
    public private(set) var tookOne = false
    /// Slots the journal could not take (its disk full too): they go in first when it can.
    var unjournalled: [Pending] = []
    /// Where messages go (the command's standard error, the service's log).
    let log: @Sendable (String) -> Void
    /// Sees every event of every slot's capture (the service counts them in its metrics).
    public var observe: (@Sendable (OutputEvent) -> Void)?

    struct Pending {
        var slot: TimelapseJournal.SlotRecord
        var frames: [TimelapseJournal.FrameRecord] = []
        var files: [TimelapseJournal.FileRecord] = []
        var decision: ExposureRamp.Decision?
        var rampAfter: ExposureRamp.Settings?
        var whiteBalanceAfter: ColourGains?
        var keogram: [UInt8]?
        var thumbnail: TimelapseJournal.Thumbnail?
    }

    /// Starts the run's state from the camera's limits and its first settled frame (where the
    /// ramp begins unless the journal has one).
    ///
    /// - Throws: `invalidArgument` when the job cannot run on this camera as asked (a bracket
    ///   on a camera without exposure control, manual exposures longer than half the interval).
    public init(spec: TimelapseJobSpec, journal: TimelapseJournal, directory: OutputDirectory, camera: String, limits: ControlLimits,
                first: FrameMetadata, resume: TimelapseJournal.Resume, every: Duration, log: @escaping @Sendable (String) -> Void) throws {
        self.spec = spec
        self.journal = journal
        self.directory = directory
        self.every = every
        self.log = log
        plain = !limits.supported.isSuperset(of: [.exposureTime, .analogueGain])
        lockable = spec.phaseLock && limits.supported.contains(.frameDurationLimits)
        if plain {
            guard spec.manual == nil, spec.biases == [0] else {
                throw ShutterbugError(.invalidArgument, "\(camera) has no exposure control (ExposureTime, AnalogueGain): a timelapse on it takes a photo at the camera's own exposure per slot; give no --ev or --exposures")
            }
        }
        if let manual = spec.manual {
            let busy = manual.reduce(Duration.zero) { $0 + $1.exposure }
            guard busy * 2 <= every else {
                throw ShutterbugError(.invalidArgument, "--exposures add up to \(busy.exposureDescription), more than half the time between slots (\(every.millisecondsDescription)): slots would be skipped; give shorter exposures or a longer interval")
            }
        }
        // By default the brightest step of the bracket takes at most an eighth of the interval,
        // so the bracket and the requests ahead of it fit between slots; phase-locked, at most
        // 1/32 of it, since the lock runs some 25 frames of the first step's length before the
        // slot (`PhaseLock.leadFrames`). A longer maximum is taken, and the slots the lock
        // cannot fit fall back to the first frame exposed after the instant (and say so).
        let brightest = pow(2, max(0, spec.biases.max() ?? 0))
        let longest = spec.maxExposure ?? min(every / (8 * brightest), spec.phaseLock ? every / 32 : .seconds(4), .seconds(4))
        let exposureRange = limits.exposureTime.map { $0.lowerBound...min(max(longest, $0.lowerBound), $0.upperBound) } ?? (.microseconds(100)...longest)
        let gainRange = limits.analogueGain.map { max(1, $0.lowerBound)...max(max(1, $0.lowerBound), min(spec.maxGain, $0.upperBound)) } ?? (1...spec.maxGain)
        var rampConfig = ExposureRamp.Configuration(exposure: exposureRange, gain: gainRange)
        rampConfig.maxStep = spec.rampStep
        rampConfig.nightOffset = spec.nightOffset
        let startSettings = resume.ramp ?? .init(exposure: first.exposureTime ?? .milliseconds(10),
                                                  gain: (first.analogueGain?.value ?? 1) * (first.digitalGain?.value ?? 1))
        ramp = ExposureRamp(rampConfig, settings: startSettings)
        lastSettings = ramp.settings
        // White balance cross-faded from slot to slot where the camera can fix it.
        fadesWhiteBalance = spec.wbStep > 0 && limits.supported.isSuperset(of: [.colourGains, .awbEnable])
        whiteBalance = WhiteBalanceFade(maxStep: spec.wbStep, applied: resume.whiteBalance)
    }

    /// Opens job `spec.name`'s journal in `directory` (`timelapse.sqlite`), checked whole, and
    /// makes disk and journal agree before any slot is taken:
    ///
    /// - a slot begun and never recorded (the process killed between its files and its row) is
    ///   recorded now as failed, with its files adopted after checking each is whole (a JPEG from
    ///   its SOI to its EOI, a DNG's TIFF header, a sidecar's closing brace); any that is not is
    ///   removed; `log` says which;
    /// - a new job in a folder holding captures no journal here knows (a journal lost, emptied or
    ///   deleted) is refused unless `spec.ignoreExistingPhotos`: the new journal would neither
    ///   number them nor count them against `--keep`.
    ///
    /// - Throws: `.invalidState` for a damaged journal, `.invalidArgument` for photos without a
    ///   journal, `.busy` for a job another process runs.
    public static func openJournal(in directory: OutputDirectory, spec: TimelapseJobSpec, log: @Sendable (String) -> Void) throws -> TimelapseJournal {
        let path = directory.path + "/" + journalName
        let journal = try TimelapseJournal(path: path, job: spec.name, spec: spec.journalSpec)
        let template = try FileNameTemplate(validating: spec.template)
        for intent in try journal.pendingSlots() {
            try adopt(intent, journal: journal, directory: directory, template: template, log: log)
        }
        if journal.created && !spec.ignoreExistingPhotos {
            let known = try journal.knownPaths()
            let unknown = directory.capturedFiles(depth: template.pattern.split(separator: "/").count + 1).filter { !known.contains($0) }
            if let first = unknown.first {
                // Refused before it began: the job is not left behind for a later run to find.
                try journal.discardNewJob()
                throw ShutterbugError(.invalidArgument, "\(directory.path) already holds \(unknown.count) photo file\(unknown.count == 1 ? "" : "s") that no journal here knows (\(first)\(unknown.count > 1 ? ", …" : "")): its journal \(path) is missing, empty or new, and a new job '\(spec.name)' would neither count them against --keep nor picture them. Give --ignore-existing-photos to start anyway (they stay as they are), or another --output")
            }
        }
        return journal
    }

    /// Refuses a job whose manual bracket this camera cannot take as asked (steps the frames'
    /// metadata cannot tell apart), before any slot: every slot would fail the same way.
    ///
    /// - Throws: `.invalidArgument` with the reason, `.unsupported` for a camera without
    ///   exposure control.
    public static func check(_ spec: TimelapseJobSpec, on session: CaptureSession) async throws {
        guard let manual = spec.manual else { return }
        // Exposures that cannot fit between slots: said now, not at the first slot.
        let now = MonotonicClock.now() + wallOffset(nil)
        if let every = try? spec.plan(now, nil).interval {
            let busy = manual.reduce(Duration.zero) { $0 + $1.exposure }
            guard busy * 2 <= every else {
                throw ShutterbugError(.invalidArgument, "--exposures add up to \(busy.exposureDescription), more than half the time between slots (\(every.millisecondsDescription)): slots would be skipped; give shorter exposures or a longer interval")
            }
        }
        guard manual.count > 1 else { return }
        try await session.validate(PhotoSettings(bracket: .manualExposure(manual.map { ($0.exposure, Gain($0.gain)) })))
    }

    /// The journal's file name in a job's folder.
    public static let journalName = "timelapse.sqlite"

    /// Records a slot the last run began and never recorded, adopting its whole files.
    static func adopt(_ intent: TimelapseJournal.Intent, journal: TimelapseJournal, directory: OutputDirectory, template: FileNameTemplate,
                      log: @Sendable (String) -> Void) throws {
        let known = try journal.knownPaths()
        let paths = intent.number.map { directory.files(ofCapture: $0, template: template) }?.filter { !known.contains($0) } ?? []
        var adopted: [TimelapseJournal.FileRecord] = []
        var removed: [String] = []
        var sidecar: [UInt8]?
        for p in paths {
            if let bytes = readAll(p), isWhole(bytes, path: p) {
                adopted.append(.init(path: p, bytes: bytes.count, crc32: CRC32.checksum(bytes)))
                if p.hasSuffix(".json") { sidecar = bytes }
            } else if unlink(p) == 0 {
                removed.append(p)
            }
        }
        // Whole only when the finished sidecar is here (a bracket's interim one is written after
        // each step, and says which are still to come) and every file it lists for each step is
        // here and whole; otherwise partial, naming the steps that are not.
        let check = SlotFiles.check(sidecar: sidecar, present: Set(adopted.map { SlotFiles.name($0.path) }))
        let whole = check.whole && removed.isEmpty
        let state: TimelapseJournal.SlotState = whole ? .taken : .failed
        let what = whole ? "all of this slot's files" : "\(adopted.count) file\(adopted.count == 1 ? "" : "s") of this slot (partial: \(check.missing))"
        let reason = "interrupted: the run stopped after writing \(what) and before journalling it; \(adopted.isEmpty ? "none was" : "they were") adopted on resume\(removed.isEmpty ? "" : ", \(removed.count) incomplete removed")"
        try journal.record(.init(index: intent.index, wall: intent.wall, state: state, reason: reason, number: adopted.isEmpty ? nil : intent.number), files: adopted)
        log("slot \(intent.index) was begun and not journalled (the last run was stopped): \(adopted.count) whole file\(adopted.count == 1 ? "" : "s") adopted\(adopted.isEmpty ? "" : " (" + adopted.map(\.path).joined(separator: ", ") + ")")\(removed.isEmpty ? "" : "; removed as incomplete: " + removed.joined(separator: ", ")); recorded as \(state.rawValue)\(whole ? "" : " (partial: \(check.missing))")")
    }

    static func readAll(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return out }
            out += chunk[..<n]
        }
    }

    /// Whether a file the writer named looks whole: it writes unnamed files and names them
    /// when complete, so anything else is damage from outside (a disk or a hand).
    static func isWhole(_ b: [UInt8], path: String) -> Bool {
        guard !b.isEmpty else { return false }
        switch path.lowercased().split(separator: ".").last {
        case "jpg", "jpeg": return b.count > 4 && b[0] == 0xFF && b[1] == 0xD8 && b[b.count - 2] == 0xFF && b[b.count - 1] == 0xD9
        case "dng": return b.count > 8 && (b.prefix(4) == [0x49, 0x49, 0x2A, 0x00] || b.prefix(4) == [0x4D, 0x4D, 0x00, 0x2A])
        case "json": return b.last(where: { $0 != 0x0A && $0 != 0x20 }) == 0x7D
        default: return true
        }
    }

    /// The first step's exposure at the next slot: what the lock's lead is counted in.
    public var firstStepExposure: Duration { (spec.manual ?? ramp.settings(biases: spec.biases).steps)[0].exposure }

    /// The camera's white balance for the next slot, from the last slot's towards what AWB
    /// measures now, locked at once without waiting for it to land.
    public func prepareWhiteBalance(_ session: CaptureSession) async {
        guard fadesWhiteBalance, !plain, let measured = await session.latestFrame?.colourGains else { return }
        var fade = whiteBalance
        let gains = fade.next(measured: measured)
        guard (try? await session.configure(waiting: false) { $0.lockedWhiteBalance = gains }) != nil else { return }
        whiteBalance = fade
        nextWhiteBalance = (measured, gains)
    }

    /// What became of a slot.
    public struct SlotResult: Sendable {
        public var index: Int
        public var wall: WallClockTime
        public var state: TimelapseJournal.SlotState
        public var reason: String?
        public var instant: SensorTime?
        /// The first step's exposure start.
        public var start: SensorTime?
        public var frames: [TimelapseJournal.FrameRecord] = []
        public var decision: ExposureRamp.Decision?
        public var files: [String] = []
        /// How the phase lock went.
        public var lock: String?
        /// The 0 EV photo's mean luma (0...255).
        public var luma: Double?
        public var whiteBalance: (measured: ColourGains, applied: ColourGains)?
        /// The camera failed or went away during the slot: its owner should open it again.
        public var cameraTrouble = false
        /// The 0 EV step's settings.
        public var settings: ExposureRamp.Settings?
    }

    /// A slot not taken (`skipped` or `missed`), journalled with why.
    public func notTaken(_ k: Int, wall: WallClockTime, state: TimelapseJournal.SlotState, reason: String) throws -> SlotResult {
        try record(Pending(slot: .init(index: k, wall: wall, state: state, reason: reason)))
        counts[state, default: 0] += 1
        return SlotResult(index: k, wall: wall, state: state, reason: reason)
    }

    /// Takes slot `k`: retention first (it may make the room the slot needs), then the slot's
    /// photo or bracket exposed at `instant`, written by `writer` and journalled; the ramp and
    /// the white balance move on for the next slot, whose instant is `nextInstant`. A slot
    /// whose files would not fit passes on time and is recorded as skipped (paused for space);
    /// the job goes on by itself when space returns.
    /// `clockHold`: the job's hold on a camera in virtual time: lifted once the slot's capture
    /// is queued on the session, frozen as it ends (`SlotClockHold`), and left so.
    public func take(_ k: Int, wall: WallClockTime, instant: SensorTime, nextInstant: SensorTime, session: CaptureSession, writer: PhotoFileWriter,
                     now: @Sendable () -> SensorTime, clockHold: SlotClockHold? = nil) async throws -> SlotResult {
        let biases = spec.biases
        try retain(before: k, now: wall)
        if let problem = spaceProblem(writer) {
            // The slot passes on the camera's clock as it would in real time.
            if let clockHold {
                _ = await clockHold.hold(until: instant, interrupt: { false })
            } else if let f = try? await session.captureFrame(exposedAfter: instant, timeout: every + .seconds(5)) {
                f.release()
            }
            if pausedForSpace == nil { log("pausing at slot \(k): \(problem); the job goes on once space is freed") }
            pausedForSpace = problem
            return try notTaken(k, wall: wall, state: .skipped, reason: "paused: \(problem)")
        }
        if pausedForSpace != nil {
            pausedForSpace = nil
            log("space is back: resuming at slot \(k)")
        }
        tookOne = true
        let (steps, shift) = spec.manual.map { ($0, 0.0) } ?? ramp.settings(biases: biases)
        // The slot's white balance: from the last slot's towards what AWB measures now, fixed
        // for the slot's frames (and the lock's before them), then AWB again.
        let wb = nextWhiteBalance
        nextWhiteBalance = nil
        // The slot's lateness rule holds where it means something, at exposure start: a slot
        // whose first exposure would begin past it is skipped, never fired late.
        let latest = instant + TimelapseSchedule.tolerance(interval: every)
        let settings = plain ? PhotoSettings(formats: spec.formats, exposedAfter: instant, phaseLocked: lockable, exposedBefore: latest)
            : PhotoSettings(bracket: .manualExposure(steps.map { ($0.exposure, Gain($0.gain)) }), formats: spec.formats, exposedAfter: instant, phaseLocked: lockable,
                            whiteBalance: wb?.applied, exposedBefore: latest)
        var result = SlotResult(index: k, wall: wall, state: .taken, instant: instant, whiteBalance: wb)
        var files: [TimelapseJournal.FileRecord] = []
        var means: [Int: Double] = [:]
        var columns: [Int: [UInt8]] = [:]
        var thumbs: [Int: Thumbnailer] = [:]
        var failure: String?
        /// Why the slot was skipped at exposure start (its first exposure would have begun too late).
        var late: String?
        // Every file that could not be written is named (on a full disk, the photos first,
        // not only the sidecar that failed last).
        var writeFailures: [String] = []
        // The slot's number goes into the journal before any of its files exists: a run killed
        // between the two leaves a slot the next run can reconcile (`openJournal`).
        let numbered = try directory.nextCaptureNumber(template: writer.template, atLeast: ((try? journal.highestNumber()) ?? nil).map { $0 + 1 } ?? 1)
        if let n = numbered.notice { log(n) }
        do {
            try journal.intend(.init(index: k, wall: wall, number: numbered.number))
        } catch {
            log("slot \(k): cannot journal the slot before writing it (\(error)); a kill now would leave its files unjournalled")
        }
        // In virtual time the clock is frozen again the moment the capture ends, on the
        // session, before it handles another frame: the writer's task, which learns of it
        // later, would let others' captures run the clock on meanwhile.
        let capture = settings.uniqueID
        var endObserver: Int?
        if let clockHold { endObserver = await session.addCaptureEndObserver { if $0 == capture { clockHold.freeze() } } }
        do {
            // Checksums from the writer, read back as each file is written: an uploader told of
            // the capture may delete its files (--upload-delete-after) before this loop gets to
            // them.
            // The clock held at the slot's wake until the capture is queued: then the session's
            // own demand takes it on, frame by frame, as the capture's planning asks.
            for try await e in writer.capture(settings, on: session, number: numbered.number, checksums: true, queued: { clockHold?.lift() }) {
                observe?(e)
                switch e {
                case .photoCaptured(let s, let m): result.frames.append(.init(step: s.index, metadata: m, bias: biases[s.index]))
                case .photoMetered(let s, let mean, let column, let thumb):
                    means[s.index] = mean
                    columns[s.index] = column
                    thumbs[s.index] = thumb
                case .fileWritten(let f):
                    files.append(.init(path: f.path, bytes: Int(f.bytes), crc32: try f.crc32 ?? Self.crc32(of: f.path)))
                    result.files.append(f.path)
                // Every frame is in: the clock stands while its files are made.
                case .exposureEnded: clockHold?.freeze()
                case .captureFinished(let r): result.lock = r.phaseLock
                case .writeFailed(let step, let format, let error): writeFailures.append("\(format)\(step.map { " step \($0)" } ?? ""): \(error)")
                case .notice(let n): log(n)
                default: break
                }
            }
        } catch let e as ShutterbugError where e.code == .late {
            late = e.message
        } catch {
            failure = "\(error)"
            result.cameraTrouble = (error as? ShutterbugError).map { [.cameraLost, .timeout, .system].contains($0.code) } ?? false
        }
        if let endObserver { await session.removeCaptureEndObserver(endObserver) }
        clockHold?.freeze()
        // A few frames with AWB running again: what it measures sets the next slot's white
        // balance, locked now, long before that slot's frames are planned. Only where the frames
        // fit before the next slot's lock needs the camera (some 30 frames of its first step):
        // at night, with long frames, the gains stay as they are instead.
        let period = await session.latestFrame?.frameDuration ?? .milliseconds(50)
        let lead = firstStepExposure * 30 + period * 6
        if fadesWhiteBalance, !plain, nextInstant - now() > lead + .seconds(1), (try? await session.configure { $0.autoWhiteBalance = true }) != nil {
            // In virtual time the clock is let run over those frames and held where they end:
            // nothing else carries it further meanwhile.
            if let clockHold {
                _ = await clockHold.hold(until: now() + period * 5, interrupt: { false })
            } else if let f = try? await session.captureFrame(exposedAfter: now() + period * 4, timeout: .seconds(5)) {
                f.release()
            }
            await prepareWhiteBalance(session)
        }
        if await session.failureReason != nil { result.cameraTrouble = true }
        result.frames.sort { $0.step < $1.step }
        result.start = result.frames.compactMap(\.metadata.exposureStart).min()
        // Meter the frame nearest 0 EV and move the ramp for the next slot.
        let zero = biases.indices.min { abs(biases[$0]) < abs(biases[$1]) }!
        if spec.manual == nil, !plain, let mean = means[zero], let m = result.frames.first(where: { $0.step == zero })?.metadata {
            let exposedWith = ExposureRamp.Settings(exposure: m.exposureTime ?? steps[zero].exposure,
                                                    gain: (m.analogueGain?.value ?? steps[zero].gain) * (m.digitalGain?.value ?? 1))
            // The ramp meters the base frame; a biased or shifted one is brought back to 0 EV.
            let linear = Self.linear(mean) / pow(2, biases[zero] + shift)
            result.decision = ramp.update(metered: linear, lux: m.lux, exposedWith: exposedWith)
        }
        if !writeFailures.isEmpty {
            let written = writeFailures.count == 1 ? writeFailures[0] : "\(writeFailures.count) files could not be written: " + writeFailures.joined(separator: "; ")
            failure = failure.map { "\($0); \(written)" } ?? written
        }
        result.state = late != nil ? .skipped : failure == nil && result.frames.count == biases.count ? .taken : .failed
        if let start = result.start { errors.append(start - instant) }
        let adjusted = abs(shift) > 0.01 ? "bracket shifted \(String(format2: shift)) EV to fit the exposure limits" : nil
        result.reason = late.map { "late: \($0)" } ?? failure ?? adjusted
        result.luma = means[zero]
        let zeroFrame = result.frames.first { $0.step == zero }?.metadata
        // Only the slots the run's contact sheet keeps get a thumbnail made.
        let thumbnail = k % TimelapseJournal.thumbStride(latest: k) != 0 ? nil : thumbs[zero].map {
            let t = $0.make()
            return TimelapseJournal.Thumbnail(rgb: t.rgb, width: t.width, height: t.height, exposure: zeroFrame?.exposureTime, gain: zeroFrame?.totalGain?.value)
        }
        try record(Pending(slot: .init(index: k, wall: wall, state: result.state, reason: result.reason, instant: instant, exposureStart: result.start,
                                       captureID: String(PhotoFacts.uniqueID(captureID: settings.uniqueID, step: 0).dropLast(4)), number: numbered.number),
                           frames: result.frames, files: files, decision: result.decision, rampAfter: ramp.settings, whiteBalanceAfter: wb?.applied,
                           keogram: columns[zero], thumbnail: thumbnail))
        counts[result.state, default: 0] += 1
        result.settings = steps[zero]
        lastSettings = steps[zero]
        lastPhase = result.decision?.phase ?? lastPhase
        return result
    }

    /// Why the next slot cannot be written, if it cannot.
    func spaceProblem(_ writer: PhotoFileWriter) -> String? {
        do {
            try directory.checkSpace(for: writer.diskEstimate(spec.formats, steps: spec.biases.count))
            return nil
        } catch let e as ShutterbugError where e.code == .noSpace {
            return e.message
        } catch {
            return "\(error)"
        }
    }

    func record(_ p: Pending) throws {
        unjournalled.append(p)
        try flushJournal()
    }

    /// Slots the journal could not take yet, now; those it still cannot take wait.
    public func flushJournal() throws {
        while let r = unjournalled.first {
            do {
                try journal.record(r.slot, frames: r.frames, files: r.files, decision: r.decision, rampAfter: r.rampAfter, whiteBalanceAfter: r.whiteBalanceAfter,
                                   keogram: r.keogram, thumbnail: r.thumbnail)
                unjournalled.removeFirst()
            } catch let e as ShutterbugError where e.code == .noSpace {
                if unjournalled.count == 1 { log("the journal cannot be written (\(e.message)); its slots are kept until it can") }
                return
            }
        }
    }

    /// Slots not journalled yet (the disk is full).
    public var unjournalledCount: Int { unjournalled.count }

    /// Retention, between slots: the oldest slots' files go whole, journalled as deleted.
    public func retain(before current: Int, now: WallClockTime) throws {
        guard spec.keepBytes != nil || spec.keepDays != nil else { return }
        let cutoff = spec.keepDays.map { WallClockTime(nanoseconds: now.nanoseconds - Int64($0 * 86_400e9)) }
        for slot in try journal.slotsToDelete(maxBytes: spec.keepBytes, before: cutoff, current: current) {
            // A slot whose files an uploader has not yet confirmed in the bucket is kept, and
            // the newer ones with it (oldest go first): retention never costs a photo its only
            // copy. The card fills beyond --keep meanwhile, and the job pauses if it is full.
            if CaptureObservers.stillWanted(slot.paths) {
                if retentionWaiting != slot.index { log("retention: slot \(slot.index)'s files are not uploaded yet; they and the newer ones are kept until they are") }
                retentionWaiting = slot.index
                break
            }
            retentionWaiting = nil
            for path in slot.paths where unlink(path) != 0 && errno != ENOENT {
                log("retention: cannot delete \(path): \(String(cString: strerror(errno)))")
            }
            try journal.markDeleted(slot: slot.index)
            deletedSlots += 1
        }
    }

    /// The job's keogram (one column per slot) and contact sheet (slots spread over the run)
    /// so far, each replaced whole, never half written.
    @discardableResult
    public func pictures() -> (keogram: String?, sheet: String?) {
        var keogram: String?, sheet: String?
        do {
            let columns = try journal.keogramColumns()
            guard !columns.isEmpty else { throw ShutterbugError(.invalidState, "the job has no slot yet") }
            keogram = try directory.replace("keogram\(spec.pictureSuffix).png", with: try Keogram.png(columns))
        } catch {
            log("the keogram was not written: \(error)")
        }
        do {
            let thumbs = try journal.thumbnails()
            let dayFormat = { (w: WallClockTime) -> String in String(w.description.dropFirst(5).prefix(11)).replacingOccurrences(of: "T", with: " ") }
            let tiles = thumbs.map { t in
                RunSheet.Thumb(rgb: t.rgb, width: t.width, height: t.height,
                               labels: ["SLOT \(t.index)  \(dayFormat(t.wall))",
                                        "\(t.exposure?.exposureDescription ?? "-")  GAIN \(t.gain.map { String(format2: $0) } ?? "-")"])
            }
            let title = "\(spec.name.uppercased())  \(thumbs.count) OF \((try? journal.counts().values.reduce(0, +)) ?? 0) SLOTS  EV \(spec.biases.map { String(format2: $0) }.joined(separator: ","))"
            sheet = try directory.replace("contact-sheet\(spec.pictureSuffix).jpg", with: try RunSheet.jpeg(tiles, title: title))
        } catch {
            log("the contact sheet was not written: \(error)")
        }
        return (keogram, sheet)
    }

    /// CLOCK_REALTIME - CLOCK_MONOTONIC for a frame: its `FrameWallClock` where the camera
    /// reports one (the same instant on both clocks), else sampled from the system now.
    public static func wallOffset(_ m: FrameMetadata?) -> ClockOffset {
        m.flatMap(ClockOffset.init) ?? ClockOffset(nanoseconds: sbshim_realtime_offset_ns())
    }

    /// Full-range luma (0...255) to linear light, as the sRGB curve the ISP applied.
    public static func linear(_ luma: Double) -> Double {
        let v = max(0, min(1, luma / 255))
        return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
    }

    /// The CRC-32 of a file, as the journal keeps it to tell a file changed or cut short.
    public static func crc32(of path: String) throws -> UInt32 { try OutputDirectory.crc32(of: path) }
}
