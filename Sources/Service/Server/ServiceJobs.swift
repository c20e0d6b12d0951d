import Capture
import CaptureScheduler
import ImageOutput
import JobOptions
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

    /// A job from its name and `shutterbug timelapse`'s job options as command-line words, as
    /// the configuration's `jobs:` and `POST /api/jobs` give them (`TimelapseJobOptions`).
    ///
    /// - Throws: `invalidArgument` naming the option and its accepted range.
    public init(name: String, words: [String]) throws {
        let allowed = TimelapseJobOptions.serviceKeys
        for w in words where w.hasPrefix("--") && !allowed.contains(String(w.dropFirst(2))) {
            throw ShutterbugError(.invalidArgument, "\(w.dropFirst(2)): not an option of a job in the service; a job's options are \(allowed.joined(separator: ", "))")
        }
        let options: TimelapseJobOptions
        do {
            options = try TimelapseJobOptions.parse(words)
        } catch {
            throw ShutterbugError(.invalidArgument, TimelapseJobOptions.plainMessage(for: error))
        }
        guard !name.isEmpty, name.count <= 64, name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }), !name.hasPrefix(".") else {
            throw ShutterbugError(.invalidArgument, "a job's name must be 1 to 64 letters, digits, '-', '_' or '.' (it names the job's folder), not '\(name)'")
        }
        self.init(name: name, arguments: words, spec: try options.jobSpec(job: name, template: FileNameTemplate.default.pattern, camera: nil), lens: options.lens)
    }
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
    /// The last slot, in the words of `shutterbug timelapse --json` (its files relative to the
    /// output directory, for `/api/files/`).
    public var lastSlot: SlotReport?
    /// Relative paths of the keogram and contact sheet so far (refreshed at most once a minute).
    public var keogram: String?
    public var contactSheet: String?
    public var scheduleErrorP50Us: Double?
    public var scheduleErrorP99Us: Double?
}

/// One job of the service: its definition, its progress and its controls, shared between the
/// task that runs it and the API. The slots are the library's `TimelapseJob` on the service's
/// session; this turns its events into status, metrics and log lines.
public final class ServiceJob: Sendable {
    public let definition: JobDefinition
    let job: TimelapseJob
    let context: JobContext
    let progress: Mutex<JobStatus>
    let task = Mutex<Task<Void, Never>?>(nil)

    init(_ definition: JobDefinition, context c: JobContext) {
        self.definition = definition
        context = c
        var spec = definition.spec
        // The job has its folder to itself: its keogram and sheet keep the plain names.
        spec.pictureSuffix = ""
        job = TimelapseJob(spec: spec, output: c.output.path + "/" + definition.folder, reserve: c.output.reserve,
                           source: .shared(.init(camera: c.camera, session: c.session, streams: c.streams, description: c.cameraDescription)),
                           clock: c.camera.clock, lens: definition.lens, observe: c.observe)
        progress = Mutex(JobStatus(name: definition.name, state: .starting, options: definition.arguments, folder: definition.folder))
    }

    public var status: JobStatus { progress.withLock { $0 } }

    /// Pauses or resumes (the caller has checked that the job is not over).
    func setPaused(_ on: Bool, now: WallClockTime) {
        job.setPaused(on, now: now)
        progress.withLock { p in if p.state == .running || p.state == .paused { p.state = on ? .paused : .running } }
    }

    /// Asks the job to stop after the slot in progress.
    func stop(_ why: String) {
        job.stop(why)
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
    var events: ServiceEvents
}

extension ServiceJob {
    /// Runs the job on the service's session until its schedule ends or it is stopped. The
    /// camera keeps streaming between slots (the API and the preview use it); a slot's capture is
    /// queued on the session only its lock's lead before the slot's instant, so a capture asked
    /// for over the API meanwhile is not held behind a slot to come.
    func run() async {
        let (d, c) = (definition, context)
        let relative = { (path: String) in relativePath(path, under: c.output.path) }
        func failed(_ error: any Error) {
            let message = (error as? ShutterbugError)?.message ?? "\(error)"
            update { p in
                p.state = .failed
                p.message = message
            }
            c.logger.error("job '\(d.name)' failed: \(message)")
        }
        do {
            try await CameraService.checkSteps(d.spec.biases.count, session: c.session, what: "the job's bracket")
        } catch {
            failed(error)
            return
        }
        async let events: Void = {
            for await event in job.events {
                switch event {
                case .notice(let line):
                    c.logger.notice("job '\(d.name)': \(line)")
                case .started(let s):
                    update { p in
                        p.state = self.job.isPaused ? .paused : .running
                        p.total = s.total
                    }
                    c.logger.notice("job '\(d.name)': \(s.plan.times.map { "at \($0.count) listed times" } ?? "every \(s.plan.interval.millisecondsDescription)"), first slot \(s.firstSlotWall)\(s.resume.lastSlot.map { " (resuming after slot \($0))" } ?? "")")
                case .waiting(let w):
                    update { p in
                        p.nextSlot = w.slot
                        p.nextSlotAt = w.wall.description
                    }
                case .slot(let result, let progress):
                    if let start = result.start, let instant = result.instant { c.metrics.scheduleError.record((start - instant).secondsValue) }
                    c.metrics.slots(job: d.name, state: result.state.rawValue).increment()
                    c.events.send(.slot(job: d.name, SlotReport(result).paths(relativeTo: c.output.path)))
                    update { p in
                        p.taken = progress.counts[.taken] ?? 0
                        p.skipped = progress.counts[.skipped] ?? 0
                        p.missed = progress.counts[.missed] ?? 0
                        p.failed = progress.counts[.failed] ?? 0
                        p.lastSlot = SlotReport(result).paths(relativeTo: c.output.path)
                        p.scheduleErrorP50Us = progress.scheduleError?.p50.microsecondsValue
                        p.scheduleErrorP99Us = progress.scheduleError?.p99.microsecondsValue
                    }
                case .pictures(let k, let s, _):
                    update { p in
                        p.keogram = k.map(relative) ?? p.keogram
                        p.contactSheet = s.map(relative) ?? p.contactSheet
                    }
                case .camera:
                    break
                case .finished(let s):
                    update { p in
                        p.state = s.stopped ? .stopped : .finished
                        p.message = s.stoppedBy
                        p.nextSlot = nil
                        p.nextSlotAt = nil
                    }
                    c.logger.notice("job '\(d.name)' \(s.stopped ? "stopped (\(s.stoppedBy))" : "finished"): \(s.counts[.taken] ?? 0) slots taken this run")
                }
            }
        }()
        do {
            // The job's stream of events ends with its run, whatever it does.
            try await job.run()
            await events
        } catch {
            await events
            failed(error)
        }
    }
}
