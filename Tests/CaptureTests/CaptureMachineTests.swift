import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Testing

/// The capture machine alone (no session, no camera): a model pipeline whose frames carry the
/// controls their requests asked for some frames later, with dropped, failed and start-up
/// frames, and random photos, brackets, triggers and cancellations on top.
@Suite("Capture machine: properties over random runs")
struct CaptureMachineTests {
    /// What the test knows of a capture it asked for.
    struct Asked {
        var settings: PhotoSettings
        /// The newest frame when it was asked for: no photo may come from it or before.
        var after: UInt32?
        var photos: [Int] = []
        var resolved = false
        var ended = false
    }

    @Test("property: every photo is a frame carrying its step, exposed after its instant and newer than the request, in step order; every capture and trigger ends once; every hold the machine takes is given back once",
          arguments: 0..<200)
    func randomised(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed) &* 0x9E37_79B9 &+ 7)
        let landing = 2 + Int(rng.next() % 2)
        let timing = CameraTiming(landingOffsets: 2...3, lineTime: .microseconds(20), margin: .milliseconds(1), minFramePeriod: .milliseconds(33),
                                  ipaMinInterval: .milliseconds(33), gainRange: 1...16, exposureRange: .microseconds(100)...(.seconds(1)), readoutTime: .milliseconds(20))
        let limits = ControlLimits(supported: [.exposureTime, .analogueGain, .aeEnable, .frameDurationLimits, .colourGains, .awbEnable])
        let keepsNewest = seed % 4 == 3
        var machine = CaptureMachine(timing: timing, limits: limits, keepsNewest: keepsNewest)
        machine.baseline = CameraControls(aeEnabled: true, awbEnabled: true)

        // The model sensor: the controls of request k land on frame k + landing.
        var landed: [UInt64: CameraControls] = [:]
        var exposure = Duration.milliseconds(10), gain = 2.0, auto = true
        var ts = SensorTime(nanoseconds: 1_000_000_000)
        var nextRequest: UInt64 = 0
        var inFlight: [UInt64] = []
        var asked: [Int64: Asked] = [:]
        var triggers: [Int: (instant: SensorTime, ended: Bool)] = [:]
        var nextTrigger = 0
        var holdsTaken = 0, holdsEnded = 0
        var newest: UInt32?

        func take(_ actions: [CaptureMachine.Action]) {
            for a in actions {
                switch a {
                case .resolved(let id, _):
                    #expect(asked[id]?.ended == false, "seed \(seed): an event after the end")
                    asked[id]?.resolved = true
                case .exposureStarted(let id, _), .exposureEnded(let id, _):
                    #expect(asked[id]?.resolved == true && asked[id]?.ended == false, "seed \(seed): exposure before the plan or after the end")
                case .photo(let id, let step, let frame):
                    holdsEnded += 1
                    guard let a = asked[id] else { Issue.record("seed \(seed): a photo for a capture never asked"); continue }
                    #expect(!a.ended && a.resolved, "seed \(seed): a photo outside its capture")
                    #expect(step.planned.isCarried(by: frame.metadata, lineTime: timing.lineTime), "seed \(seed): step \(step.index) \(step.planned) from a frame carrying \(frame.metadata)")
                    if let instant = a.settings.exposedAfter {
                        #expect(frame.metadata.exposed(after: instant), "seed \(seed): a photo exposed before its instant")
                    }
                    if let after = a.after, !keepsNewest {
                        #expect(frame.metadata.sequence > after, "seed \(seed): a photo from a frame older than the capture")
                    }
                    #expect(step.index == a.photos.count, "seed \(seed): photos out of step order: \(a.photos) then \(step.index)")
                    asked[id]?.photos.append(step.index)
                case .finished(let id, let resolved):
                    #expect(asked[id]?.ended == false, "seed \(seed): a capture ended twice")
                    #expect(asked[id]?.photos.count == resolved.steps.count, "seed \(seed): finished with \(asked[id]?.photos.count ?? -1) photos of \(resolved.steps.count)")
                    asked[id]?.ended = true
                case .failed(let id, _):
                    #expect(asked[id]?.ended == false, "seed \(seed): a capture ended twice")
                    asked[id]?.ended = true
                case .release, .pool:
                    holdsEnded += 1
                case .restoreBaseline:
                    break
                case .triggered(let id, let instant, let frame):
                    holdsEnded += 1
                    #expect(triggers[id]?.ended == false && triggers[id]?.instant == instant, "seed \(seed): trigger \(id) answered twice or never asked")
                    #expect(frame.metadata.exposed(after: instant), "seed \(seed): a trigger's frame exposed before its instant")
                    triggers[id]?.ended = true
                case .triggerFailed(let id, _):
                    #expect(triggers[id]?.ended == false, "seed \(seed): trigger \(id) ended twice")
                    triggers[id]?.ended = true
                }
            }
        }

        for frame in 0..<600 {
            // Requests out, up to the depth.
            while inFlight.count < machine.depth {
                let c = machine.controls(forRequest: nextRequest, queued: inFlight.count + 1, now: ts) ?? (machine.isBetweenCaptures && rng.next() % 20 == 0 ? machine.baseline : CameraControls())
                landed[nextRequest + UInt64(landing)] = c
                inFlight.append(nextRequest)
                nextRequest += 1
                take(machine.takeActions())
            }
            // The oldest comes back, carrying what has landed by its frame.
            let cookie = inFlight.removeFirst()
            if let c = landed.removeValue(forKey: cookie) {
                if c.aeEnabled == true { auto = true }
                if let e = c.exposureTime, c.aeEnabled == false || !auto { exposure = e; auto = false }
                if let g = c.analogueGain, !auto { gain = g.value }
                if c.aeEnabled == false { auto = false }
                if auto { exposure = .milliseconds(10); gain = 2 }
            }
            let period = max(.milliseconds(33), exposure + timing.margin)
            ts = ts + period
            let dropped = rng.next() % 30 == 0
            if dropped { continue }  // never came back: a gap in the sequence numbers
            let status: CompletedRequest.Status = frame < 2 ? .startup : (rng.next() % 30 == 0 ? .error : .complete)
            let m = FrameMetadata(sequence: UInt32(cookie), sensorTimestamp: ts, exposureTime: exposure, analogueGain: Gain(gain), frameDuration: period)
            let held = machine.frame(CompletedRequest(slot: Int(cookie % 16), cookie: cookie, status: status, metadata: m, buffers: []), now: ts)
            holdsTaken += held
            if status == .complete { newest = m.sequence }
            take(machine.takeActions())
            machine.tick(now: ts)
            take(machine.takeActions())

            // Something new, now and then.
            switch rng.next() % 40 {
            case 0, 1:
                let s = PhotoSettings()
                asked[s.uniqueID] = Asked(settings: s, after: newest)
                machine.add(s, now: ts)
            case 2:
                let pool: [Duration] = [.milliseconds(1), .milliseconds(4), .milliseconds(16), .milliseconds(64)]
                let n = 2 + Int(rng.next() % 3)
                let steps = (0..<n).map { i in (duration: pool[(i + Int(rng.next() % 4)) % 4], gain: Gain(Double(1 + rng.next() % 4))) }
                let instant: SensorTime? = rng.next() % 2 == 0 ? ts + .milliseconds(Int64(rng.next() % 300)) : nil
                let s = PhotoSettings(bracket: .manualExposure(steps), exposedAfter: instant, phaseLocked: instant != nil && rng.next() % 2 == 0)
                asked[s.uniqueID] = Asked(settings: s, after: newest)
                machine.add(s, now: ts)
            case 3:
                let s = PhotoSettings(bracket: .exposureBias([-1, 0, 1]))
                asked[s.uniqueID] = Asked(settings: s, after: newest)
                machine.add(s, now: ts)
            case 4:
                let s = PhotoSettings(exposedAfter: ts + .milliseconds(Int64(rng.next() % 200)))
                asked[s.uniqueID] = Asked(settings: s, after: newest)
                machine.add(s, now: ts)
            case 5, 6:
                let instant = ts + .milliseconds(Int64(rng.next() % 250)) - .milliseconds(50)
                nextTrigger += 1
                triggers[nextTrigger] = (instant, false)
                if let kept = machine.addTrigger(id: nextTrigger, exposedAfter: instant, deadline: instant + .seconds(5)) {
                    #expect(kept.metadata.exposed(after: instant), "seed \(seed): a kept frame exposed before the trigger's instant")
                    holdsEnded += 1
                    triggers[nextTrigger]?.ended = true
                }
            case 7:
                if let id = asked.filter({ !$0.value.ended }).keys.sorted().first {
                    machine.cancel(id, now: ts)
                    asked[id]?.ended = true
                }
            default:
                break
            }
            take(machine.takeActions())
        }
        machine.failAll(ShutterbugError(.invalidState, "the test ended"))
        take(machine.takeActions())
        holdsEnded += machine.dropRetained().count
        #expect(asked.values.allSatisfy { $0.ended }, "seed \(seed): a capture never ended")
        #expect(triggers.values.allSatisfy { $0.ended }, "seed \(seed): a trigger never ended")
        #expect(holdsTaken == holdsEnded, "seed \(seed): \(holdsTaken) holds taken, \(holdsEnded) given back or handed out")
        #expect(machine.isIdle)
    }
}

@Suite("Capture session: one PhotoSettings, one capture at a time", .timeLimit(.minutes(2)))
struct SameSettingsTwiceTests {
    @Test("a triggered sensor: a trigger's capture asked for after a later pulse's frame replaced its own fails as late, and never takes the later pulse's frame")
    func triggeredSensorLateCapture() {
        let timing = CameraTiming(landingOffsets: 2...3, lineTime: .microseconds(20), margin: .milliseconds(1), minFramePeriod: .milliseconds(33),
                                  ipaMinInterval: .milliseconds(33), gainRange: 1...16, exposureRange: .microseconds(100)...(.seconds(1)), readoutTime: .milliseconds(16))
        var machine = CaptureMachine(timing: timing, limits: ControlLimits(supported: [.exposureTime, .analogueGain]), keepsNewest: true)
        let width = Duration.milliseconds(100)
        // Pulses 300 ms apart; each frame is exposed from its pulse for the pulse's width.
        func pulseFrame(_ k: Int) -> (SensorTime, CompletedRequest) {
            let edge = SensorTime(nanoseconds: 1_000_000_000) + .milliseconds(300 * k)
            let m = FrameMetadata(sequence: UInt32(k), sensorTimestamp: edge + width, exposureTime: width, analogueGain: Gain(1), frameDuration: width + .milliseconds(16))
            return (edge, CompletedRequest(slot: k % 4, cookie: UInt64(k), status: .complete, metadata: m, buffers: []))
        }
        let (edge0, frame0) = pulseFrame(0)
        let (edge1, frame1) = pulseFrame(1)
        #expect(machine.frame(frame0, now: edge0 + width) == 1, "nobody asked yet: the frame is kept")
        #expect(machine.frame(frame1, now: edge1 + width) == 1, "the next pulse's frame replaces it")
        _ = machine.takeActions()
        // Trigger 0's capture, asked for only now, as TriggerJob asks for it.
        let t0 = Trigger(instant: edge0, source: "test", sequence: 0)
        let late = PhotoSettings(trigger: t0, exposedBefore: edge0 + width + timing.readoutTime / 2)
        machine.add(late, now: edge1 + width)
        let actions = machine.takeActions()
        var failed: ShutterbugError?
        for a in actions {
            switch a {
            case .photo(_, _, let frame): Issue.record("trigger 0 took frame \(frame.metadata.sequence), exposed \((frame.metadata.exposureStart! - edge0).millisecondsDescription) after its pulse")
            case .failed(let id, let e) where id == late.uniqueID: failed = e
            default: break
            }
        }
        #expect(failed?.code == .late, "\(actions)")
        // Trigger 1's capture still finds its own frame.
        let t1 = Trigger(instant: edge1, source: "test", sequence: 1)
        let onTime = PhotoSettings(trigger: t1, exposedBefore: edge1 + width + timing.readoutTime / 2)
        machine.add(onTime, now: edge1 + width)
        let photos = machine.takeActions().compactMap { a -> UInt32? in if case .photo(let id, _, let f) = a, id == onTime.uniqueID { return f.metadata.sequence } else { return nil } }
        #expect(photos == [1])
    }

    @Test("the same settings asked for again while their capture runs are refused, saying why; the first capture completes, and the settings may be used again once it has")
    func sameSettingsTwice() async throws {
        let (session, cam) = try await simulatedSession(.imx477, stream: StreamRequest(role: .viewfinder, width: 640, height: 480))
        defer { cam.release() }
        let settings = PhotoSettings(bracket: .exposureBias([-1, 0, 1]))
        let first = await session.capture(settings)
        do {
            for try await _ in await session.capture(settings) {}
            Issue.record("a second capture of the same settings was accepted")
        } catch let e as ShutterbugError {
            #expect(e.code == .invalidArgument && e.message.contains("being captured already"), "\(e)")
        }
        var photos = 0
        for try await e in first {
            if case .photo(let p) = e {
                photos += 1
                p.release()
            }
        }
        #expect(photos == 3)
        var again = 0
        for try await e in await session.capture(settings) {
            if case .photo(let p) = e {
                again += 1
                p.release()
            }
        }
        #expect(again == 3, "after the first finished, the settings are free again")
        await session.stop()
    }
}

@Suite("Capture machine: metering after a gap in the frames")
struct MeteringAfterGapTests {
    @Test("an EV bracket meters converged auto exposure, never the frames after a stall that repeat what the AGC decided before it (the soak's +1.9 EV bracket)")
    func staleFramesAfterAStall() {
        let timing = CameraTiming(landingOffsets: 2...3, lineTime: .microseconds(20), margin: .milliseconds(1), minFramePeriod: .milliseconds(33),
                                  ipaMinInterval: .milliseconds(33), gainRange: 1...16, exposureRange: .microseconds(100)...(.seconds(1)), readoutTime: .milliseconds(20))
        var machine = CaptureMachine(timing: timing, limits: ControlLimits(supported: [.exposureTime, .analogueGain, .aeEnable]))
        machine.baseline = CameraControls(aeEnabled: true, awbEnabled: true)
        var ts = SensorTime(nanoseconds: 1_000_000_000)
        func frame(_ sequence: UInt32, _ exposureMs: Double) {
            ts = ts + .milliseconds(33)
            let m = FrameMetadata(sequence: sequence, sensorTimestamp: ts, exposureTime: .microseconds(Int64(exposureMs * 1000)), analogueGain: Gain(1),
                                  frameDuration: .milliseconds(33))
            _ = machine.frame(CompletedRequest(slot: Int(sequence % 8), cookie: UInt64(sequence), status: .complete, metadata: m, buffers: []), now: ts)
        }
        let settings = PhotoSettings(bracket: .exposureBias([-2, 0, 2]))
        machine.add(settings, now: ts)
        // Auto exposure easing down, then the sensor stalls for 27 frames; the first frames
        // after it carry the AGC's last decision before it, 8 ms, four times over.
        for (k, e) in [20.0, 16, 13, 11, 9.5].enumerated() { frame(UInt32(10 + k), e) }
        for k in 0..<4 { frame(UInt32(42 + k), 8) }
        // Then the AGC's new decisions land: on to 5 ms, where it settles.
        for (k, e) in [7.0, 6, 5.5, 5, 5, 5].enumerated() { frame(UInt32(46 + k), e) }
        var metered: Duration?
        for case .resolved(let id, let r) in machine.takeActions() where id == settings.uniqueID && r.meteredExposure != nil { metered = metered ?? r.meteredExposure }
        #expect(metered == .milliseconds(5), "metered \(metered.map { "\($0)" } ?? "nothing"): the stale frames after the stall are not auto exposure settled")
    }
}
