import Capture
import CaptureScheduler
import ImageOutput
import Journal
import ServiceLifecycle
import ShutterbugCore
import Synchronization
import Timelapse

/// A timelapse job: the whole slot loop (wait for the slot, take or skip it, the skipped and
/// missed rule, the lock's lead, retention, the keogram and the contact sheet) as one
/// swift-service-lifecycle `Service`. `shutterbug timelapse` and the service's jobs both run
/// it; what differs between them is the `CameraSource` they give it, and what they make of its
/// `events` (the command prints them, the service turns them into status and metrics).
///
/// `run()` ends when the schedule ends, when `stop(_:)` is called (the slot in progress
/// completes and is journalled first), or on a graceful shutdown of the service group it runs
/// in; it throws when the job cannot run (its journal, its folder, a bracket the camera cannot
/// take) or the camera is lost and the source says not to reopen it (`CameraGone`).
public final class TimelapseJob: Service, Sendable {
    /// The camera a job takes its slots on, and what happens when it fails.
    public enum CameraSource: Sendable {
        /// A session someone else runs (the service's): it keeps streaming between slots for
        /// the API and the preview, and a failed camera ends the job (`CameraGone`): the
        /// process must start again to open it, and the job resumes from its journal then.
        case shared(CameraLease)
        /// The job opens the camera itself (`shutterbug timelapse`): it stops it between slots
        /// when it would stand idle longer than `stopWhenIdle`, and opens it again after a
        /// failure where the backend can (`CameraCapabilities.reopensInProcess`); where it
        /// cannot, the job ends with `CameraGone` so a new process resumes it.
        case owned(open: @Sendable () async throws -> CameraLease, stopWhenIdle: Duration?)
    }

    /// A running camera and what its photos' files say of it.
    public struct CameraLease: Sendable {
        public var camera: any CameraBackend
        public var session: CaptureSession
        public var streams: [StreamConfiguration]
        public var description: CameraDescription

        public init(camera: any CameraBackend, session: CaptureSession, streams: [StreamConfiguration], description: CameraDescription) {
            self.camera = camera
            self.session = session
            self.streams = streams
            self.description = description
        }
    }

    /// The camera failed and the job's `CameraSource` says not to open it again in this process.
    public struct CameraGone: Error, Sendable, CustomStringConvertible {
        public var message: String
        /// The camera that failed.
        public var camera: String
        public var description: String { message }
    }

    /// What a job reports as it goes, in order.
    public enum Event: Sendable {
        /// A line for the log: adjustments, pauses for space, retention, journal repairs.
        case notice(String)
        /// The job began: its first slot is to come.
        case started(Started)
        /// Waiting for the next slot.
        case waiting(Waiting)
        /// A slot taken, failed, skipped or missed, and the run's counts after it.
        case slot(TimelapseRun.SlotResult, Progress)
        /// The camera streams (again), or was stopped between slots to save power.
        case camera(CameraState)
        /// The keogram and the contact sheet were written (after the first slot taken, then
        /// after a slot at most once a minute, on `requestPictures()`: `asked`, and at the end).
        case pictures(keogram: String?, contactSheet: String?, asked: Bool)
        /// The job ended (it may still throw after this when it could not end cleanly).
        case finished(Summary)
    }

    public struct Started: Sendable {
        public var camera: String
        public var plan: TimelapseSchedule.Plan
        public var total: Int?
        public var firstSlot: Int
        public var firstSlotWall: WallClockTime
        public var resume: TimelapseJournal.Resume
        /// No exposure control: a photo per slot at the camera's own exposure.
        public var plain: Bool
        public var lockable: Bool
    }

    public struct Waiting: Sendable {
        public var slot: Int
        public var total: Int?
        public var wall: WallClockTime
        /// Until the slot's instant, on the camera's clock.
        public var wait: Duration
        /// From this slot to the end of the schedule (nil: until stopped).
        public var remaining: Duration?
        /// The 0 EV step's settings at the last slot and the ramp's phase then.
        public var settings: ExposureRamp.Settings
        public var phase: String
    }

    public struct Progress: Sendable {
        /// This run's slots by state.
        public var counts: [TimelapseJournal.SlotState: Int]
        /// Each taken slot's exposure start against its instant, so far.
        public var scheduleError: LagDistribution?
    }

    public enum CameraState: Sendable {
        case streaming(CaptureSession, reason: String, startup: Duration)
        /// Being opened again (after a failure, or to end an idle stop): no frames yet, and
        /// none is a sign of trouble if it lasts.
        case starting
        /// Stopped on purpose until this instant (no frames are no sign of trouble).
        case idle(until: SensorTime)
    }

    public struct Summary: Sendable {
        public var job: String
        /// Why it stopped (`stop(_:)`'s reason), or "the schedule ended".
        public var stoppedBy: String
        public var stopped: Bool
        /// This run's slots by state, and the journal's in all.
        public var counts: [TimelapseJournal.SlotState: Int]
        public var journalCounts: [TimelapseJournal.SlotState: Int]
        public var scheduleError: LagDistribution?
        public var journalPath: String
        public var journalIntegrity: String
        public var cameraReopened: Int
        public var cameraStoppedWhileIdle: Int
        public var slowestStartup: Duration
        public var slotsDeletedByRetention: Int
        public var bytesKept: Int64
        public var unjournalled: Int
        public var keogram: String?
        public var contactSheet: String?
        public var phaseLocked: Bool
    }

    public let spec: TimelapseJobSpec
    /// Where the job's photos, sidecars, journal and pictures go.
    public let output: String
    public let reserve: Int64
    public let source: CameraSource
    /// The job's clock, which outlives each camera it opens (a virtual one jumps over the
    /// waits with the camera stopped).
    public let clock: any CameraClock
    /// Focus locked at this lens position (dioptres) whenever the camera starts.
    public let lens: Double?
    /// Sees every event of every slot's capture (the service counts them in its metrics).
    public let observe: (@Sendable (OutputEvent) -> Void)?
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation

    struct Control {
        var stop: String?
        var paused = false
        /// Slots due before this wall time passed while paused.
        var resumedAt: WallClockTime?
        var picturesWanted = false
    }
    private let control = Mutex(Control())

    public init(spec: TimelapseJobSpec, output: String, reserve: Int64, source: CameraSource, clock: any CameraClock, lens: Double? = nil,
                observe: (@Sendable (OutputEvent) -> Void)? = nil) {
        self.spec = spec
        self.output = output
        self.reserve = reserve
        self.source = source
        self.clock = clock
        self.lens = lens
        self.observe = observe
        (events, continuation) = AsyncStream.makeStream(of: Event.self)
    }

    /// Asks the job to stop after the slot in progress (the first reason given is kept).
    public func stop(_ why: String) { control.withLock { $0.stop = $0.stop ?? why } }

    public var stopReason: String? { control.withLock { $0.stop } }

    /// Pauses (its slots pass and are journalled as skipped) or resumes the job; `now` is the
    /// wall time, which tells the slots passed while paused from the ones missed.
    public func setPaused(_ on: Bool, now: WallClockTime) {
        control.withLock {
            if $0.paused && !on { $0.resumedAt = now }
            $0.paused = on
        }
    }

    public var isPaused: Bool { control.withLock { $0.paused } }

    /// The keogram and the contact sheet so far, written between slots (SIGUSR1).
    public func requestPictures() { control.withLock { $0.picturesWanted = true } }

    private func emit(_ e: Event) { continuation.yield(e) }
    private func notice(_ s: String) { emit(.notice(s)) }

    /// The lock's lead: how long before a slot's instant its capture is queued on the session
    /// (some 30 frames of the first step, and half a second), so the phase lock can plan the
    /// frames before it, and a capture asked for meanwhile over the API is not held behind it.
    public static func lead(firstStep: Duration) -> Duration { (firstStep + .milliseconds(40)) * 30 + .milliseconds(500) }

    public func run() async throws {
        defer { continuation.finish() }
        try await withGracefulShutdownHandler {
            try await self.slots()
        } onGracefulShutdown: {
            self.stop("the service is stopping")
        }
    }

    /// A camera opened by the job, started, focus locked, with its writer.
    private struct Opened {
        var lease: CameraLease
        var writer: PhotoFileWriter
        var startup: Duration
        /// The job's hold on the camera's clock in virtual time.
        var clockHold: SlotClockHold
        var camera: any CameraBackend { lease.camera }
        var session: CaptureSession { lease.session }
    }

    private func open(_ directory: OutputDirectory) async throws -> Opened {
        let began = clock.now
        let lease: CameraLease
        switch source {
        case .shared(let l): lease = l
        case .owned(let open, _): lease = try await open()
        }
        do {
            let writer = try PhotoFileWriter(directory: directory, streams: lease.streams, camera: lease.description,
                                             template: try FileNameTemplate(validating: spec.template), metersLuma: true)
            try writer.check(spec.formats)
            if let lens {
                // Focus locked before any slot: the first frame carrying it is reported.
                let r = try await lease.session.configure { $0.lockedFocus = Dioptres(lens) }
                for a in r.adjustments { notice("adjusted: \(a)") }
                if let f = r.focus {
                    notice("focus locked at \(String(format2: lens)) dpt: first frame carrying it \(f.sequence) (\(f.framesAfterRequest) frames after its request)")
                }
            }
            // From open to streaming settled frames (a session's start returns after the warm-up).
            let startup: Duration
            if case .owned = source { startup = clock.now - began } else { startup = .zero }
            // In virtual time the clock is the job's from here: held where it is until the job
            // lets it run to its first slot's wake (others' captures would otherwise carry it
            // past the slot before this task gets to hold it).
            let hold = SlotClockHold(camera: lease.camera)
            hold.freeze()
            return Opened(lease: lease, writer: writer, startup: startup, clockHold: hold)
        } catch {
            await release(lease)
            throw error
        }
    }

    private func release(_ lease: CameraLease) async {
        guard case .owned = source else { return }
        await lease.session.stop()
        lease.camera.release()
    }

    /// Lets the camera stream until `target` on its clock, in steps of at most half a second
    /// so a stop (or `interrupt`) is taken promptly. It waits on the session for the first
    /// frame exposed after each step, which also lets a camera in virtual time (which takes a
    /// frame only while something waits for one) get there, and no further. A camera that
    /// fails to deliver ends the wait: the slot's capture then says what is wrong.
    ///
    /// - Returns: false when the camera did not deliver.
    private func stream(_ session: CaptureSession, camera: any CameraBackend, until target: SensorTime, interrupt: () -> Bool) async -> Bool {
        while stopReason == nil, !interrupt(), camera.now < target {
            let step = min(target, camera.now + .milliseconds(500))
            do {
                try await session.captureFrame(exposedAfter: step, timeout: .seconds(5)).release()
            } catch {
                return false
            }
        }
        return true
    }

    private func slots() async throws {
        let spec = self.spec
        let directory = try OutputDirectory(path: output, reserve: reserve)
        let owned: Bool
        let idleStop: Duration?
        switch source {
        case .shared: (owned, idleStop) = (false, nil)
        case .owned(_, let s): (owned, idleStop) = (true, s)
        }
        // The journal first: it says whether this job is already running elsewhere, and its
        // disk and journal are made to agree before the camera opens.
        let journal = try TimelapseRun.openJournal(in: directory, spec: spec, log: { [continuation] in continuation.yield(.notice($0)) })
        var cam = try await open(directory)
        var released = false
        defer {
            // The clock given back (a shared camera streams on for the others), and a camera
            // the job opened is the job's to close, however it ends.
            cam.clockHold.lift()
            if owned && !released { cam.camera.release() }
        }
        // Whatever ends the job early, its session stops before the defer gives the camera
        // back: a copy still reading the camera's buffers finishes before they are unmapped,
        // and nothing is queued on the camera as it goes.
        do {
            do {
                try await TimelapseRun.check(spec, on: cam.session)
            } catch let e as ShutterbugError where e.code == .invalidArgument {
                // Every slot would fail the same way: a job this run created is not left behind.
                try? journal.discardNewJob()
                throw e
            }
            var reopened = 0
            var starts: [Duration] = [cam.startup]
            var stoppedFor = 0
            let resume = try journal.resume()

            // The first settled frame: where the ramp starts (unless the journal has one), and the
            // camera's clock.
            // In virtual time the clock is the job's hold's (see `open`): let on by a few frames.
            let firstMetadata: FrameMetadata
            if cam.clockHold.active {
                _ = await cam.clockHold.hold(until: cam.camera.now + .milliseconds(200), interrupt: { false })
                guard let m = await cam.session.latestFrame else {
                    throw await cam.session.failureReason ?? ShutterbugError(.timeout, "\(cam.camera.info.id) delivered no frame")
                }
                firstMetadata = m
            } else {
                let first = try await cam.session.captureFrame(exposedAfter: cam.camera.now, timeout: .seconds(5))
                firstMetadata = first.metadata
                first.release()
            }
            // CLOCK_REALTIME - CLOCK_MONOTONIC, as the newest frame reports it, re-read before each
            // slot so a wall-clock step reaches the schedule.
            var offset = TimelapseRun.wallOffset(firstMetadata)
            let plan = try spec.plan(max(cam.camera.now + offset, spec.start ?? .init(nanoseconds: 0)), try journal.anchor())
            let run = try TimelapseRun(spec: spec, journal: journal, directory: directory, camera: cam.camera.info.id, limits: cam.camera.controlLimits,
                                       first: firstMetadata, resume: resume, every: plan.interval, log: { [continuation] in continuation.yield(.notice($0)) })
            run.observe = observe
            if run.plain {
                notice("\(cam.camera.info.id) has no exposure control: each slot is a photo at the camera's own exposure (no ramp)\(run.lockable ? "" : ", not phase-locked")")
            }
            await run.prepareWhiteBalance(cam.session)
            var schedule = TimelapseSchedule(plan, resumeAfter: resume.lastSlot, anchor: try journal.anchor())
            try journal.setAnchor(schedule.anchor)
            try journal.recordCameraStart(wall: cam.camera.now + offset, startup: cam.startup, beforeSlot: schedule.next,
                                          reason: owned ? "the job started" : "the service started the job")
            emit(.camera(.streaming(cam.session, reason: "the job started", startup: cam.startup)))
            emit(.started(Started(camera: cam.camera.info.id, plan: plan, total: schedule.total, firstSlot: schedule.next, firstSlotWall: schedule.wall(of: schedule.next),
                                  resume: resume, plain: run.plain, lockable: run.lockable)))

            /// Opens the camera again until it opens or the job is stopped (false).
            func reopen(reason: String) async throws -> Bool {
                emit(.camera(.starting))
                while true {
                    do {
                        cam = try await open(directory)
                        released = false
                        starts.append(cam.startup)
                        try journal.recordCameraStart(wall: cam.camera.now + offset, startup: cam.startup, beforeSlot: schedule.next, reason: reason)
                        await run.prepareWhiteBalance(cam.session)
                        emit(.camera(.streaming(cam.session, reason: reason, startup: cam.startup)))
                        return true
                    } catch {
                        if stopReason != nil { return false }
                        notice("the camera cannot be opened yet (\(error)); trying again in 5 s")
                        await MonotonicCameraClock.shared.sleep(until: MonotonicClock.now() + .seconds(5)) { [self] in stopReason != nil }
                    }
                }
            }
            // The keogram and the sheet after the first slot taken, then at most once a minute.
            var pictured: ContinuousClock.Instant?
            loop: while stopReason == nil {
                guard schedule.total.map({ schedule.next < $0 }) ?? true, plan.end.map({ schedule.wall(of: schedule.next) < $0 }) ?? true else { break }
                let lead = Self.lead(firstStep: run.firstStepExposure)
                // Long until the next slot (the first one too, with a start to come): stop the
                // camera, and start it again before the slot by twice its slowest start-up so far
                // and the lock's lead.
                if let idleStop {
                    let instant = schedule.wall(of: schedule.next) - offset
                    let wake = instant - (lead + (starts.max() ?? .seconds(1)) * 2 + .milliseconds(500))
                    if wake - cam.camera.now > idleStop {
                        emit(.camera(.idle(until: wake)))
                        await release(cam.lease)
                        released = true
                        stoppedFor += 1
                        await clock.sleep(until: wake) { [self] in stopReason != nil }
                        if stopReason != nil { break loop }
                        guard try await reopen(reason: "stopped while idle") else { break loop }
                    }
                }
                offset = TimelapseRun.wallOffset(await cam.session.latestFrame)
                let next = schedule.next
                let instant = schedule.wall(of: next) - offset
                let remaining = schedule.total.map { t in
                    Duration.nanoseconds(max(0, schedule.wall(of: t - 1).nanoseconds - schedule.wall(of: next).nanoseconds)) + (plan.times == nil ? plan.interval : .zero)
                }
                emit(.waiting(Waiting(slot: next, total: schedule.total, wall: schedule.wall(of: next), wait: max(.zero, instant - cam.camera.now), remaining: remaining,
                                      settings: run.lastSettings, phase: run.lastPhase)))
                // Until the lock's lead before the slot (until the slot itself while paused): the
                // slot's capture is queued on the session only then. In virtual time the camera's
                // clock is held there until the capture is queued, and again once its frames are
                // in, while its files are written: others' captures (a trigger's, the API's) would
                // otherwise run it on past the slot while this task waits its turn, which real
                // time never does (the job wakes on time). See `SlotClockHold`.
                let clockHold = cam.clockHold
                while stopReason == nil {
                    // The keogram and the sheet when asked for (SIGUSR1), while waiting.
                    if control.withLock({ w in defer { w.picturesWanted = false }; return w.picturesWanted }) {
                        let (k, c) = run.pictures()
                        emit(.pictures(keogram: k, contactSheet: c, asked: true))
                    }
                    let paused = isPaused
                    let until = instant - (paused ? .zero : lead)
                    if cam.camera.now >= until { break }
                    let interrupt = { [self] in isPaused != paused || control.withLock { $0.picturesWanted } }
                    if clockHold.active {
                        guard await clockHold.hold(until: until, interrupt: { [self] in interrupt() || stopReason != nil }) else { continue }
                        break
                    }
                    guard await stream(cam.session, camera: cam.camera, until: until, interrupt: interrupt) else { break }
                }
                if stopReason != nil { break }
                let result: TimelapseRun.SlotResult
                switch schedule.step(now: cam.camera.now, offset: offset) {
                case .finished:
                    break loop
                case .skip(let k, let wall, let reason):
                    // Slots passed before this run's first are missed (the job was not running),
                    // unless they passed while it was paused.
                    let passedPaused = isPaused || control.withLock { $0.resumedAt.map { wall < $0 } ?? false }
                    let state: TimelapseJournal.SlotState = run.tookOne || resume.lastSlot == nil || passedPaused ? .skipped : .missed
                    result = try run.notTaken(k, wall: wall, state: state,
                                              reason: passedPaused ? "the job was paused" : state == .missed ? "the job was not running" : reason)
                case .take(let k, let wall, let instant):
                    if isPaused {
                        result = try run.notTaken(k, wall: wall, state: .skipped, reason: "the job was paused")
                    } else {
                        let nextInstant = schedule.wall(of: k + 1) - offset
                        let camera = cam.camera
                        result = try await run.take(k, wall: wall, instant: instant, nextInstant: nextInstant, session: cam.session, writer: cam.writer, now: { camera.now },
                                                    clockHold: clockHold.active ? clockHold : nil)
                    }
                    schedule.taken(k)
                }
                emit(.slot(result, Progress(counts: run.counts, scheduleError: LagDistribution(run.errors.map { $0 < .zero ? .zero - $0 : $0 }))))
                if result.state == .taken, pictured.map({ ContinuousClock.now - $0 >= .seconds(60) }) ?? true {
                    pictured = ContinuousClock.now
                    let (k, c) = run.pictures()
                    emit(.pictures(keogram: k, contactSheet: c, asked: false))
                }
                if result.cameraTrouble {
                    let why = "slot \(result.index): the camera failed (\(result.reason ?? "the session failed"))"
                    guard owned, cam.camera.capabilities.reopensInProcess else {
                        // libcamera cannot give this process the camera back (a camera whose
                        // pipeline does not hotplug stays registered after its device went, and
                        // registering it again is fatal in the camera manager), and a shared
                        // session is not the job's to reopen: the slots so far are kept, and a
                        // new process resumes the job from its journal.
                        try run.flushJournal()
                        // Given back as at the end, the session stopped first: copies still
                        // reading the camera's buffers finish, and nothing queues on the camera as
                        // it goes (the defer alone released it under a running session).
                        if owned {
                            await release(cam.lease)
                            released = true
                        }
                        throw CameraGone(message: owned ? "\(why); libcamera cannot open \(cam.camera.info.id) again in this process"
                                                        : "\(why); the service must be restarted to open it again, and the job resumes then",
                                         camera: cam.camera.info.id)
                    }
                    // Open it again; the slots that pass meanwhile are recorded as skipped (late).
                    notice("\(why); opening it again")
                    await release(cam.lease)
                    released = true
                    guard try await reopen(reason: "after a failure") else { break loop }
                    reopened += 1
                    notice("the camera is back (\(cam.camera.info.id)); the job goes on")
                }
            }
            if owned && !released {
                await cam.session.stop()
            }
            try run.flushJournal()
            try run.retain(before: schedule.next, now: cam.camera.now + offset)
            if run.unjournalledCount > 0 { notice("\(run.unjournalledCount) slots could not be journalled (the disk is full); their files are on disk") }
            let (keogram, sheet) = run.pictures()
            emit(.pictures(keogram: keogram, contactSheet: sheet, asked: false))
            let why = stopReason
            emit(.finished(Summary(job: spec.name, stoppedBy: why ?? "the schedule ended", stopped: why != nil, counts: run.counts, journalCounts: try journal.counts(),
                                   scheduleError: LagDistribution(run.errors.map { $0 < .zero ? .zero - $0 : $0 }), journalPath: journal.database.path,
                                   journalIntegrity: try journal.database.integrityCheck(), cameraReopened: reopened, cameraStoppedWhileIdle: stoppedFor,
                                   slowestStartup: starts.max() ?? .zero, slotsDeletedByRetention: run.deletedSlots, bytesKept: try journal.bytesKept(),
                                   unjournalled: run.unjournalledCount, keogram: keogram, contactSheet: sheet, phaseLocked: spec.phaseLock)))
        } catch {
            if owned && !released { await cam.session.stop() }
            throw error
        }
    }
}
