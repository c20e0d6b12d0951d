import Capture
import ShutterbugCore
import SimulatedCamera
import Testing

/// libcamera 0.5.2 on the Pi returns the frames its AGC/AWB spend converging after start,
/// flagged start-up; nothing may capture from them.
@Suite("Start-up frames are shown, never captured", .timeLimit(.minutes(2)))
struct StartupFrameTests {
    /// A real-time camera (so `start` does not wait for a warm-up) with many start-up frames
    /// at a fast frame rate: whatever is asked for at once meets start-up frames first.
    func session(startupFrames: Int) async throws -> (CaptureSession, SimulatedCamera) {
        var o = SimulationOptions()
        o.clock = .realTime
        o.landing = .early
        o.startupFrames = startupFrames
        let cam = SimulatedCamera(profile: .imx219, options: o)
        let session = CaptureSession(backend: cam)
        try await session.start(stream: StreamRequest(role: .viewfinder, width: 640, height: 480), preparedBracketCount: 3)
        return (session, cam)
    }

    @Test("a bracket, a lock and a trigger asked for at start take only frames after the start-up frames")
    func nothingFromStartup() async throws {
        let startup = 12
        // Bracket.
        do {
            let (session, cam) = try await session(startupFrames: startup)
            defer { cam.release() }
            let steps: [(duration: Duration, gain: Gain)] = [(.microseconds(2000), Gain(1)), (.microseconds(4000), Gain(2)), (.microseconds(8000), Gain(1))]
            let r = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(steps))))
            #expect(r.photos.count == 3)
            #expect(r.photos.allSatisfy { $0.metadata.sequence >= UInt32(startup) }, "frames \(r.photos.map(\.metadata.sequence))")
            await session.stop()
        }
        // Exposure lock: its first frame is a settled one even though start-up frames carry it.
        do {
            let (session, cam) = try await session(startupFrames: startup)
            defer { cam.release() }
            let result = try await session.configure { $0.customExposure = (.microseconds(5000), Gain(2)) }
            let point = try #require(result.exposure)
            #expect(point.sequence >= UInt32(startup), "lock reported frame \(point.sequence)")
            await session.stop()
        }
        // Trigger at the very start.
        do {
            let (session, cam) = try await session(startupFrames: startup)
            defer { cam.release() }
            let photo = try await session.captureFrame(exposedAfter: cam.now, timeout: .seconds(2))
            #expect(photo.metadata.sequence >= UInt32(startup), "trigger took frame \(photo.metadata.sequence)")
            photo.release()
            await session.stop()
        }
    }

    @Test("a monitor sees the start-up frames first, flagged, then settled ones; the AGC converges over them")
    func monitorShowsThem() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        let cam = SimulatedCamera(profile: .imx477, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        try await session.prepare(streams: [StreamRequest(role: .viewfinder)], preparedBracketCount: 1)
        let monitor = await session.requests(count: 16)
        try await session.start()
        var seen: [CaptureSession.RequestRecord] = []
        for await r in monitor { seen.append(r) }
        await session.stop()
        #expect(seen.prefix(6).allSatisfy { $0.status == .startup })
        #expect(seen.dropFirst(6).allSatisfy { $0.status == .complete })
        let first = try #require(seen.first?.metadata.exposureTime), last = try #require(seen.last?.metadata.exposureTime)
        #expect(first < last * 0.9, "the AGC starts off the scene and converges: \(first) then \(last)")
    }
}
