import ShutterbugCore
import ShutterbugPosix
import SimulatedCamera
import Synchronization
import TestSupport
import Testing

/// Stopping from several places at once: a service that stops its session (which stops the
/// camera) while its shutdown releases the camera. Two joins of one thread once hung for good.
@Suite("Stops and joins from several threads at once", .timeLimit(.minutes(2)))
struct ConcurrentStopTests {
    @Test("an OS thread joined by four threads at once: every join returns once the thread ends")
    func joinFromFour() async throws {
        let gate = ConditionLock()
        let open = Mutex(false)
        let worker = OSThread(name: "sb-test-worker") {
            gate.withLock { while !open.withLock({ $0 }) { gate.wait() } }
        }
        let joined = Mutex(0)
        let joiners = (0..<4).map { _ in OSThread(name: "sb-test-joiner") { worker.join(); joined.withLock { $0 += 1 } } }
        gate.withLock {
            open.withLock { $0 = true }
            gate.broadcast()
        }
        try await withDeadline(.seconds(30), "four joins of one thread to return") {
            try await offPool { for j in joiners { j.join() } }
        }
        #expect(joined.withLock { $0 } == 4)
        worker.join()  // once more, after: returns at once
    }

    @Test("a simulated camera stopped and released from several threads at once, while streaming: every call returns, the queued requests come back cancelled once")
    func simulatedCamera() async throws {
        for round in 0..<20 {
            var o = SimulationOptions()
            o.clock = round % 2 == 0 ? .virtual : .realTime
            o.seed = UInt64(round)
            let cam = SimulatedCamera(profile: .imx219, options: o)
            _ = try cam.configure([StreamRequest(role: .viewfinder, width: 320, height: 240)])
            let slots = try cam.allocate()
            try cam.start(controls: .none)
            for s in 0..<slots { try cam.queue(slot: s, cookie: UInt64(s), controls: .none) }
            let stoppers = (0..<4).map { i in OSThread(name: "sb-test-stop") { if i == 3 { cam.release() } else { try? cam.stop() } } }
            try await withDeadline(.seconds(30), "round \(round): three stops and a release at once to return") {
                try await offPool { for t in stoppers { t.join() } }
            }
            // Every request is accounted for once: completed before the stop, or cancelled by it.
            var cookies: [UInt64] = []
            while let c = cam.completions.tryNext() { cookies.append(c.cookie) }
            #expect(cookies.sorted() == (0..<UInt64(slots)).map { $0 }, "round \(round): each of the \(slots) requests back once: \(cookies)")
        }
    }
}
