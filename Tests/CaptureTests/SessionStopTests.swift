@testable import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import TestSupport
import Testing

@Suite("A session's stop gives every slot back")
struct SessionStopTests {
    /// The pump takes a completion from the camera's queue and then waits for the actor; a
    /// `stop` already waiting runs first and empties the ring. The completion is then handled
    /// after `stop` (seen once in CI, under load: a slot held for good, so `waitUntilHeld(0)`
    /// never returned). Here the completion is handed to the session after `stop` directly.
    @Test("a complete frame handled after stop (its completion was on its way as stop ran) is held by nobody: not by the ring stop emptied, and its slot is spare")
    func completionBehindStop() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        let cam = SimulatedCamera(profile: .imx219, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        try await session.start(stream: StreamRequest(role: .video), preparedBracketCount: 1, holding: .frames(4))
        _ = try await record(session.capture(PhotoSettings()))
        let before = await session.slotLedger
        let slot = try #require(before.states.indices.first { before.states[$0] == .queued }, "a request queued with the camera: \(before)")
        var late = try #require(await session.heldFrames.last, "frames held while the capture ran")
        await session.stop()
        // The capture's photo, released, hands its slot back through a task hop.
        try await withDeadline(.seconds(10), "every slot back after stop") { await session.waitUntilHeld(0) }
        #expect(await session.heldFrames.isEmpty, "stop gives the held frames back")
        late.sequence += 10
        await session.handle(CompletedRequest(slot: slot, cookie: 1 << 40, status: .complete, metadata: late, buffers: []))
        let ring = await session.heldFrames.map(\.sequence)
        #expect(ring.isEmpty, "a frame after stop went into the ring: \(ring)")
        let after = await session.slotLedger
        #expect(after.holders == 0 && after.states[slot] != .held(1), "\(after)")
    }
}

/// Virtual time: `clockReached` judges the machines at an instant the camera's clock has
/// reached; an instant it has not (a trigger feeder whose wait was cancelled by a reload) must
/// not fail a capture under way for a stall that never happened.
@Suite("Virtual time: judged only at instants reached", .timeLimit(.minutes(2)))
struct ClockReachedTests {
    @Test("an instant 30 s ahead of the camera's clock fails no capture under way")
    func unreachedInstantIgnored() async throws {
        let (session, cam) = try await simulatedSession(.imx219, stream: StreamRequest(role: .still, width: 640, height: 480))
        // The clock paused where it is: the capture waits for frames that cannot come yet.
        let holder: UInt64 = 1 << 60
        cam.setFrameHold(holder, at: SensorTime(nanoseconds: .min))
        let capture = Task { try await record(session.capture(PhotoSettings(bracket: .exposureBias([-1, 0, 1])))) }
        try await withDeadline(.seconds(30), "the capture under way in the session") {
            while await session.capturesInProgress.isEmpty { try await Task.sleep(for: .milliseconds(1)) }
        }
        await session.clockReached(cam.now + .seconds(30))
        cam.setFrameHold(holder, at: nil)
        let r = try await withDeadline(.seconds(60), "the bracket's three photos") { try await capture.value }
        #expect(r.photos.count == 3)
        await session.stop()
        cam.release()
    }
}
