import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Synchronization
import Testing

/// A sink that keeps every frame it is offered until told to let go: the slowest display.
final class HoardingSink: FrameSink {
    let name = "hoarder"
    private let frames = Mutex<[SinkFrame]>([])
    /// Cleared, it declines every frame (so a test can end with nothing held).
    let keeping = Atomic<Bool>(true)
    func process(_ frame: SinkFrame) -> Bool {
        guard keeping.load(ordering: .relaxed) else { return false }
        frames.withLock { $0.append(frame) }
        return true
    }
    var count: Int { frames.withLock { $0.count } }
    /// Releases everything held, each frame twice (a second release must change nothing).
    func releaseAll() {
        let held = frames.withLock { f -> [SinkFrame] in
            defer { f.removeAll() }
            return f
        }
        for f in held { f.release(); f.release() }
    }
}

/// A sink that looks and lets go at once.
final class CountingSink: FrameSink {
    let name = "counter"
    let seen = Atomic<Int>(0)
    func process(_ frame: SinkFrame) -> Bool {
        seen.add(1, ordering: .relaxed)
        return false
    }
}

@Suite("Frame sinks beside the photo path", .timeLimit(.minutes(2)))
struct FrameSinkTests {
    @Test("a sink that holds frames for a long time changes nothing in a bracket, and every buffer comes back once",
          arguments: [SensorProfile.imx219, .imx477, .imx708])
    func slowSink(profile: SensorProfile) async throws {
        let hoarder = HoardingSink(), counter = CountingSink()
        let (session, cam) = try await simulatedSession(profile, landing: .early, sinks: [hoarder, counter])
        defer { cam.release() }
        let steps: [(duration: Duration, gain: Gain)] = [(.microseconds(1000), Gain(1)), (.microseconds(4000), Gain(1)), (.microseconds(16000), Gain(2)), (.microseconds(2000), Gain(4))]
        let r = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(steps))))
        expectOrder(r, steps: steps.count)
        let seqs = r.photos.map(\.metadata.sequence).sorted()
        #expect(seqs.last! - seqs.first! == UInt32(steps.count - 1), "\(profile.model): frames \(seqs)")
        #expect(r.resolved?.retries == 0)

        let stats = await session.sinkStatistics
        #expect(hoarder.count == 1, "the hoarder holds the one frame it has a buffer for")
        #expect(stats[0].kept == 1 && stats[0].dropped == stats[0].offered - 1 && stats[0].dropped > 0, "\(stats[0])")
        #expect(stats[1].offered > 0 && stats[1].dropped == 0 && counter.seen.load(ordering: .relaxed) == stats[1].offered, "\(stats[1])")

        // Every slot is accounted for; once the photos are back, the hoarder's is the only one held.
        #expect(await held(session, settlingAt: 1) == 1)
        let ledger = await session.slotLedger
        #expect(ledger.queuedCount + ledger.heldCount + ledger.spareCount == ledger.slots)
        #expect(ledger.queuedCount <= CaptureSession.pipelineDepth)
        // Released, it is offered frames again and takes the next one.
        let before = await session.sinkStatistics[0].kept
        hoarder.releaseAll()
        #expect(await heldAfterRelease(session) == 0)
        // Frames come again (in virtual time only while something waits on them).
        _ = try await record(await session.capture(PhotoSettings()))
        let kept = await session.sinkStatistics[0].kept
        #expect(kept > before)
        #expect(await held(session, settlingAt: 1) == 1)
        // Told to stop keeping, and let go: nothing is held.
        hoarder.keeping.store(false, ordering: .relaxed)
        hoarder.releaseAll()
        #expect(await heldAfterRelease(session) == 0)
    }

    @Test("frames a sink holds across stop are given back once, after it")
    func acrossStop() async throws {
        let hoarder = HoardingSink()
        let (session, cam) = try await simulatedSession(.imx477, landing: .early, sinks: [hoarder])
        defer { cam.release() }
        _ = try await record(await session.capture(PhotoSettings()))
        #expect(hoarder.count == 1)
        await session.stop()
        #expect(await held(session, settlingAt: 1) == 1, "held across stop until released")
        hoarder.releaseAll()
        #expect(await heldAfterRelease(session) == 0)
    }
}
