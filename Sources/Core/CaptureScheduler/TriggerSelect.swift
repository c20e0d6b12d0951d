import ShutterbugCore

/// Trigger-to-frame selection as a pure state machine: each waiter wants the first frame whose
/// exposure began at or after its instant (`SensorTimestamp - ExposureTime >= instant`,
/// CAMERA-FACTS §5; for a camera that does not report its exposure, the earliest it can have
/// begun), and gives up at its deadline on the camera's clock.
public struct TriggerSelect: Sendable {
    public struct Waiter: Sendable, Hashable {
        public var id: Int
        public var instant: SensorTime
        public var deadline: SensorTime
    }

    private var waiters: [Waiter] = []

    public init() {}

    public var isEmpty: Bool { waiters.isEmpty }

    public mutating func add(id: Int, exposedAfter instant: SensorTime, deadline: SensorTime) {
        waiters.append(Waiter(id: id, instant: instant, deadline: deadline))
    }

    public mutating func remove(_ id: Int) { waiters.removeAll { $0.id == id } }

    /// The waiter this frame satisfies (the oldest whose instant the exposure began after), if
    /// any; it is removed. A start-up or failed frame satisfies nobody.
    public mutating func complete(status: CompletedRequest.Status, metadata m: FrameMetadata) -> Waiter? {
        guard status == .complete, let i = waiters.firstIndex(where: { m.exposed(after: $0.instant) }) else { return nil }
        return waiters.remove(at: i)
    }

    /// Every waiter, removed.
    public mutating func removeAll() -> [Waiter] {
        defer { waiters.removeAll() }
        return waiters
    }

    /// Waiters whose deadline passed; removed.
    public mutating func tick(now: SensorTime) -> [Waiter] {
        let expired = waiters.filter { now >= $0.deadline }
        waiters.removeAll { now >= $0.deadline }
        return expired
    }
}
