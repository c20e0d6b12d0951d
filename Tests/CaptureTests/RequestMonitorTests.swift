import Capture
import ShutterbugCore
import SimulatedCamera
import Synchronization
import Testing

@Suite("Watching requests land: monitors and controls sent with a chosen request", .timeLimit(.minutes(2)))
struct RequestMonitorTests {
    func preparedSession(_ profile: SensorProfile, landing: SimulationOptions.Landing) throws -> (CaptureSession, SimulatedCamera) {
        var o = SimulationOptions()
        o.clock = .virtual
        o.landing = landing
        let cam = SimulatedCamera(profile: profile, options: o)
        return (CaptureSession(backend: cam), cam)
    }

    @Test("a monitor from before start sees every request from 0 in order, exactly as many as it asked for",
          arguments: [SensorProfile.imx219, .imx477, .imx708])
    func everyRequest(profile: SensorProfile) async throws {
        let (session, cam) = try preparedSession(profile, landing: .early)
        defer { cam.release() }
        try await session.prepare(streams: [StreamRequest(role: .viewfinder)], preparedBracketCount: 1)
        let monitor = await session.requests(count: 20)
        try await session.start()
        var seen: [CaptureSession.RequestRecord] = []
        for await r in monitor { seen.append(r) }
        await session.stop()
        #expect(seen.map(\.request) == Array(0..<20), "a demand-paced camera keeps going past its warm-up for the monitor")
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $1.metadata.sequence == $0.metadata.sequence + 1 })
        #expect(seen.allSatisfy { $0.carriedControlsFor == nil })
    }

    @Test("controls sent with request N go out with request N, and land the camera's control delay later",
          arguments: [(SensorProfile.imx219, SimulationOptions.Landing.early), (.imx477, .late), (.imx708, .early)])
    func landing(profile: SensorProfile, landing: SimulationOptions.Landing) async throws {
        let (session, cam) = try preparedSession(profile, landing: landing)
        defer { cam.release() }
        try await session.prepare(streams: [StreamRequest(role: .viewfinder)], preparedBracketCount: 1)
        let monitor = await session.requests(count: 24)
        let target = await session.timing.quantise(.microseconds(3000))
        try await session.send(CameraControls(aeEnabled: false, exposureTime: target, analogueGain: Gain(2)), withRequest: 10)
        try await session.start()
        var seen: [CaptureSession.RequestRecord] = []
        for await r in monitor { seen.append(r) }
        await session.stop()
        let carrier = try #require(seen.first { $0.carriedControlsFor != nil })
        #expect(carrier.request == 10 && carrier.carriedControlsFor == 10)
        func carries(_ m: FrameMetadata) -> Bool {
            guard let e = m.exposureTime, let g = m.analogueGain else { return false }
            return abs((e - target).nanosecondsValue) < 1000 && g.value == 2
        }
        let first = try #require(seen.first { carries($0.metadata) })
        let delay = Int(first.metadata.sequence) - Int(carrier.metadata.sequence)
        // On the frame the camera's timing says: the earliest landing, or the latest when late.
        let offsets = await session.timing.landingOffsets
        #expect(delay == (landing == .late ? offsets.upperBound : offsets.lowerBound), "\(profile.model): landed \(delay) frames after its request, offsets \(offsets)")
        let before = seen.filter { $0.metadata.sequence < first.metadata.sequence }
        #expect(before.count >= 12 && before.allSatisfy { !carries($0.metadata) })
    }

    @Test("a handler monitor sees the same requests in order, and its stream ends after them")
    func handlerMonitor() async throws {
        let (session, cam) = try preparedSession(.imx708, landing: .early)
        defer { cam.release() }
        try await session.prepare(streams: [StreamRequest(role: .viewfinder)], preparedBracketCount: 1)
        let seen = Mutex<[UInt64]>([])
        let done = await session.requests(count: 15) { r in seen.withLock { $0.append(r.request) } }
        let stream = await session.requests(count: 15)
        try await session.start()
        for await _ in done {}
        var streamed: [UInt64] = []
        for await r in stream { streamed.append(r.request) }
        await session.stop()
        #expect(seen.withLock { $0 } == Array(0..<15))
        #expect(streamed == Array(0..<15))
    }

    @Test("a request already queued is refused with the first one still to come")
    func alreadyQueued() async throws {
        let (session, cam) = try preparedSession(.imx219, landing: .early)
        defer { cam.release() }
        try await session.start(stream: StreamRequest(role: .viewfinder), preparedBracketCount: 1)
        await #expect {
            try await session.send(CameraControls(analogueGain: Gain(2)), withRequest: 1)
        } throws: { e in
            let text = "\(e)"
            return text.contains("request 1 has already been queued") && text.contains("next request to go out is")
        }
        await session.stop()
    }

    @Test("a camera that goes away ends a monitor, and the session says why")
    func cameraLost() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        o.faults.disconnectAtFrame = 20
        let cam = SimulatedCamera(profile: .imx219, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        try await session.prepare(streams: [StreamRequest(role: .viewfinder)], preparedBracketCount: 1)
        let done = await session.requests(count: 1000) { _ in }
        try await session.start()
        for await _ in done {}
        let reason = try #require(await session.failureReason)
        #expect(reason.code == .cameraLost, "\(reason)")
        await session.stop()
        #expect(await session.failureReason == nil, "stop is not a failure")
    }

    @Test("a stopped session refuses to start again, and says to make a new one")
    func runsOnce() async throws {
        let (session, cam) = try preparedSession(.imx477, landing: .early)
        defer { cam.release() }
        try await session.start(stream: StreamRequest(role: .viewfinder), preparedBracketCount: 1)
        await session.stop()
        await #expect {
            try await session.start()
        } throws: { e in "\(e)".contains("make a new CaptureSession") }
    }

    @Test("stop ends a monitor that wants more")
    func stopEnds() async throws {
        let (session, cam) = try preparedSession(.imx477, landing: .early)
        defer { cam.release() }
        try await session.start(stream: StreamRequest(role: .viewfinder), preparedBracketCount: 1)
        let monitor = await session.requests(count: 1_000_000)
        var n = 0
        for await _ in monitor {
            n += 1
            if n == 5 { await session.stop() }
        }
        #expect(n >= 5 && n < 1_000_000)
    }
}
