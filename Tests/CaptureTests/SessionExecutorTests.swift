@testable import Capture
import CaptureScheduler
import ShutterbugCore
import ShutterbugPosix
import SimulatedCamera
import Synchronization
import Glibc
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

    /// A session starved of CPU (other work on a busy two-core board) falls behind its camera:
    /// the frames it has not handled yet are progress, not a stall. The loop is held by a job
    /// while the camera delivers a frame and the session's clock jumps 10 s (far past the 2 s
    /// stall limit); a tick then, with the frame still waiting, must not fail the bracket.
    @Test("a session behind its camera (completions waiting, the clock far on) is not judged stalled; the bracket completes")
    func behindIsNotStalled() async throws {
        final class Offset: Sendable { let ns = Atomic<Int64>(0) }
        let offset = Offset()
        let loop = EventLoopExecutor(name: "test-starved")
        // Real time: the sensor keeps its clock and takes the requests it holds while the
        // session is held (virtual time would wait for the session).
        var o = SimulationOptions()
        o.clock = .realTime
        o.landing = .early
        let cam = SimulatedCamera(profile: .imx219, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam, clock: { [cam] in cam.now + .nanoseconds(offset.ns.load(ordering: .relaxed)) }, executor: loop)
        try await session.start(stream: StreamRequest(role: .viewfinder, width: 640, height: 480), preparedBracketCount: 3)
        let steps: [(duration: Duration, gain: Gain)] = [(.microseconds(1000), Gain(1)), (.microseconds(4000), Gain(1)), (.microseconds(8000), Gain(2))]
        let events = await session.capture(PhotoSettings(bracket: .manualExposure(steps)))
        let judged = Atomic<Int>(-1)  // what the queue held when the tick ran
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                // The camera runs on; its next frame waits behind this job.
                var polls = 0
                while cam.completions.pendingCount == 0, polls < 10_000 { usleep(1000); polls += 1 }
                judged.store(cam.completions.pendingCount, ordering: .relaxed)
                offset.ns.store(10_000_000_000, ordering: .relaxed)
                session.assumeIsolated { $0.tick() }
                done.resume()
            }
        }
        #expect(judged.load(ordering: .relaxed) > 0, "the camera delivered a frame while the loop was held")
        let r = try await record(events)
        expectOrder(r, steps: steps.count)
        await session.stop()
    }
}
