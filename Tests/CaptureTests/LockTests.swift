import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Testing

@Suite("Locks report the first frame that carries them", .timeLimit(.minutes(3)))
struct LockTests {
    @Test("custom exposure: the sync point is the first frame with the new metadata", arguments: [SimulationOptions.Landing.early, .late, .random])
    func exposure(landing: SimulationOptions.Landing) async throws {
        let (session, cam) = try await simulatedSession(.imx477, landing: landing, stream: StreamRequest(role: .viewfinder))
        defer { cam.release() }
        let frames = await session.frames(buffering: 1_000_000)
        let result = try await session.configure { $0.customExposure = (.microseconds(3000), Gain(3)) }
        let sync = try #require(result.exposure)
        let offsets = SensorProfile.imx477.delays.landingOffsets
        #expect(offsets.contains(sync.framesAfterRequest), "landed \(sync.framesAfterRequest) frames after")
        // The sync frame is the first from the request's own frame on that carries it.
        let target = StepTarget(exposure: .microseconds(3000), gain: 3)
        let line = await session.timing.lineTime
        var checked = 0
        for await m in frames {
            guard m.sequence >= sync.requestFrame else { continue }
            if m.sequence < sync.sequence {
                #expect(!target.isCarried(by: m, lineTime: line), "frame \(m.sequence) already carries it")
                checked += 1
                continue
            }
            #expect(m.sequence == sync.sequence && target.isCarried(by: m, lineTime: line))
            break
        }
        #expect(checked >= offsets.lowerBound - 1)
        // The next capture shows the locked exposure.
        let r = try await record(await session.capture(PhotoSettings()))
        #expect(abs(r.photos[0].metadata.exposureTime!.microsecondsValue - 3000) < 30)
        #expect(r.photos[0].metadata.sequence > sync.sequence)
    }

    @Test("white balance applies to the request's own frame (an ISP control)")
    func whiteBalance() async throws {
        let (session, cam) = try await simulatedSession(.imx219, stream: StreamRequest(role: .viewfinder))
        defer { cam.release() }
        let result = try await session.configure { $0.lockedWhiteBalance = ColourGains(red: 2.2, blue: 1.3) }
        #expect(result.whiteBalance?.framesAfterRequest == 0)
    }

    @Test("focus: settled one frame after the reported position reaches the target, plus settle time")
    func focus() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        o.subjectDistance = 0.25  // 4 dioptres
        let cam = SimulatedCamera(profile: .imx708, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        try await session.start(stream: StreamRequest(role: .viewfinder, width: 640, height: 480))
        _ = try await session.configure { $0.lockedFocus = Dioptres(0) }
        let result = try await session.configure { $0.lockedFocus = Dioptres(4) }
        let sync = try #require(result.focus)
        // 0 to 4 dioptres at 1.5 per run: 3 runs, then one more frame at least.
        #expect(sync.framesAfterRequest >= 3)
        let r = try await record(await session.capture(PhotoSettings()))
        let p = r.photos[0]
        #expect(p.metadata.lensPosition?.value == 4)
    }

    @Test("a lens on a fixed-focus module is refused clearly")
    func noMotor() async throws {
        let (session, cam) = try await simulatedSession(.imx477, stream: StreamRequest(role: .viewfinder))
        defer { cam.release() }
        await #expect {
            _ = try await session.configure { $0.lockedFocus = Dioptres(1) }
        } throws: { ($0 as? ShutterbugError)?.message.contains("no focus motor") == true }
    }

    @Test("capture after an instant takes the first frame exposed after it")
    func afterInstant() async throws {
        let (session, cam) = try await simulatedSession(.imx219, stream: StreamRequest(role: .viewfinder, width: 640, height: 480), prepared: 1)
        defer { cam.release() }
        // In virtual time the sensor runs ahead of the clock on the wall, so the instant is put
        // far enough ahead (900 frames) that it has surely not passed when the wait begins.
        _ = try await record(await session.capture(PhotoSettings()))
        let latest = try #require(await session.latestFrame?.sensorTimestamp)
        let t = latest + .seconds(30)
        let photo = try await session.captureFrame(exposedAfter: t)
        defer { photo.release() }
        let start = try #require(photo.metadata.exposureStart)
        #expect(start >= t)
        // The next exposure starts within one frame period of any instant.
        #expect(start - t <= photo.metadata.frameDuration!)
    }
}

/// A camera that stops delivering frames: every wait fails by time with its cause.
@Suite("Waits on a stalled camera end by time", .timeLimit(.minutes(2)))
struct StalledWaitTests {
    @Test("configure with a lock fails with a timeout naming the lock")
    func lockTimesOut() async throws {
        let (session, cam) = try await simulatedSession(.imx477, landing: .early) { $0.clock = .realTime }
        defer { cam.release() }
        cam.stall(for: .seconds(60))
        do {
            _ = try await session.configure { $0.customExposure = (.milliseconds(5), Gain(2)) }
            Issue.record("a lock through a 60 s stall should fail")
        } catch let e as ShutterbugError {
            #expect(e.code == .timeout)
            #expect(e.message.contains("exposure lock") && e.message.contains("stalled"), "\(e)")
        }
    }

    @Test("captureFrame(exposedAfter:timeout:) fails after its timeout")
    func triggerTimesOut() async throws {
        let (session, cam) = try await simulatedSession(.imx219, landing: .early, stream: StreamRequest(role: .viewfinder, width: 640, height: 480), prepared: 1) { $0.clock = .realTime }
        defer { cam.release() }
        cam.stall(for: .seconds(60))
        let asked = MonotonicClock.now()
        // Any frame still on its way when the stall began was exposed before `asked`: none can
        // qualify for an instant 200 ms later, so only the timeout can end the wait.
        let instant = asked + .milliseconds(200)
        do {
            let p = try await session.captureFrame(exposedAfter: instant, timeout: .milliseconds(600))
            p.release()
            Issue.record("no frame can be exposed after \(instant) on a stalled camera, yet one came: \(p.metadata)")
        } catch let e as ShutterbugError {
            #expect(e.code == .timeout, "\(e)")
            let waited = MonotonicClock.now() - asked
            // The deadline is 800 ms after `asked`, and the wait does not end before it. How
            // much later depends on the machine's load (ticks run on the cooperative pool); a
            // hang is caught by the suite's time limit, not by a guess at the load here.
            #expect(waited >= .milliseconds(800), "waited \(waited)")
        }
    }
}

/// In virtual time the camera's clock jumps over a stall: no tick sees it pass, so the frames'
/// own timestamps must tell it (the first frame after the gap).
@Suite("A stall in virtual time is judged on the camera's clock", .timeLimit(.minutes(2)))
struct VirtualStallTests {
    @Test("a manual bracket across a 30 s stall fails naming the step it stalled before, instead of bridging the gap")
    func bracketAcrossAStall() async throws {
        let (session, cam) = try await simulatedSession(.imx477, landing: .random, stream: StreamRequest(role: .video), prepared: 5) {
            $0.clock = .virtual
            $0.faults.stallAtFrame = 24
            $0.faults.stallDuration = .seconds(30)
        }
        defer { cam.release() }
        var photos: [Int] = []
        do {
            let steps = [1000, 2000, 4000, 8000, 16_000].map { (Duration.microseconds($0), Gain(1)) }
            for try await e in await session.capture(PhotoSettings(bracket: .manualExposure(steps))) {
                if case .photo(let p) = e {
                    photos.append(p.step.index + 1)
                    p.release()
                }
            }
            Issue.record("the bracket bridged a 30 s stall: steps \(photos)")
        } catch let e as ShutterbugError {
            #expect(e.code == .timeout && e.message.contains("no frame came back for 30") && e.message.contains("stalled before step"), "\(e)")
            #expect(photos == Array(photos.indices.map { $0 + 1 }), "the steps before the stall come out in order: \(photos)")
        }
    }

    @Test("a focus lock across a 30 s stall fails by time, naming the stall")
    func focusAcrossAStall() async throws {
        let (session, cam) = try await simulatedSession(.imx708, landing: .random, stream: StreamRequest(role: .video), prepared: 1) { $0.clock = .virtual }
        defer { cam.release() }
        cam.stall(for: .seconds(30))
        do {
            _ = try await session.configure { $0.lockedFocus = Dioptres(11.5) }
            Issue.record("the focus lock bridged a 30 s stall")
        } catch let e as ShutterbugError {
            #expect(e.code == .timeout && e.message.contains("stalled"), "\(e)")
        }
    }
}

/// `PhotoSettings.exposedBefore`: the latest a capture's first exposure may begin (a timelapse
/// slot's lateness rule), judged at exposure start.
@Suite("A capture whose first exposure would begin too late is not taken", .timeLimit(.minutes(2)))
struct LateCaptureTests {
    @Test("a photo or a bracket whose first frame begins past its latest start fails late, hands out nothing and gives every buffer back; one within it is taken", arguments: [false, true])
    func lateIsNotTaken(bracket: Bool) async throws {
        let (session, cam) = try await simulatedSession(.imx477, landing: .random, stream: StreamRequest(role: .video), prepared: 3) { $0.clock = .virtual }
        defer { cam.release() }
        let steps = bracket ? BracketSettings.manualExposure([(.microseconds(1000), Gain(1)), (.microseconds(4000), Gain(1))]) : nil
        let instant = cam.now + .milliseconds(50)
        // No frame can begin within a microsecond of the instant: too late, whatever comes.
        var photos = 0
        do {
            for try await e in await session.capture(PhotoSettings(bracket: steps, exposedAfter: instant, exposedBefore: instant + .microseconds(1))) {
                if case .photo(let p) = e { photos += 1; p.release() }
            }
            Issue.record("a capture past its latest start was taken")
        } catch let e as ShutterbugError {
            #expect(e.code == .late && e.message.contains("not taken"), "\(e)")
        }
        #expect(photos == 0, "a late capture handed out \(photos) photos")
        #expect(await session.photosHeld == 0)
        // With a second's room it is taken.
        let at = cam.now + .milliseconds(50)
        var taken = 0
        for try await e in await session.capture(PhotoSettings(bracket: steps, exposedAfter: at, exposedBefore: at + .seconds(1))) {
            if case .photo(let p) = e { taken += 1; p.release() }
        }
        #expect(taken == (bracket ? 2 : 1))
    }
}
