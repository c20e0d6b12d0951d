import Capture
import CaptureScheduler
import ShutterbugCore
import ProcessTriggers
import SimulatedCamera
import Testing

@Suite("Triggers: captures exposed after an instant", .timeLimit(.minutes(2)))
struct TriggerTests {
    @Test("pattern sources: regular, seeded Poisson (repeatable, mean near the asked one) and bursts, on the clock given")
    func patterns() {
        let t0 = SensorTime(nanoseconds: 5_000_000_000)
        let regular = PatternTriggerSource(.regular(period: .milliseconds(200)), count: 4, start: t0, realTime: false).instants
        #expect(regular == [0, 200, 400, 600].map { t0 + .milliseconds($0) })
        let p1 = PatternTriggerSource(.poisson(mean: .milliseconds(100), seed: 9), count: 2000, start: t0, realTime: false).instants
        let p2 = PatternTriggerSource(.poisson(mean: .milliseconds(100), seed: 9), count: 2000, start: t0, realTime: false).instants
        #expect(p1 == p2)
        let mean = (p1.last! - p1.first!).secondsValue / Double(p1.count - 1)
        #expect(abs(mean - 0.1) < 0.01, "mean gap \(mean)")
        #expect(zip(p1, p1.dropFirst()).allSatisfy { $0 <= $1 })
        let burst = PatternTriggerSource(.burst(count: 3, spacing: .milliseconds(10), pause: .seconds(1)), count: 6, start: t0, realTime: false).instants
        #expect(burst.map { ($0 - t0).nanosecondsValue / 1_000_000 } == [0, 10, 20, 1020, 1030, 1040])
    }

    @Test("each trigger's photo is the first frame exposed after its instant; a bracket's every step is exposed after it, on consecutive frames")
    func exposedAfter() async throws {
        let (session, cam) = try await simulatedSession(.imx219, landing: .early, stream: StreamRequest(role: .viewfinder, width: 640, height: 480))
        defer { cam.release() }
        let frames = await session.frames(buffering: 4096)
        let start = try #require(await session.latestFrame?.sensorTimestamp) + .milliseconds(500)
        let source = PatternTriggerSource(.regular(period: .milliseconds(170)), count: 5, start: start, realTime: false)
        var photos: [(Trigger, FrameMetadata)] = []
        for await t in source.triggers() {
            let r = try await record(await session.capture(PhotoSettings(exposedAfter: t.instant)))
            photos.append((t, try #require(r.photos.first, "trigger \(t.sequence)'s capture: \(r.events)").metadata))
        }
        let steps: [(duration: Duration, gain: Gain)] = [(.microseconds(1000), Gain(1)), (.microseconds(3000), Gain(2)), (.microseconds(6000), Gain(1))]
        let bracketAt = try #require(photos.last?.1.sensorTimestamp) + .seconds(2)
        let bracket = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(steps), exposedAfter: bracketAt)))
        expectOrder(bracket, steps: 3)
        let seqs = bracket.photos.map(\.metadata.sequence)
        try #require(seqs.count == 3, "the bracket's photos: \(bracket.events)")
        #expect(seqs.max()! - seqs.min()! == 2, "frames \(seqs)")
        for p in bracket.photos { #expect(p.metadata.exposureStart! >= bracketAt) }

        // Every frame up to the last photo is in the observer's buffer.
        var byFrame: [UInt32: FrameMetadata] = [:]
        let last = bracket.photos.map(\.metadata.sequence).max()!
        for await m in frames {
            byFrame[m.sequence] = m
            if m.sequence >= last { break }
        }
        // The bracket starts close to its instant: within the pipeline and the latest landing
        // of the first frame exposed after it.
        let firstAfter = byFrame.values.filter { $0.exposureStart.map { $0 >= bracketAt } ?? false }.map(\.sequence).min()!
        let lag = Int(seqs.min()!) - Int(firstAfter)
        #expect(lag >= 0 && lag <= CaptureSession.pipelineDepth + 5, "the bracket began \(lag) frames after the first frame exposed after its instant")
        for (t, m) in photos {
            #expect(m.exposureStart! >= t.instant, "trigger \(t.sequence)")
            // No earlier frame would have qualified: the one before began before the instant.
            let previous = try #require(byFrame[m.sequence - 1], "frame before \(m.sequence)")
            #expect(previous.exposureStart! < t.instant, "trigger \(t.sequence): frame \(previous.sequence) also qualified")
        }
    }

    @Test("external trigger (the IMX296's trigger_mode): each pulse exposes one frame from its instant for its width + 14.26 µs, none between pulses; a pulse during readout is ignored and counted")
    func externalTrigger() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        o.externalTrigger = true
        let profile = SensorProfile.imx296
        let offset = try #require(profile.externalTrigger).exposureOffset
        #expect(offset == .nanoseconds(14_260))
        let cam = SimulatedCamera(profile: profile, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let width = Duration.microseconds(3000)
        // Fixed exposure, gain and colour gains: nothing to converge, so no start-up frames.
        try await session.start(stream: StreamRequest(role: .viewfinder, width: 640, height: 480), preparedBracketCount: 1,
                                controls: CameraControls(aeEnabled: false, exposureTime: width + offset, analogueGain: Gain(1), awbEnabled: false,
                                                         colourGains: profile.colour.gains(kelvin: 5000)))
        let frames = await session.frames(buffering: 64)
        let t0 = MonotonicClock.now() + .seconds(1)
        let readout = profile.fullResolution.readoutTime
        // The third pulse comes while the second frame is read out: the sensor ignores it.
        let pulses = [t0, t0 + .milliseconds(100), t0 + .milliseconds(100) + width + readout / 2, t0 + .milliseconds(300)]
        var photos: [FrameMetadata] = []
        for (i, p) in pulses.enumerated() {
            let accepted = try cam.pulse(at: p, width: width)
            #expect(accepted == (i != 2), "pulse \(i)")
            if i == 2 { continue }
            let r = try await record(await session.capture(PhotoSettings(exposedAfter: p)))
            photos.append(r.photos[0].metadata)
        }
        #expect(photos.map(\.sequence) == [0, 1, 2], "one frame per pulse, in order")
        for (m, p) in zip(photos, [pulses[0], pulses[1], pulses[3]]) {
            #expect(m.exposureStart == p, "frame \(m.sequence) began exposing \(String(describing: m.exposureStart.map { $0 - p })) after its pulse")
            #expect(m.exposureTime == width + offset)
        }
        #expect(cam.pulsesIgnored == 1)
        // The frames the session saw are exactly the three pulses' frames: nothing free-ran.
        var seen: [UInt32] = []
        for await m in frames {
            seen.append(m.sequence)
            if m.sequence >= 2 { break }
        }
        #expect(seen == [0, 1, 2])
        #expect(throws: ShutterbugError.self) { try cam.pulse(at: t0 + .seconds(1), width: .seconds(20)) }
    }

    @Test("external trigger, the capture asked for only after the pulse's frame came back: the session kept the frame, and it is the photo (lag 0); a frame from before the instant is not")
    func externalTriggerLateCapture() async throws {
        var o = SimulationOptions()
        // Real time: in virtual time a frame happens only while something waits on it.
        o.clock = .realTime
        o.externalTrigger = true
        let profile = SensorProfile.imx296
        let cam = SimulatedCamera(profile: profile, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let width = Duration.microseconds(2000)
        let offset = try #require(profile.externalTrigger).exposureOffset
        try await session.start(stream: StreamRequest(role: .viewfinder, width: 640, height: 480), preparedBracketCount: 1,
                                controls: CameraControls(aeEnabled: false, exposureTime: width + offset, analogueGain: Gain(1), awbEnabled: false,
                                                         colourGains: profile.colour.gains(kelvin: 5000)))
        let frames = await session.frames(buffering: 16)
        var iterator = frames.makeAsyncIterator()
        let t0 = MonotonicClock.now() + .milliseconds(300)
        for (i, p) in [t0, t0 + .milliseconds(200)].enumerated() {
            #expect(try cam.pulse(at: p, width: width))
            // The frame is back before anyone asks for it.
            let m = try #require(await iterator.next())
            #expect(m.sequence == UInt32(i))
            let r = try await record(await session.capture(PhotoSettings(exposedAfter: p)))
            #expect(r.photos.first?.metadata.sequence == UInt32(i))
            #expect(r.photos.first?.metadata.exposureStart == p)
        }
        // The same through captureFrame.
        let p = t0 + .milliseconds(400)
        #expect(try cam.pulse(at: p, width: width))
        _ = try #require(await iterator.next())
        let photo = try await session.captureFrame(exposedAfter: p, timeout: .seconds(1))
        #expect(photo.metadata.exposureStart == p)
        photo.release()
        // An instant after the kept frame's exposure began: not that frame (it waits for the next).
        let later = p + .milliseconds(50)
        await #expect(throws: ShutterbugError.self) { _ = try await session.captureFrame(exposedAfter: later, timeout: .milliseconds(300)) }
        await session.stop()
    }
}
