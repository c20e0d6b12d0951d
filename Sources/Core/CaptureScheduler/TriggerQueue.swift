import ShutterbugCore

/// What happens to a trigger that comes while a capture is already in progress.
public enum TriggerPolicy: String, Sendable, Hashable, CaseIterable {
    /// Wait, in order, up to the queue's limit; past it, dropped.
    case queue
    /// At most one waits: a newer trigger replaces the waiting one, which is counted coalesced
    /// (a burst of presses while busy becomes one capture, exposed after the last of them).
    case coalesce
    /// Dropped while busy.
    case drop
}

/// Counts of what became of every trigger. Always
/// `seen == captured + failed + coalesced + dropped + waiting + in flight`; the edges the
/// kernel itself lost (GPIO `line_seqno` gaps) never reached us and are counted apart.
public struct TriggerCounts: Sendable, Hashable {
    public var seen = 0
    public var captured = 0
    public var failed = 0
    public var coalesced = 0
    public var dropped = 0
    public var kernelDropped = 0
    public init() {}
}

/// Triggers to captures as a pure state machine: up to `concurrency` captures at a time (one,
/// unless each trigger's frame exists already, as with a sensor's hardware trigger), a
/// bounded number waiting by `policy`, every trigger accounted for. Nothing here waits or allocates beyond
/// `limit`: a storm of edges cannot grow a queue or hang the caller.
public struct TriggerQueue: Sendable {
    public enum Action: Sendable, Hashable {
        /// Start a capture exposed after this trigger.
        case capture(Trigger)
        /// This trigger will not be captured (the queue is full, or the policy drops while busy).
        case dropped(Trigger)
        /// This waiting trigger was replaced by a newer one.
        case coalesced(Trigger)
    }

    public static let limitRange = 1...64

    public let policy: TriggerPolicy
    public let limit: Int
    /// Captures that may run at once.
    public let concurrency: Int
    public private(set) var counts = TriggerCounts()
    /// The captures in progress, oldest first (they finish in that order).
    public private(set) var inFlight: [Trigger] = []
    public private(set) var waiting: [Trigger] = []

    /// The oldest capture in progress.
    public var busy: Trigger? { inFlight.first }

    /// - Throws: `.invalidArgument` for a limit or a concurrency outside 1...64.
    public init(policy: TriggerPolicy, limit: Int = 8, concurrency: Int = 1) throws {
        for (name, v) in [("limit", limit), ("concurrency", concurrency)] where !Self.limitRange.contains(v) {
            throw ShutterbugError(.invalidArgument, "the trigger queue \(name) must be in \(Self.limitRange.lowerBound)...\(Self.limitRange.upperBound), not \(v)")
        }
        self.policy = policy
        self.limit = policy == .queue ? limit : 1
        self.concurrency = concurrency
    }

    /// A trigger arrived.
    public mutating func arrived(_ t: Trigger) -> [Action] {
        counts.seen += 1
        guard inFlight.count == concurrency else {
            inFlight.append(t)
            return [.capture(t)]
        }
        switch policy {
        case .queue:
            guard waiting.count < limit else {
                counts.dropped += 1
                return [.dropped(t)]
            }
            waiting.append(t)
            return []
        case .coalesce:
            var out: [Action] = []
            if let old = waiting.first {
                counts.coalesced += 1
                out.append(.coalesced(old))
            }
            waiting = [t]
            return out
        case .drop:
            counts.dropped += 1
            return [.dropped(t)]
        }
    }

    /// The capture in progress ended (its frames are captured; files may still be writing).
    /// Returns the next capture to start, if one waits.
    /// `stopping`: no further capture starts; the waiting triggers are dropped (and returned
    /// as such).
    public mutating func finished(failed: Bool, stopping: Bool = false) -> [Action] {
        guard !inFlight.isEmpty else { return [] }
        if failed { counts.failed += 1 } else { counts.captured += 1 }
        inFlight.removeFirst()
        if stopping {
            let dropped = waiting
            counts.dropped += dropped.count
            waiting = []
            return dropped.map { .dropped($0) }
        }
        guard !waiting.isEmpty else { return [] }
        let next = waiting.removeFirst()
        inFlight.append(next)
        return [.capture(next)]
    }

    /// A trigger that can never be captured, seen and dropped at once (a sensor that ignored
    /// its pulse, or one past `--count`).
    public mutating func refused(_ t: Trigger) -> [Action] {
        counts.seen += 1
        counts.dropped += 1
        return [.dropped(t)]
    }

    /// The source reports edges lost before they reached us (the kernel's `line_seqno` gaps).
    public mutating func lostBySource(_ n: Int) {
        counts.kernelDropped += max(0, n)
    }

    /// Whether every trigger seen is accounted for.
    public var balanced: Bool {
        counts.seen == counts.captured + counts.failed + counts.coalesced + counts.dropped + waiting.count + inFlight.count
    }
}

/// How long a trigger took to become a photo, from its instant: to the start of the chosen
/// frame's exposure (the shutter lag a photographer feels), to the frame being delivered, and
/// to the files being on disk.
public struct TriggerLag: Sendable, Hashable {
    public var toExposureStart: Duration
    public var toDelivered: Duration?
    public var toFiles: Duration?

    public init(trigger: SensorTime, exposureStart: SensorTime, delivered: SensorTime? = nil, filesWritten: SensorTime? = nil) {
        toExposureStart = exposureStart - trigger
        toDelivered = delivered.map { $0 - trigger }
        toFiles = filesWritten.map { $0 - trigger }
    }
}

/// Percentiles of a set of durations (nearest rank).
public struct LagDistribution: Sendable, Hashable {
    public var count: Int
    public var p50: Duration
    public var p99: Duration
    public var max: Duration

    /// `nil` for no values.
    public init?(_ values: [Duration]) {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        func rank(_ p: Double) -> Duration {
            let i = Int((p * Double(sorted.count)).rounded(.up)) - 1
            return sorted[Swift.min(Swift.max(i, 0), sorted.count - 1)]
        }
        count = sorted.count
        p50 = rank(0.50)
        p99 = rank(0.99)
        max = sorted[sorted.count - 1]
    }
}
