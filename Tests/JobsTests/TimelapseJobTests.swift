import Capture
import Foundation
import ImageOutput
import Jobs
import Journal
import ShutterbugCore
import SimulatedCamera
import Synchronization
import Testing
import Timelapse

/// `TimelapseJob` in process, on the simulated camera in virtual time: the slot loop the
/// command line and the service both run, with the camera it owns (stopped while idle,
/// reopened after a failure) or one it shares (paused, failed when the camera goes).
@Suite("A timelapse job as a library service, in virtual time", .timeLimit(.minutes(3)))
struct TimelapseJobTests {
    /// Slots from two seconds on at least: a slot sooner than the lock's lead cannot be
    /// phase-locked (the frames before it are already gone), wherever the grid happens to fall.
    func spec(interval: Duration = .seconds(10), count: Int, biases: [Double] = [-1, 0, 1], startIn seconds: Int64 = 2) -> TimelapseJobSpec {
        let soon = WallClockTime(nanoseconds: Int64(Date().timeIntervalSince1970 * 1e9) + seconds * 1_000_000_000)
        return TimelapseJobSpec(name: "job", biases: biases, manual: nil, formats: [.jpeg], template: FileNameTemplate.default.pattern,
                                journalSpec: "interval=\(interval) ev=\(biases)", start: soon) { start, _ in
            TimelapseSchedule.Plan(interval: interval, start: start, end: nil, count: count)
        }
    }

    func folder() -> String { NSTemporaryDirectory() + "sb-job-\(UUID().uuidString)" }

    func options(_ body: (inout SimulationOptions) -> Void = { _ in }) -> SimulationOptions {
        var o = SimulationOptions()
        o.clock = .virtual
        o.seed = 5
        body(&o)
        return o
    }

    /// Opens and starts a simulated camera for the job at 640x480, on `clock`.
    static func opener(_ options: SimulationOptions, clock: VirtualCameraClock, opened: Count? = nil) -> @Sendable () async throws -> TimelapseJob.CameraLease {
        { @Sendable in
            opened?.add()
            let cam = SimulatedCamera(profile: .imx477, options: options, virtualClock: clock)
            let session = CaptureSession(backend: cam)
            let config = try await session.start(stream: StreamRequest(role: .still, width: 640, height: 480), preparedBracketCount: 3)
            return .init(camera: cam, session: session, streams: config.streams, description: CameraDescription(profile: .imx477))
        }
    }

    /// Runs `job` to its end, with a deadline: past it the job is stopped (so its stream ends)
    /// and the test fails saying so.
    static func run(_ job: TimelapseJob, deadline: Duration = .seconds(120),
                    onEvent: @escaping @Sendable (TimelapseJob.Event) -> Void = { _ in }) async -> ([TimelapseJob.Event], (any Error)?) {
        let running = Task { try await job.run() }
        let watchdog = Task {
            guard (try? await Task.sleep(for: deadline)) != nil else { return }
            Issue.record("the job did not end within \(deadline) of wall time; stopped and cancelled")
            job.stop("the test's deadline passed")
            running.cancel()
        }
        defer { watchdog.cancel() }
        return await collect(job.events, onEvent: onEvent) { try await running.value }
    }

    static func slots(_ events: [TimelapseJob.Event]) -> [TimelapseRun.SlotResult] {
        events.compactMap { if case .slot(let r, _) = $0 { return r } else { return nil } }
    }

    static func summary(_ events: [TimelapseJob.Event]) -> TimelapseJob.Summary? {
        events.lazy.compactMap { if case .finished(let s) = $0 { return s } else { return nil } }.first
    }

    @Test("a camera of its own: every slot taken on consecutive frames, phase-locked within a line, journalled; the events come in order and end with the summary")
    func ownedCamera() async throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = VirtualCameraClock()
        let job = TimelapseJob(spec: spec(count: 4), output: dir, reserve: 0, source: .owned(open: Self.opener(options(), clock: clock), stopWhenIdle: nil), clock: clock)
        let (events, thrown) = await Self.run(job)
        #expect(thrown == nil, "\(String(describing: thrown))")
        // started before any slot, a wait before each slot, the summary last.
        let kinds = events.map { e -> String in
            switch e {
            case .started: "started"
            case .waiting: "waiting"
            case .slot: "slot"
            case .finished: "finished"
            default: ""
            }
        }.filter { !$0.isEmpty }
        var expected = ["started"]
        for _ in 0..<4 { expected += ["waiting", "slot"] }
        expected.append("finished")
        #expect(kinds == expected, "\(kinds)")
        let slots = Self.slots(events)
        #expect(slots.map(\.index) == [0, 1, 2, 3])
        for s in slots {
            #expect(s.state == .taken, "slot \(s.index): \(s.reason ?? "")")
            let seq = s.frames.map(\.metadata.sequence)
            #expect(seq.count == 3 && seq[2] == seq[0] + 2, "slot \(s.index) frames \(seq)")
            let error = try #require(s.start.flatMap { st in s.instant.map { st - $0 } })
            #expect(error >= .zero && error < .microseconds(20), "slot \(s.index): exposure began \(error) after its instant")
            #expect(s.files.count >= 3, "\(s.files)")
        }
        let summary = try #require(Self.summary(events))
        #expect(summary.stopped == false && summary.stoppedBy == "the schedule ended")
        #expect(summary.counts[.taken] == 4 && summary.journalCounts[.taken] == 4)
        #expect(summary.journalIntegrity == "ok")
        #expect(summary.keogram.map { FileManager.default.fileExists(atPath: $0) } == true)
    }

    @Test("retention keeps the slots an observer still wants (an upload not yet confirmed), oldest first, and deletes them once it no longer does")
    func retentionWaitsForUploads() async throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = VirtualCameraClock()
        // An uploader whose store is away: every file is still wanted until `sent`.
        let sent = Mutex(false)
        let token = CaptureObservers.observe(under: dir, { _ in }, wants: { _ in !sent.withLock { $0 } })
        defer { token.cancel() }
        var s = spec(count: 5, biases: [0])
        s.keepBytes = 1
        let job = TimelapseJob(spec: s, output: dir, reserve: 0, source: .owned(open: Self.opener(options(), clock: clock), stopWhenIdle: nil), clock: clock)
        let (events, thrown) = await Self.run(job)
        #expect(thrown == nil, "\(String(describing: thrown))")
        #expect(Self.slots(events).filter { $0.state == .taken }.count == 5)
        /// What retention would delete before slot 5 now (the journal opened and let go: it
        /// holds the job's lock while open).
        func deletable() throws -> Int {
            try TimelapseJournal(path: dir + "/timelapse.sqlite", job: s.name, spec: s.journalSpec).slotsToDelete(maxBytes: 1, before: nil, current: 5).count
        }
        #expect(try deletable() == 5, "every slot kept though over --keep")
        // Sent: the next run's retention deletes them (oldest first, all but the newest).
        sent.withLock { $0 = true }
        var more = spec(count: 6, biases: [0])
        more.keepBytes = 1
        let again = TimelapseJob(spec: more, output: dir, reserve: 0, source: .owned(open: Self.opener(options(), clock: clock), stopWhenIdle: nil), clock: clock)
        let (_, failed) = await Self.run(again)
        #expect(failed == nil, "\(String(describing: failed))")
        #expect(try deletable() == 0, "the five older slots deleted once sent")
    }

    @Test("stop(): the slot in progress completes and is journalled, then the job ends, saying who stopped it; run again, it resumes after that slot")
    func stopAndResume() async throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = VirtualCameraClock()
        let job = TimelapseJob(spec: spec(count: 10), output: dir, reserve: 0, source: .owned(open: Self.opener(options(), clock: clock), stopWhenIdle: nil), clock: clock)
        let (events, thrown) = await Self.run(job) { e in
            if case .slot(let r, _) = e, r.index == 0 { job.requestPictures() }
            if case .slot(let r, _) = e, r.index == 1 { job.stop("the test") }
        }
        // Asked for between slots (SIGUSR1 on the command line): written, and said so.
        let asked = events.compactMap { if case .pictures(let k, _, true) = $0 { return k } else { return nil } }
        #expect(asked.count == 1 && asked.first.map { FileManager.default.fileExists(atPath: $0) } == true, "\(asked)")
        #expect(thrown == nil)
        #expect(Self.slots(events).map(\.index) == [0, 1])
        let summary = try #require(Self.summary(events))
        #expect(summary.stopped && summary.stoppedBy == "the test")
        #expect(summary.journalCounts[.taken] == 2)

        // 35 s pass with no job running (three or four slots).
        await clock.sleep(until: clock.now + .seconds(35)) { false }
        let again = TimelapseJob(spec: spec(count: 10), output: dir, reserve: 0, source: .owned(open: Self.opener(options(), clock: clock), stopWhenIdle: nil), clock: clock)
        let (more, _) = await Self.run(again) { e in
            if case .slot(let r, _) = e, r.state == .taken { again.stop("enough") }
        }
        let started = try #require(more.lazy.compactMap { if case .started(let s) = $0 { return s } else { return nil } }.first)
        #expect(started.resume.lastSlot == 1)
        // Slots whose time passed while no job ran are missed, never taken late (one due while
        // the camera was starting may be skipped as late instead).
        let resumed = Self.slots(more)
        #expect(resumed.first.map { $0.index == 2 } == true, "\(resumed.map(\.index))")
        #expect(resumed.first?.state == .missed, "\(resumed.map { "\($0.index) \($0.state)" })")
        #expect(resumed.dropLast().allSatisfy { $0.state == .missed || $0.state == .skipped }, "\(resumed.map { "\($0.index) \($0.state)" })")
        #expect(resumed.last?.state == .taken)
    }

    @Test("a long wait with a camera of its own: the camera stops between slots and starts again before each, on time, and the slots are still phase-locked")
    func idleStop() async throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = VirtualCameraClock()
        let opened = Count()
        let job = TimelapseJob(spec: spec(interval: .seconds(120), count: 3, biases: [0]), output: dir, reserve: 0,
                               source: .owned(open: Self.opener(options(), clock: clock, opened: opened), stopWhenIdle: .seconds(10)), clock: clock)
        let (events, thrown) = await Self.run(job)
        #expect(thrown == nil, "\(String(describing: thrown))")
        let summary = try #require(Self.summary(events))
        #expect(summary.cameraStoppedWhileIdle >= 2, "stopped \(summary.cameraStoppedWhileIdle) times")
        #expect(opened.value == summary.cameraStoppedWhileIdle + 1)
        for s in Self.slots(events) {
            #expect(s.state == .taken, "slot \(s.index): \(s.reason ?? "")")
            #expect(s.lock?.contains("locked") == true, "slot \(s.index): \(s.lock ?? "-")")
        }
    }

    @Test("a shared session: paused, its slots pass as skipped ('the job was paused'), the camera streams on; resumed, it takes the next")
    func pauseOnSharedSession() async throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = VirtualCameraClock()
        let lease = try await Self.opener(options(), clock: clock)()
        defer { lease.camera.release() }
        let job = TimelapseJob(spec: spec(count: 5, biases: [0]), output: dir, reserve: 0, source: .shared(lease), clock: clock)
        job.setPaused(true, now: WallClockTime(nanoseconds: 0))
        let (events, thrown) = await Self.run(job) { e in
            if case .slot(let r, _) = e, r.index == 2 { job.setPaused(false, now: WallClockTime(nanoseconds: Int64.max)) }
        }
        #expect(thrown == nil, "\(String(describing: thrown))")
        let slots = Self.slots(events)
        #expect(slots.prefix(3).allSatisfy { $0.state == .skipped && $0.reason == "the job was paused" }, "\(slots.map { "\($0.index) \($0.state) \($0.reason ?? "")" })")
        #expect(slots.dropFirst(3).allSatisfy { $0.state == .taken }, "\(slots.map { "\($0.index) \($0.state) \($0.reason ?? "")" })")
        // The service's session is not the job's: it still streams.
        let frame = try await lease.session.captureFrame(exposedAfter: lease.camera.now)
        frame.release()
        await lease.session.stop()
    }

    @Test("in virtual time, another task that runs the camera's clock far ahead (frames 40 s on, again and again) does not carry it past the job's slots: the job holds the clock at each slot's lead, so every slot is taken, none skipped as late")
    func holdsTheClockAtItsSlots() async throws {
        let dir = folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = VirtualCameraClock()
        let lease = try await Self.opener(options(), clock: clock)()
        defer { lease.camera.release() }
        // The first slot 6 s on: each with the lock's lead (some 2.6 s) ahead of it.
        let job = TimelapseJob(spec: spec(count: 5, biases: [0], startIn: 6), output: dir, reserve: 0, source: .shared(lease), clock: clock)
        // What a zsl trigger or an API capture far ahead does to a camera paced by demand: it
        // asks for frames until its instant, and the camera makes them as fast as it can. From
        // the job's first wait on (before it, the job holds nothing yet: a slot the clock passed
        // while the job was still opening would be late in real time too).
        let (waiting, said) = AsyncStream.makeStream(of: Void.self)
        let runner = Task {
            for await _ in waiting { break }
            while !Task.isCancelled {
                if let f = try? await lease.session.captureFrame(exposedAfter: lease.camera.now + .seconds(40), timeout: .seconds(120)) { f.release() }
            }
        }
        let (events, thrown) = await Self.run(job) { e in
            if case .waiting = e { said.yield() }
        }
        runner.cancel()
        #expect(thrown == nil, "\(String(describing: thrown))")
        let slots = Self.slots(events)
        #expect(slots.count == 5 && slots.allSatisfy { $0.state == .taken }, "\(slots.map { "\($0.index) \($0.state) \($0.reason ?? "")" })")
        await lease.session.stop()
    }

    @Test("the camera goes away: a shared session ends the job with CameraGone (the slots so far journalled); a camera of its own is opened again and the job goes on")
    func cameraLost() async throws {
        let clock = VirtualCameraClock()
        // The camera disappears some 12 s into the job: during slot 1 or 2.
        let failing = options { $0.faults.disconnectAtFrame = 390 }

        let dir = folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let lease = try await Self.opener(failing, clock: clock)()
        defer { lease.camera.release() }
        let shared = TimelapseJob(spec: spec(count: 5, biases: [0]), output: dir, reserve: 0, source: .shared(lease), clock: clock)
        let (events, thrown) = await Self.run(shared)
        let gone = try #require(thrown as? TimelapseJob.CameraGone, "\(String(describing: thrown))")
        #expect(gone.message.contains("the service must be restarted"), "\(gone.message)")
        let journal = try TimelapseJournal(path: dir + "/" + TimelapseRun.journalName, job: "job", spec: shared.spec.journalSpec)
        #expect(try journal.counts().values.reduce(0, +) == Self.slots(events).count, "every slot reported is journalled")

        let own = folder()
        defer { try? FileManager.default.removeItem(atPath: own) }
        let opened = Count()
        // Only the first camera opened fails (the device came back).
        let first = Self.opener(failing, clock: clock, opened: opened)
        let healthy = Self.opener(options(), clock: clock, opened: opened)
        let open: @Sendable () async throws -> TimelapseJob.CameraLease = { opened.value == 0 ? try await first() : try await healthy() }
        let job = TimelapseJob(spec: spec(count: 5, biases: [0]), output: own, reserve: 0, source: .owned(open: open, stopWhenIdle: nil), clock: clock)
        let (ownEvents, ownThrown) = await Self.run(job)
        #expect(ownThrown == nil, "\(String(describing: ownThrown))")
        let summary = try #require(Self.summary(ownEvents))
        #expect(summary.cameraReopened == 1)
        #expect(Self.slots(ownEvents).map(\.index) == [0, 1, 2, 3, 4])
        #expect((summary.counts[.taken] ?? 0) >= 3, "\(summary.counts)")
    }
}

/// How many times something happened, counted from any task.
final class Count: Sendable {
    private let n = Mutex(0)
    func add() { n.withLock { $0 += 1 } }
    var value: Int { n.withLock { $0 } }
}

/// Every event of a service's run, in order, and what the run threw.
func collect<Event: Sendable>(_ events: AsyncStream<Event>, onEvent: @escaping @Sendable (Event) -> Void, run: () async throws -> Void) async -> ([Event], (any Error)?) {
    async let all: [Event] = {
        var seen: [Event] = []
        for await e in events {
            onEvent(e)
            seen.append(e)
        }
        return seen
    }()
    var thrown: (any Error)?
    do { try await run() } catch { thrown = error }
    return (await all, thrown)
}
