import CaptureScheduler
import ShutterbugCore
import Testing

@Suite("Trigger queue: every trigger a capture or a counted drop, never an unbounded queue")
struct TriggerQueueTests {
    static func t(_ i: Int) -> Trigger { Trigger(instant: SensorTime(nanoseconds: Int64(i) * 1_000_000), source: "test", sequence: UInt64(i)) }

    @Test("queue: one capturing, up to the limit waiting in order, the rest dropped")
    func queue() throws {
        var q = try TriggerQueue(policy: .queue, limit: 2)
        #expect(q.arrived(Self.t(1)) == [.capture(Self.t(1))])
        #expect(q.arrived(Self.t(2)) == [])
        #expect(q.arrived(Self.t(3)) == [])
        #expect(q.arrived(Self.t(4)) == [.dropped(Self.t(4))])
        #expect(q.finished(failed: false) == [.capture(Self.t(2))])
        #expect(q.finished(failed: true) == [.capture(Self.t(3))])
        #expect(q.finished(failed: false) == [])
        #expect(q.counts == { var c = TriggerCounts(); c.seen = 4; c.captured = 2; c.failed = 1; c.dropped = 1; return c }())
        #expect(q.balanced && q.busy == nil)
    }

    @Test("concurrency: up to N captures at once (a hardware-triggered sensor), finishing oldest first; refused triggers are seen and dropped")
    func concurrent() throws {
        var q = try TriggerQueue(policy: .drop, concurrency: 2)
        #expect(q.arrived(Self.t(1)) == [.capture(Self.t(1))])
        #expect(q.arrived(Self.t(2)) == [.capture(Self.t(2))])
        #expect(q.arrived(Self.t(3)) == [.dropped(Self.t(3))])
        #expect(q.inFlight == [Self.t(1), Self.t(2)] && q.busy == Self.t(1))
        #expect(q.finished(failed: false) == [])
        #expect(q.busy == Self.t(2))
        #expect(q.arrived(Self.t(4)) == [.capture(Self.t(4))])
        #expect(q.refused(Self.t(5)) == [.dropped(Self.t(5))])
        #expect(q.balanced)
        _ = q.finished(failed: true)
        _ = q.finished(failed: false)
        #expect(q.counts == { var c = TriggerCounts(); c.seen = 5; c.captured = 2; c.failed = 1; c.dropped = 2; return c }())
        #expect(q.balanced && q.busy == nil)
        #expect(throws: ShutterbugError.self) { try TriggerQueue(policy: .drop, concurrency: 0) }
    }

    @Test("coalesce: one waits, a newer trigger replaces it and the older is counted")
    func coalesce() throws {
        var q = try TriggerQueue(policy: .coalesce)
        _ = q.arrived(Self.t(1))
        #expect(q.arrived(Self.t(2)) == [])
        #expect(q.arrived(Self.t(3)) == [.coalesced(Self.t(2))])
        #expect(q.arrived(Self.t(4)) == [.coalesced(Self.t(3))])
        #expect(q.finished(failed: false) == [.capture(Self.t(4))], "the capture is exposed after the newest")
        _ = q.finished(failed: false)
        #expect(q.counts.coalesced == 2 && q.counts.captured == 2 && q.balanced)
    }

    @Test("drop: busy means dropped")
    func drop() throws {
        var q = try TriggerQueue(policy: .drop, limit: 5)
        _ = q.arrived(Self.t(1))
        #expect(q.arrived(Self.t(2)) == [.dropped(Self.t(2))])
        #expect(q.finished(failed: false) == [])
        #expect(q.arrived(Self.t(3)) == [.capture(Self.t(3))])
        #expect(q.counts.dropped == 1 && q.balanced)
    }

    @Test("stopping: the capture in progress finishes, the waiting triggers are dropped and counted")
    func stopping() throws {
        var q = try TriggerQueue(policy: .queue, limit: 4)
        _ = q.arrived(Self.t(1))
        _ = q.arrived(Self.t(2))
        _ = q.arrived(Self.t(3))
        #expect(q.finished(failed: false, stopping: true) == [.dropped(Self.t(2)), .dropped(Self.t(3))])
        #expect(q.busy == nil && q.waiting.isEmpty && q.counts.dropped == 2 && q.balanced)
    }

    @Test("a limit outside 1...64 is refused with the range")
    func limits() {
        #expect(throws: ShutterbugError.self) { try TriggerQueue(policy: .queue, limit: 0) }
        #expect(throws: ShutterbugError.self) { try TriggerQueue(policy: .queue, limit: 65) }
    }

    @Test("property: storms of arrivals and finishes in any order keep every trigger accounted for and the queue bounded", arguments: TriggerPolicy.allCases)
    func storms(policy: TriggerPolicy) throws {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var q = try TriggerQueue(policy: policy, limit: Int.random(in: 1...8, using: &rng))
            var n = 0
            var captures = 0
            for _ in 0..<Int.random(in: 1...300, using: &rng) {
                let actions: [TriggerQueue.Action]
                if Bool.random(using: &rng) || q.busy == nil {
                    n += 1
                    actions = q.arrived(Self.t(n))
                } else {
                    actions = q.finished(failed: Int.random(in: 0..<10, using: &rng) == 0)
                }
                captures += actions.filter { if case .capture = $0 { true } else { false } }.count
                #expect(q.waiting.count <= q.limit)
                #expect(q.balanced, "\(policy): \(q.counts), waiting \(q.waiting.count), busy \(q.busy != nil)")
            }
            #expect(q.counts.seen == n)
            #expect(captures == q.counts.captured + q.counts.failed + (q.busy == nil ? 0 : 1))
        }
    }

    @Test("lags from the trigger's instant, and nearest-rank percentiles")
    func lags() {
        let edge = SensorTime(nanoseconds: 10_000_000_000)
        let lag = TriggerLag(trigger: edge, exposureStart: edge + .microseconds(23_400), delivered: edge + .milliseconds(61), filesWritten: edge + .milliseconds(180))
        #expect(lag.toExposureStart == .microseconds(23_400))
        #expect(lag.toDelivered == .milliseconds(61))
        #expect(lag.toFiles == .milliseconds(180))
        let d = LagDistribution((1...100).reversed().map { Duration.milliseconds($0) })
        #expect(d?.p50 == .milliseconds(50) && d?.p99 == .milliseconds(99) && d?.max == .milliseconds(100) && d?.count == 100)
        #expect(LagDistribution([]) == nil)
        #expect(LagDistribution([.milliseconds(7)])?.p99 == .milliseconds(7))
    }
}
