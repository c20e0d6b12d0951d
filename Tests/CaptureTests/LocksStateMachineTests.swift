import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Testing

/// The locks and trigger selection as pure state machines: frames and time are inputs.
@Suite("Locks and trigger selection: pure state machines", .timeLimit(.minutes(2)))
struct LocksStateMachineTests {
    static let timing = CameraTiming(profile: .imx477, mode: SensorProfile.imx477.fullResolution, ipaMinInterval: .zero)
    static let target = StepTarget(exposure: timing.quantise(.microseconds(5000)), gain: 2)
    static let period = Duration.milliseconds(100)

    static func frame(_ seq: UInt32, carries: Bool) -> FrameMetadata {
        FrameMetadata(sequence: seq, sensorTimestamp: SensorTime(nanoseconds: 1_000_000_000 + Int64(seq) * period.nanosecondsValue),
                      exposureTime: carries ? target.exposure! : .microseconds(9000), analogueGain: Gain(carries ? 2 : 1), digitalGain: .unity)
    }

    @Test("property: over random landings, drops and stalls, a lock settles on exactly the first carrying frame it may, or fails once with the cause",
          arguments: 0..<200)
    func randomised(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed) &* 0x9E37 &+ 11)
        var locks = Locks(frameLimit: 20)
        var now = SensorTime(nanoseconds: 1_000_000_000)
        locks.add(id: 7, kind: .exposure(Self.target), now: now, timeLimit: .seconds(2))
        locks.sent([7], cookie: 42)
        // The request's own frame, then frames that carry the target from a random point
        // (sometimes never), some dropped, and perhaps a stall.
        let landsAt = rng.next() % 4 == 0 ? UInt32.max : UInt32(1 + rng.next() % 12)
        let stallAt = rng.next() % 3 == 0 ? UInt32(rng.next() % 15) : UInt32.max
        var outcomes: [Locks.Outcome] = []
        var firstEligible: UInt32?
        var paired: UInt32?
        var seq: UInt32 = 100
        var cookie: UInt64 = 42
        for i in UInt32(0)..<40 {
            if i == stallAt {
                // No frame for 2.5 s of ticks.
                for _ in 0..<10 {
                    now = now + .milliseconds(250)
                    outcomes += locks.tick(now: now)
                }
                break
            }
            seq += rng.next() % 5 == 0 ? 2 : 1  // a drop now and then
            now = now + Self.period
            let carries = i >= landsAt
            let m = Self.frame(seq, carries: carries)
            if paired == nil { paired = seq }  // the request's own frame
            if carries && firstEligible == nil && Int(seq) >= Int(paired!) + Self.timing.landingOffsets.lowerBound { firstEligible = seq }
            outcomes += locks.complete(cookie: cookie, status: .complete, metadata: m, now: now, timing: Self.timing)
            cookie = 1000 + UInt64(i)
            if !outcomes.isEmpty { break }
        }
        #expect(outcomes.count <= 1, "seed \(seed): \(outcomes)")
        // Drain what is left with time.
        if outcomes.isEmpty { outcomes += locks.tick(now: now + .seconds(3)) }
        #expect(outcomes.count == 1, "seed \(seed): a lock must end exactly once: \(outcomes)")
        #expect(locks.isEmpty)
        switch outcomes.first {
        case .settled(let p)?:
            #expect(p.id == 7)
            #expect(p.sequence == firstEligible, "seed \(seed): settled on \(p.sequence), first eligible \(String(describing: firstEligible))")
            #expect(Int(p.sequence) >= Int(p.requestFrame) + Self.timing.landingOffsets.lowerBound)
        case .failed(let id, let reason)?:
            #expect(id == 7)
            #expect(firstEligible == nil || stallAt != .max, "seed \(seed): failed although frame \(String(describing: firstEligible)) carried it: \(reason)")
            #expect(reason.contains("exposure lock"), "\(reason)")
            #expect(reason.contains("stalled") || reason.contains("did not show"), "\(reason)")
        case nil:
            break
        }
    }

    @Test("frames are counted as they come: a stall shorter than the time limit, which jumps the sequence numbers (virtual time), does not use up the frame limit")
    func stallDoesNotCountAsFrames() {
        var locks = Locks(frameLimit: 20)
        var now = SensorTime(nanoseconds: 1_000_000_000)
        locks.add(id: 3, kind: .exposure(Self.target), now: now, timeLimit: .seconds(2))
        locks.sent([3], cookie: 9)
        var out = locks.complete(cookie: 9, status: .complete, metadata: Self.frame(100, carries: false), now: now, timing: Self.timing)
        for seq in UInt32(101)...105 {
            now = now + Self.period
            out += locks.complete(cookie: 0, status: .complete, metadata: Self.frame(seq, carries: false), now: now, timing: Self.timing)
        }
        // 1.9 s with no frame: the next is numbered 19 further on.
        now = now + .milliseconds(1900)
        out += locks.tick(now: now)
        out += locks.complete(cookie: 0, status: .complete, metadata: Self.frame(124, carries: false), now: now, timing: Self.timing)
        #expect(out.isEmpty, "6 frames came after the request, not 24: \(out)")
        out += locks.complete(cookie: 0, status: .complete, metadata: Self.frame(125, carries: true), now: now + Self.period, timing: Self.timing)
        #expect(out.count == 1 && { if case .settled(let p) = out[0] { return p.id == 3 && p.sequence == 125 && p.requestFrame == 100 } else { return false } }(), "\(out)")
        // And the limit still holds when frames come and none carries it.
        var more = Locks(frameLimit: 20)
        more.add(id: 4, kind: .exposure(Self.target), now: now, timeLimit: .seconds(2))
        more.sent([4], cookie: 9)
        var failed: [Locks.Outcome] = []
        for (i, seq) in (UInt32(200)...UInt32(221)).enumerated() {
            failed += more.complete(cookie: i == 0 ? 9 : 0, status: .complete, metadata: Self.frame(seq, carries: false), now: now, timing: Self.timing)
        }
        #expect(failed.count == 1 && { if case .failed(4, let r) = failed[0] { return r.contains("did not show in the 20 frames") } else { return false } }(), "\(failed)")
    }

    @Test("a lock with no frame for its time limit fails at that time and not before, naming the lock")
    func timesOut() {
        var locks = Locks()
        let t0 = SensorTime(nanoseconds: 5_000_000_000)
        locks.add(id: 1, kind: .focus(2), now: t0, timeLimit: .seconds(3))
        #expect(locks.tick(now: t0 + .milliseconds(2900)).isEmpty)
        let out = locks.tick(now: t0 + .milliseconds(3100))
        guard case .failed(let id, let reason)? = out.first else {
            Issue.record("expected a failure, got \(out)")
            return
        }
        #expect(id == 1)
        #expect(reason.contains("focus lock") && reason.contains("stalled"), "\(reason)")
        #expect(locks.isEmpty)
    }

    @Test("trigger selection: the first frame exposed at or after the instant; a start-up or failed frame never; deadlines on the injected clock")
    func triggerSelect() {
        var s = TriggerSelect()
        let t = SensorTime(nanoseconds: 10_000_000_000)
        s.add(id: 1, exposedAfter: t, deadline: t + .seconds(1))
        func frame(startingAt start: SensorTime) -> FrameMetadata {
            FrameMetadata(sequence: 1, sensorTimestamp: start + .milliseconds(10), exposureTime: .milliseconds(10))
        }
        #expect(s.complete(status: .complete, metadata: frame(startingAt: t - .nanoseconds(1))) == nil)
        #expect(s.complete(status: .cancelled, metadata: frame(startingAt: t)) == nil)
        #expect(s.complete(status: .complete, metadata: frame(startingAt: t))?.id == 1)
        s.add(id: 2, exposedAfter: t, deadline: t + .seconds(1))
        #expect(s.tick(now: t + .milliseconds(999)).isEmpty)
        #expect(s.tick(now: t + .seconds(1)).map(\.id) == [2])
        #expect(s.isEmpty)
    }

    @Test("a camera that reports no exposure (vimc): a frame counts as exposed after an instant once its readout is a frame (FrameDuration, or the measured interval) after it, never sooner; with nothing to bound it, never")
    func triggerSelectWithoutExposure() {
        let t = SensorTime(nanoseconds: 10_000_000_000)
        func frame(readout: SensorTime, duration: Duration? = nil, measured: Duration? = nil) -> FrameMetadata {
            var m = FrameMetadata(sequence: 1, sensorTimestamp: readout, frameDuration: duration)
            m.measuredFrameInterval = measured
            return m
        }
        var s = TriggerSelect()
        s.add(id: 1, exposedAfter: t, deadline: t + .seconds(1))
        // Read out 26 ms after the instant, 33 ms after the previous: may have begun 7 ms before it.
        #expect(s.complete(status: .complete, metadata: frame(readout: t + .milliseconds(26), measured: .milliseconds(33))) == nil)
        #expect(s.complete(status: .complete, metadata: frame(readout: t + .milliseconds(59), measured: .milliseconds(33)))?.id == 1)
        s.add(id: 2, exposedAfter: t, deadline: t + .seconds(1))
        #expect(s.complete(status: .complete, metadata: frame(readout: t + .milliseconds(20), duration: .milliseconds(25))) == nil)
        #expect(s.complete(status: .complete, metadata: frame(readout: t + .milliseconds(25), duration: .milliseconds(25)))?.id == 2)
        s.add(id: 3, exposedAfter: t, deadline: t + .seconds(1))
        #expect(s.complete(status: .complete, metadata: frame(readout: t + .seconds(5))) == nil, "nothing bounds its exposure")
        // Where the exposure is reported, that is the rule, not the bound.
        var exact = frame(readout: t + .milliseconds(5), duration: .milliseconds(33))
        exact.exposureTime = .milliseconds(4)
        #expect(exact.earliestExposureStart == t + .milliseconds(1) && exact.exposureStart == exact.earliestExposureStart)
    }
}
