import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Synchronization
import Testing

/// A sink that notes whether each frame was offered on a given event loop's thread.
final class ThreadCheckingSink: FrameSink {
    let name = "thread-check"
    let loop: EventLoopExecutor
    let offered = Atomic<Int>(0)
    let offThread = Atomic<Int>(0)
    init(_ loop: EventLoopExecutor) { self.loop = loop }
    func process(_ frame: SinkFrame) -> Bool {
        offered.add(1, ordering: .relaxed)
        if !loop.isCurrent { offThread.add(1, ordering: .relaxed) }
        return false
    }
}

@Suite("A session on an event loop of its own (as on libcamera, where the camera's thread runs it)", .timeLimit(.minutes(2)))
struct SessionExecutorTests {
    @Test("a bracket, a lock and a request monitor work the same on the loop, and every frame is handled on its thread",
          arguments: [SensorProfile.imx477, .imx708])
    func bracketOnTheLoop(profile: SensorProfile) async throws {
        let loop = EventLoopExecutor(name: "test-session")
        let sink = ThreadCheckingSink(loop)
        let (session, cam) = try await simulatedSession(profile, landing: .early, sinks: [sink], executor: loop)
        defer { cam.release() }
        let seen = Atomic<Int>(0)
        let monitorOff = Atomic<Int>(0)
        let monitor = await session.requests(count: 40) { _ in
            seen.add(1, ordering: .relaxed)
            if !loop.isCurrent { monitorOff.add(1, ordering: .relaxed) }
        }
        let steps: [(duration: Duration, gain: Gain)] = [(.microseconds(1000), Gain(1)), (.microseconds(4000), Gain(1)), (.microseconds(16000), Gain(2))]
        let r = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(steps))))
        expectOrder(r, steps: steps.count)
        let seqs = r.photos.map(\.metadata.sequence).sorted()
        #expect(seqs.last! - seqs.first! == UInt32(steps.count - 1), "\(profile.model): consecutive frames \(seqs)")
        let result = try await session.configure { $0.customExposure = (.microseconds(3000), Gain(3)) }
        let sync = try #require(result.exposure)
        #expect(profile.delays.landingOffsets.contains(sync.framesAfterRequest), "landed \(sync.framesAfterRequest) frames after")
        for await _ in monitor {}
        #expect(seen.load(ordering: .relaxed) == 40)
        #expect(monitorOff.load(ordering: .relaxed) == 0, "the monitor's handler ran on the loop")
        #expect(sink.offered.load(ordering: .relaxed) > 0)
        #expect(sink.offThread.load(ordering: .relaxed) == 0, "every frame was handled on the loop's thread")
        // Each frame comes from the simulator's thread: one delivery on the loop per frame,
        // and nothing more (no continuation, no hop), besides this test's own calls.
        let stats = loop.statistics
        let frameStats = await session.statistics
        let frames = frameStats.frames + frameStats.startup
        #expect(stats.jobs <= frames + 20, "\(stats) for \(frames) frames")
        await session.stop()
    }
}
