import ShutterbugCore
import SimulatedCamera
import TestSupport
import Testing

/// Virtual time's frame holds (`holdFrames`), as a trigger job uses them.
@Suite("Simulated frame holds", .timeLimit(.minutes(3)))
struct FrameHoldTests {
    /// A trigger job cancels its feeder while it waits at a hold. Cancelling runs the hold's
    /// cancellation handler (which takes the camera's lock) under the task's own lock; the
    /// sensor thread resuming the same waiter must not hold the camera's lock while it does,
    /// or each waits for the other for good (a `trigger` that took every photo and never
    /// printed its summary, 2 runs in 150).
    @Test("holds cancelled as the clock reaches them: the camera and the canceller both go on")
    func cancelledAsReached() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        let cam = SimulatedCamera(profile: .imx477, options: o)
        defer { cam.release() }
        _ = try cam.configure([StreamRequest(role: .viewfinder, width: 320, height: 240)])
        let slots = try cam.allocate()
        try cam.start(controls: .none)
        defer { try? cam.stop() }
        for s in 0..<slots { try cam.queue(slot: s, cookie: UInt64(s), controls: .none) }
        let consumer = Task {
            var cookie = UInt64(slots)
            while let c = try await cam.completions.next(timeout: .seconds(30)) {
                try cam.queue(slot: c.slot, cookie: cookie, controls: .none)
                cookie += 1
            }
        }
        defer { consumer.cancel() }
        let rounds = 600
        let reached = try await withDeadline(.seconds(60), "\(rounds) holds set and cancelled as the camera reached them") {
            var reached = 0
            for i in 0..<rounds {
                // Instants a fraction of a frame to a frame ahead, so the clock reaches some
                // as the cancel comes.
                let at = cam.now + .microseconds(Int64(i % 9) * 4_000)
                let waiter = Task { await cam.holdFrames(1, until: at) }
                for _ in 0..<(i % 4) { await Task.yield() }
                waiter.cancel()
                await waiter.value
                if cam.now >= at { reached += 1 }
            }
            return reached
        }
        // The clock went on through the rounds (some holds were reached, not all cancelled first).
        #expect(reached > 0, "no hold was reached: the test raced nothing")
        // A hold reached (not cancelled) stays until lifted, as the feeder's does.
        await cam.holdFrames(1, until: nil)
        let before = cam.now
        try await withDeadline(.seconds(30), "a frame after the last hold was lifted") {
            while cam.now <= before { await Task.yield() }
        }
    }
}
