import Capture
import CaptureScheduler
import ImageOutput
import Jobs
import Journal
import Logging
import ShutterbugCore
import Synchronization
import Timelapse

#if canImport(Glibc)
import Glibc
#endif

/// A timelapse job as the configuration (`jobs:`) or the API (`POST /api/jobs`) declares it:
/// `shutterbug timelapse`'s options, checked by its parser.
public struct JobDefinition: Sendable {
    public var name: String
    /// The options as command-line words (`--interval 30s --ev -2,0,2`): what makes the job the
    /// same job on a reload, and what the effective configuration shows.
    public var arguments: [String]
    public var spec: TimelapseJobSpec
    /// Focus locked at this lens position (dioptres) when the job starts.
    public var lens: Double?

    public init(name: String, arguments: [String], spec: TimelapseJobSpec, lens: Double? = nil) {
        self.name = name
        self.arguments = arguments
        self.spec = spec
        self.lens = lens
    }

    /// The job's files and journal, under the service's output directory.
    public var folder: String { name }
}

/// A job's progress, as `/api/jobs` reports it.
public struct JobStatus: Sendable, Codable {
    public enum State: String, Sendable, Codable {
        /// Opening its journal, metering the first frame.
        case starting
        /// Waiting for its next slot or taking it.
        case running
        /// Its slots pass and are journalled as skipped (paused) until it is resumed.
        case paused
        /// Asked to stop: the slot in progress completes first.
        case stopping
        /// Stopped by the API, a reload or the service stopping; the same job resumes from its journal.
        case stopped
        /// Its schedule ended.
        case finished
        /// It could not run (`message` says why).
        case failed
    }

    public struct Slot: Sendable, Codable {
        public var index: Int
        public var wall: String
        public var state: String
        public var reason: String?
        /// The first step's exposure start less the slot's instant.
        public var scheduleErrorUs: Double?
        /// How the phase lock went (locked on which frame, or why not).
        public var phaseLock: String?
        public var frames: [UInt32]
        /// Relative to the service's output directory (what `/api/files/` serves).
        public var files: [String]
    }

    public var name: String
    public var state: State
    public var message: String?
    public var options: [String]
    /// The folder under the output directory with the job's files, journal, keogram and sheet.
    public var folder: String
    /// Slots in all (nil: until stopped).
    public var total: Int?
    public var nextSlot: Int?
    public var nextSlotAt: String?
    /// This run's slots, by state.
    public var taken = 0
    public var skipped = 0
    public var missed = 0
    public var failed = 0
    public var lastSlot: Slot?
    /// Relative paths of the keogram and contact sheet so far (refreshed at most once a minute).
    public var keogram: String?
    public var contactSheet: String?
    public var scheduleErrorP50Us: Double?
    public var scheduleErrorP99Us: Double?
}

/// One running job: its definition, its progress and its controls, shared between the task that
/// runs it and the API.
public final class ServiceJob: Sendable {
    public let definition: JobDefinition
    struct Control {
        var paused = false
        var stop: String?
        /// Slots due before this wall time were passed while paused.
        var resumedAt: WallClockTime?
    }
    let control = Mutex(Control())
    let progress: Mutex<JobStatus>
    let task = Mutex<Task<Void, Never>?>(nil)

    init(_ definition: JobDefinition) {
        self.definition = definition
        progress = Mutex(JobStatus(name: definition.name, state: .starting, options: definition.arguments, folder: definition.folder))
    }

    public var status: JobStatus { progress.withLock { $0 } }
    var stopReason: String? { control.withLock { $0.stop } }
    var isPaused: Bool { control.withLock { $0.paused } }

    /// Pauses or resumes (the caller has checked that the job is not over).
    func setPaused(_ on: Bool, now: WallClockTime) {
        control.withLock {
            if $0.paused && !on { $0.resumedAt = now }
            $0.paused = on
        }
        progress.withLock { p in if p.state == .running || p.state == .paused { p.state = on ? .paused : .running } }
    }

    /// Asks the job to stop after the slot in progress.
    func stop(_ why: String) {
        control.withLock { $0.stop = $0.stop ?? why }
        progress.withLock { if !$0.isOver { $0.state = .stopping } }
    }

    /// Waits for the job's task to end.
    func wait() async { await task.withLock { $0 }?.value }

    func update(_ body: (inout JobStatus) -> Void) { progress.withLock { body(&$0) } }
}

extension JobStatus {
    public var isOver: Bool { [.stopped, .finished, .failed].contains(state) }
}

/// What a job needs of the service: the session it shares, and where its files go.
struct JobContext: Sendable {
    var session: CaptureSession
    var camera: any CameraBackend
    var streams: [StreamConfiguration]
    var cameraDescription: CameraDescription
    var output: OutputDirectory
    var metrics: ServiceMetrics
    var logger: Logger
    var observe: @Sendable (OutputEvent) -> Void
}

extension ServiceJob {
    /// Runs the job on the service's session until its schedule ends or it is stopped. The
    /// camera keeps streaming between slots (the API and the preview use it); a slot's capture is
    /// queued on the session only its lock's lead before the slot's instant, so a capture asked
    /// for over the API meanwhile is not held behind a slot to come.
    func run(_ c: JobContext) async {
        let d = definition
        var spec = d.spec
        // The job has its folder to itself: its keogram and sheet keep the plain names.
        spec.pictureSuffix = ""
        do {
            let dir = c.output.path + "/" + d.folder
            if mkdir(dir, 0o755) != 0 && errno != EEXIST {
                throw ShutterbugError.fromErrno(-errno, while: "creating the job's folder \(dir)")
            }
            let directory = try OutputDirectory(path: dir, reserve: c.output.reserve)
            try await CameraService.checkSteps(spec.biases.count, session: c.session, what: "the job's bracket")
            try await TimelapseRun.check(spec, on: c.session)
            let journal = try TimelapseRun.openJournal(in: directory, spec: spec, log: { [logger = c.logger] in logger.notice("job '\(d.name)': \($0)") })
            let resume = try journal.resume()
            let writer = try PhotoFileWriter(directory: directory, streams: c.streams, camera: c.cameraDescription,
                                             template: try FileNameTemplate(validating: spec.template), metersLuma: true)
            try writer.check(spec.formats)
            if let lens = d.lens {
                let r = try await c.session.configure { $0.lockedFocus = Dioptres(lens) }
                if let f = r.focus { c.logger.notice("job '\(d.name)': focus locked at \(String(format2: lens)) dpt from frame \(f.sequence)") }
            }
            let first = try await c.session.captureFrame(exposedAfter: c.camera.now, timeout: .seconds(5))
            let firstMetadata = first.metadata
            first.release()
            var offset = TimelapseRun.wallOffset(firstMetadata)
            let startWall = max(c.camera.now + offset, spec.start ?? .init(nanoseconds: 0))
            let plan = try spec.plan(startWall, try journal.anchor())
            let run = try TimelapseRun(spec: spec, journal: journal, directory: directory, camera: c.camera.info.id, limits: c.camera.controlLimits,
                                       first: firstMetadata, resume: resume, every: plan.interval, log: { [logger = c.logger] in logger.notice("job '\(d.name)': \($0)") })
            run.observe = c.observe
            await run.prepareWhiteBalance(c.session)
            var schedule = TimelapseSchedule(plan, resumeAfter: resume.lastSlot, anchor: try journal.anchor())
            try journal.setAnchor(schedule.anchor)
            try journal.recordCameraStart(wall: c.camera.now + offset, startup: .zero, beforeSlot: schedule.next,
                                          reason: "the service started the job")
            let relative = { (path: String) -> String in path.hasPrefix(c.output.path + "/") ? String(path.dropFirst(c.output.path.count + 1)) : path }
            update { p in
                p.state = self.isPaused ? .paused : .running
                p.total = schedule.total
            }
            c.logger.notice("job '\(d.name)': \(plan.times == nil ? "every \(plan.interval.millisecondsDescription)" : "at \(plan.times!.count) listed times"), first slot \(schedule.wall(of: schedule.next))\(resume.lastSlot.map { " (resuming after slot \($0))" } ?? "")")
            var pictured = ContinuousClock.now - .seconds(3600)
            func refreshPictures(force: Bool) {
                guard force || ContinuousClock.now - pictured >= .seconds(60) else { return }
                pictured = ContinuousClock.now
                let (k, s) = run.pictures()
                update { p in
                    p.keogram = k.map(relative) ?? p.keogram
                    p.contactSheet = s.map(relative) ?? p.contactSheet
                }
            }
            loop: while stopReason == nil {
                offset = TimelapseRun.wallOffset(await c.session.latestFrame)
                guard schedule.total.map({ schedule.next < $0 }) ?? true, plan.end.map({ schedule.wall(of: schedule.next) < $0 }) ?? true else { break }
                let next = schedule.next
                update { p in
                    p.nextSlot = next
                    p.nextSlotAt = schedule.wall(of: next).description
                }
                // Until the lock's lead before the next slot (until the slot itself while
                // paused), in steps of at most half a second so a stop is taken promptly.
                let instant = schedule.wall(of: next) - offset
                while stopReason == nil {
                    let lead = isPaused ? Duration.zero : (run.firstStepExposure + .milliseconds(40)) * 30 + .milliseconds(500)
                    let wait = (instant - lead) - c.camera.now
                    if wait <= .zero { break }
                    try? await Task.sleep(for: min(wait, .milliseconds(500)))
                }
                if stopReason != nil { break }
                var result: TimelapseRun.SlotResult
                switch schedule.step(now: c.camera.now, offset: offset) {
                case .finished:
                    break loop
                case .skip(let k, let wall, let reason):
                    let passedPaused = isPaused || control.withLock { $0.resumedAt.map { wall < $0 } ?? false }
                    let state: TimelapseJournal.SlotState = run.tookOne || resume.lastSlot == nil || passedPaused ? .skipped : .missed
                    result = try run.notTaken(k, wall: wall, state: state, reason: passedPaused ? "the job was paused" : state == .missed ? "the service was not running" : reason)
                case .take(let k, let wall, let instant):
                    if isPaused {
                        result = try run.notTaken(k, wall: wall, state: .skipped, reason: "the job was paused")
                    } else {
                        let nextInstant = schedule.wall(of: k + 1) - offset
                        let camera = c.camera
                        result = try await run.take(k, wall: wall, instant: instant, nextInstant: nextInstant, session: c.session, writer: writer, now: { camera.now })
                        if let start = result.start { c.metrics.scheduleError.record((start - instant).secondsValue) }
                    }
                    schedule.taken(k)
                }
                c.metrics.slots(job: d.name, state: result.state.rawValue).increment()
                let errors = LagDistribution(run.errors.map { $0 < .zero ? .zero - $0 : $0 })
                update { p in
                    p.taken = run.counts[.taken] ?? 0
                    p.skipped = run.counts[.skipped] ?? 0
                    p.missed = run.counts[.missed] ?? 0
                    p.failed = run.counts[.failed] ?? 0
                    p.lastSlot = .init(index: result.index, wall: result.wall.description, state: result.state.rawValue, reason: result.reason,
                                       scheduleErrorUs: zip([result.start], [result.instant]).compactMap { s, i in s.flatMap { s in i.map { (s - $0).microsecondsValue } } }.first,
                                       phaseLock: result.lock, frames: result.frames.map(\.metadata.sequence), files: result.files.map(relative))
                    p.scheduleErrorP50Us = errors?.p50.microsecondsValue
                    p.scheduleErrorP99Us = errors?.p99.microsecondsValue
                }
                if result.state == .taken { refreshPictures(force: run.counts[.taken] == 1) }
                if result.cameraTrouble {
                    throw ShutterbugError(.cameraLost, "slot \(result.index): the camera failed (\(result.reason ?? "the session failed")); the service must be restarted to open it again, and the job resumes then")
                }
            }
            try run.flushJournal()
            try run.retain(before: schedule.next, now: c.camera.now + offset)
            refreshPictures(force: true)
            let why = stopReason
            update { p in
                p.state = why == nil ? .finished : .stopped
                p.message = why ?? "the schedule ended"
                p.nextSlot = nil
                p.nextSlotAt = nil
            }
            c.logger.notice("job '\(d.name)' \(why == nil ? "finished" : "stopped (\(why!))"): \(run.counts[.taken] ?? 0) slots taken this run")
        } catch {
            let message = (error as? ShutterbugError)?.message ?? "\(error)"
            update { p in
                p.state = .failed
                p.message = message
            }
            c.logger.error("job '\(d.name)' failed: \(message)")
        }
    }
}
