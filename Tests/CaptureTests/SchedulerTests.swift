import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Testing

/// The bracket scheduler as a pure state machine: time and frames are inputs.
@Suite("Bracket scheduler: injected clock, ControlListSequence", .timeLimit(.minutes(3)))
struct SchedulerTests {
    static let timing = CameraTiming(profile: .imx477, mode: SensorProfile.imx477.fullResolution, ipaMinInterval: .zero)
    static func step(_ us: Int64) -> BracketScheduler.Step {
        let e = Duration.microseconds(us)
        return BracketScheduler.Step(controls: .manualExposure(e, gain: Gain(1)), target: StepTarget(exposure: e, gain: 1))
    }
    static func frame(_ seq: UInt32, exposureUs: Int64, named: Int64? = nil) -> FrameMetadata {
        var m = FrameMetadata(sequence: seq, sensorTimestamp: SensorTime(nanoseconds: Int64(seq) * 100_000_000), exposureTime: .microseconds(exposureUs),
                              analogueGain: Gain(1), digitalGain: Gain(1))
        m.controlListSequence = named
        return m
    }

    @Test("no frame for the stall timeout fails the bracket, at the injected time and not before")
    func stall() {
        let t0 = SensorTime(nanoseconds: 1_000_000_000)
        var s = BracketScheduler(steps: [Self.step(1000), Self.step(2000)], restore: CameraControls(), timing: Self.timing, now: t0, stallTimeout: .seconds(3))
        _ = s.controls(forRequest: 0)
        #expect(s.tick(now: t0 + .seconds(2)).isEmpty)
        // A frame is progress: the limit counts from it.
        _ = s.complete(cookie: 0, status: .complete, metadata: Self.frame(1, exposureUs: 9000), now: t0 + .milliseconds(2500))
        #expect(s.tick(now: t0 + .milliseconds(5400)).isEmpty)
        let actions = s.tick(now: t0 + .milliseconds(5600))
        guard case .failed(let step, let reason)? = actions.first else {
            Issue.record("expected a failure, got \(actions)")
            return
        }
        #expect(step == 0)
        #expect(reason.contains("stalled") && reason.contains("3.1 s"), "\(reason)")
        #expect(s.isFinished)
        #expect(s.tick(now: t0 + .seconds(60)).isEmpty, "fails once")
    }

    @Test("the default stall timeout covers long exposures")
    func stallDefault() {
        let s = BracketScheduler(steps: [Self.step(1000), Self.step(1_500_000)], restore: CameraControls(), timing: Self.timing, now: SensorTime(nanoseconds: 0))
        #expect(s.stallTimeout >= .seconds(15))
        let short = BracketScheduler(steps: [Self.step(1000)], restore: CameraControls(), timing: Self.timing, now: SensorTime(nanoseconds: 0))
        #expect(short.stallTimeout == .seconds(2))
    }

    @Test("with ControlListSequence, two identical steps are told apart by the request each frame names")
    func namedRequests() {
        let t = SensorTime(nanoseconds: 0)
        // Two steps with the same settings: metadata alone cannot say which frame is which.
        var s = BracketScheduler(steps: [Self.step(5000), Self.step(5000)], restore: CameraControls(), timing: Self.timing, now: t)
        #expect(s.controls(forRequest: 10) != nil)  // step 1, will be request sequence 20
        #expect(s.controls(forRequest: 11) != nil)  // step 2, request sequence 21
        _ = s.controls(forRequest: 12)  // restore
        var actions: [BracketScheduler.Action] = []
        actions += s.complete(cookie: 10, requestSequence: 20, status: .complete, metadata: Self.frame(100, exposureUs: 9000, named: 17), now: t)
        actions += s.complete(cookie: 11, requestSequence: 21, status: .complete, metadata: Self.frame(101, exposureUs: 9000, named: 18), now: t)
        actions += s.complete(cookie: 12, requestSequence: 22, status: .complete, metadata: Self.frame(102, exposureUs: 9000, named: 19), now: t)
        // Fillers. The first frame that may carry step 1 (paired frame 100 + 4 on the IMX477)
        // shows 5 ms but names an older request (a write that was overtaken would look like
        // this): not a step.
        actions += s.complete(cookie: 13, requestSequence: 23, status: .complete, metadata: Self.frame(103, exposureUs: 9000, named: 19), now: t)
        actions += s.complete(cookie: 14, requestSequence: 24, status: .complete, metadata: Self.frame(104, exposureUs: 5000, named: 19), now: t)
        actions += s.complete(cookie: 15, requestSequence: 25, status: .complete, metadata: Self.frame(105, exposureUs: 5000, named: 20), now: t)
        // The IPA repeats request 20's write: same settings, same name: a duplicate.
        actions += s.complete(cookie: 16, requestSequence: 26, status: .complete, metadata: Self.frame(106, exposureUs: 5000, named: 20), now: t)
        actions += s.complete(cookie: 17, requestSequence: 27, status: .complete, metadata: Self.frame(107, exposureUs: 5000, named: 21), now: t)
        let photos = actions.compactMap { if case .photo(let i) = $0 { return i } else { return nil } }
        #expect(photos == [0, 1])
        #expect(actions.contains(.discard(sequence: 104, reason: .noStepMatches)))
        #expect(actions.contains(.discard(sequence: 106, reason: .duplicate(step: 0))))
        #expect(!actions.contains { if case .discard(103, _) = $0 { return true } else { return false } }, "before the earliest landing nothing is judged")
        #expect(actions.last == .finished)
    }

    @Test("a frame naming a step's request whose metadata disagrees is not that step's photo")
    func namedButWrong() {
        let t = SensorTime(nanoseconds: 0)
        var s = BracketScheduler(steps: [Self.step(5000)], restore: CameraControls(), timing: Self.timing, now: t)
        _ = s.controls(forRequest: 1)
        var actions = s.complete(cookie: 1, requestSequence: 7, status: .complete, metadata: Self.frame(50, exposureUs: 9000, named: 6), now: t)
        actions += s.complete(cookie: 2, requestSequence: 8, status: .complete, metadata: Self.frame(54, exposureUs: 9000, named: 7), now: t)
        #expect(actions.contains(.discard(sequence: 54, reason: .controlsDisagree(step: 0))))
        #expect(!actions.contains(.photo(step: 0)))
        actions = s.complete(cookie: 3, requestSequence: 9, status: .complete, metadata: Self.frame(55, exposureUs: 5000, named: 7), now: t)
        #expect(actions.contains(.photo(step: 0)))
    }
}

@Suite("Brackets with ControlListSequence and stalls on the simulated camera", .timeLimit(.minutes(3)))
struct NamedRequestBracketTests {
    @Test("a camera that names each frame's request: every photo carries its step, identical steps included",
          arguments: [SensorProfile.imx219, .imx477, .imx708], [0.0, 0.1])
    func named(profile: SensorProfile, drops: Double) async throws {
        let (session, cam) = try await simulatedSession(profile, landing: .random, drops: drops, seed: 11) { $0.reportsControlListSequence = true }
        defer { cam.release() }
        let e = Duration.milliseconds(8)
        let steps: [(duration: Duration, gain: Gain)] = [(e, Gain(1)), (e, Gain(1)), (e * 2, Gain(1)), (e, Gain(1)), (e, Gain(2))]
        let r = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(steps))))
        expectOrder(r, steps: steps.count)
        let timing = await session.timing
        for p in r.photos {
            #expect(p.step.planned.isCarried(by: p.metadata, lineTime: timing.lineTime), "step \(p.step.index): \(p.metadata)")
            #expect(p.metadata.controlListSequence != nil)
        }
        // Each photo names a different, later request than the step before it.
        let named = r.photos.compactMap(\.metadata.controlListSequence)
        #expect(named == named.sorted() && Set(named).count == steps.count, "\(named)")
        #expect(Set(r.photos.map(\.metadata.sequence)).count == steps.count)
        #expect(await heldAfterRelease(session) == 0)
    }

    @Test("a camera that stops delivering frames mid-bracket fails the capture with the cause, and gives every buffer back")
    func stalled() async throws {
        let (session, cam) = try await simulatedSession(.imx219, landing: .early) { $0.clock = .realTime }
        defer { cam.release() }
        let e = Duration.milliseconds(2)
        var events: [String] = []
        // The pipeline hangs from the next frame, as the bracket's requests go out: at most one
        // more frame comes back, too early to carry any step. A minute, so a loaded machine
        // cannot let the stall end before the capture starts; stopping the camera ends it.
        cam.stall(for: .seconds(60))
        do {
            for try await event in await session.capture(PhotoSettings(bracket: .manualExposure([(e, Gain(1)), (e * 2, Gain(1)), (e * 4, Gain(1))]))) {
                switch event {
                case .settingsResolved: events.append("resolved")
                case .photo(let p):
                    events.append("photo")
                    p.release()
                default: events.append("\(event)")
                }
            }
            Issue.record("a bracket through a 60 s stall should fail after the 2 s limit: \(events)")
        } catch let error as ShutterbugError {
            #expect(error.code == .timeout)
            #expect(error.message.contains("stalled"), "\(error)")
            #expect(!events.contains("photo"))
        }
        #expect(await heldAfterRelease(session) == 0)
    }
}

/// Step 1 of an EV bracket is the metered exposure: the auto-exposure frames before the bracket
/// carry it too, within a line. Metadata cannot tell them apart; the landing window and the
/// change from the frame before can.
@Suite("A step within a line of what was in force before is never taken from before its landing")
struct UnprovenStepTests {
    @Test("over random landings, drops and AE jitter within a line: every photo is a frame that really carries its step's request", arguments: 0..<200)
    func neverTheAutoExposureFrame(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed) &* 0x9E37_79B9 &+ 7)
        let timing = SchedulerTests.timing
        let line = timing.lineTime.nanosecondsValue
        let t0 = SensorTime(nanoseconds: 0)
        var s = BracketScheduler(steps: [SchedulerTests.step(5000), SchedulerTests.step(20_000)], restore: CameraControls(), timing: timing, now: t0)
        // The two steps' requests pair with frames 100 and 101, the restore with 102; each lands
        // a random number of frames later within the camera's offsets, never before the one
        // before it.
        let base: UInt32 = 100
        let range = timing.landingOffsets
        var landing: [Int64] = []
        for i in 0..<2 {
            let l = Int64(base) + Int64(i) + Int64(range.lowerBound) + Int64(rng.next() % UInt64(range.count))
            landing.append(max(l, landing.last ?? 0))
        }
        /// What frame `seq` carries: step i's exposure from its landing, else the AE's (within a
        /// line of step 1's 5 ms, up or down).
        func truth(_ seq: Int64) -> (step: Int?, exposureNs: Int64) {
            if seq >= landing[1] { return (1, 20_000_000) }
            if seq >= landing[0] { return (0, 5_000_000) }
            return (nil, 5_000_000 + Int64(rng.next() % UInt64(2 * line - 1)) - line + 1)
        }
        var actions: [(UInt32, BracketScheduler.Action)] = []
        for k in 0..<14 {
            let seq = base - 4 + UInt32(k)
            let cookie = UInt64(k)
            if seq >= base { _ = s.controls(forRequest: cookie) }
            if rng.next() % 10 == 0 && seq != base && seq != base + 1 { continue }  // dropped
            let (_, e) = truth(Int64(seq))
            var m = FrameMetadata(sequence: seq, sensorTimestamp: SensorTime(nanoseconds: Int64(seq) * 100_000_000),
                                  exposureTime: .nanoseconds(e), analogueGain: Gain(1), digitalGain: Gain(1))
            m.lux = 100
            for a in s.complete(cookie: seq >= base ? cookie : 1000 + cookie, status: .complete, metadata: m, now: t0) { actions.append((seq, a)) }
        }
        for case (let seq, .photo(let step)) in actions {
            #expect(truth(Int64(seq)).step == step, "seed \(seed): frame \(seq) taken as step \(step + 1); landings \(landing)")
        }
    }
}
