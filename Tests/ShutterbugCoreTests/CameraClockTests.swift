import ShutterbugCore
import Testing

@Suite("Camera clocks: monotonic and virtual, per job, never global")
struct CameraClockTests {
    @Test("a virtual clock moves with its frames and jumps over a wait, never back; two clocks never move each other")
    func virtual() async {
        let start = SensorTime(nanoseconds: 1_000_000_000)
        let a = VirtualCameraClock(start: start), b = VirtualCameraClock(start: start)
        a.advance(to: start + .seconds(5))
        a.advance(to: start + .seconds(2))
        #expect(a.now == start + .seconds(5), "never back")
        await a.sleep(until: start + .seconds(3600)) { false }
        #expect(a.now == start + .seconds(3600), "a wait with no camera running passes at once")
        #expect(b.now == start, "another job's clock is its own")
    }

    @Test("a monotonic clock's wait returns when told to stop, and at once when its task is cancelled (no spinning to the deadline)")
    func monotonic() async {
        let clock = MonotonicCameraClock()
        let began = ContinuousClock.now
        // An hour's deadline: a wait that ignored the stop or spun on the cancelled sleep would
        // take it; one that returns does so in the time a busy machine takes to run the task.
        await clock.sleep(until: clock.now + .seconds(3600)) { true }
        let task = Task { await clock.sleep(until: clock.now + .seconds(3600)) { false } }
        task.cancel()
        await task.value
        #expect(ContinuousClock.now - began < .seconds(300), "returned on stop and on cancellation, not at the hour's deadline")
        let short = clock.now + .milliseconds(50)
        await clock.sleep(until: short) { false }
        #expect(clock.now >= short)
    }
}
