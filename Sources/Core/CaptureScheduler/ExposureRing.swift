import ShutterbugCore

/// Where a frame's exposure lies against an instant, by the first row's exposure interval:
/// from `SensorTimestamp - ExposureTime` (its start) to `SensorTimestamp` (its end, where
/// readout begins), the interval the "exposed after" rule also reads (CAMERA-FACTS §5).
public enum ExposureRelation: Sendable, Hashable {
    /// The exposure began at or before the instant and ended after it: the frame that was
    /// exposing when the edge came.
    case covering
    /// The exposure began after the instant (the "first frame exposed after" rule's frames).
    case after
    /// The exposure ended at or before the instant, or the frame says too little to tell.
    case before
}

extension FrameMetadata {
    /// This frame's exposure against `instant`. A frame that does not report its exposure can
    /// never be proven to cover an instant: it is `after` only when even its earliest possible
    /// start is (`exposed(after:)`), else `before`.
    public func exposure(against instant: SensorTime) -> ExposureRelation {
        if let start = exposureStart, let end = sensorTimestamp, start <= instant, instant < end { return .covering }
        return exposed(after: instant) ? .after : .before
    }
}

/// Zero shutter lag's memory, as a pure value: the newest complete frames nobody took, held in
/// place (each keeps its request slot, so nothing is copied) up to `inPlace`, beyond that as
/// copies in a pool (the session copies them, `CaptureMachine.Action.pool`), and given back
/// as they age, so that a trigger's photo can be the frame that was exposing when its edge
/// came, though that frame came back before the trigger was heard.
///
/// A frame leaves the ring once: taken by a capture (its hold passes to the photo) or pushed
/// out by a newer one (its slot, or its copy, given back). No frame is handed out twice.
public struct ExposureRing: Sendable {
    /// The most frames held.
    public let capacity: Int
    /// The most held in place, in the camera's buffers; the rest are copied into a pool of
    /// their own (the camera allocated too few buffers to hold them all beside the photos and
    /// the pipeline), each under a pool id from `poolBase` up in place of its slot.
    public let inPlace: Int
    /// Pool ids start here, far above any slot.
    public static let poolBase = 1 << 30
    public static func isPooled(_ id: Int) -> Bool { id >= poolBase }
    private var nextPoolID = poolBase
    /// The frames held, oldest first.
    public private(set) var frames: [CompletedRequest] = []
    /// The latest exposure end among the frames pushed out: an instant before it may have been
    /// covered by a frame no longer held.
    public private(set) var pushedOutUntil: SensorTime?

    public init(capacity: Int, inPlace: Int? = nil) {
        self.capacity = max(0, capacity)
        self.inPlace = min(self.capacity, max(0, inPlace ?? capacity))
        frames.reserveCapacity(self.capacity + 1)
    }

    public var isEnabled: Bool { capacity > 0 }
    /// Frames held as copies in the pool.
    public var pooledCount: Int { frames.reduce(0) { $0 + (Self.isPooled($1.slot) ? 1 : 0) } }

    /// What holding a frame did.
    public struct Held: Sendable {
        /// The slot (or pool id) of the frame pushed out, to give back.
        public var released: Int?
        /// The pool id the frame is held under when the frames in place are all the camera's
        /// buffers can spare: its buffers are to be copied there, and its slot given back.
        public var pooledAs: Int?
    }

    /// Holds `c`, a complete frame nobody took: in place while fewer than `inPlace` are, else
    /// as a copy in the pool.
    public mutating func hold(_ c: CompletedRequest) -> Held {
        guard isEnabled else { return Held() }
        var held = Held()
        if frames.count >= capacity {
            let old = frames.removeFirst()
            if let end = old.metadata.sensorTimestamp { pushedOutUntil = max(pushedOutUntil ?? end, end) }
            held.released = old.slot
        }
        var entry = c
        if frames.count - pooledCount >= inPlace {
            entry.slot = nextPoolID
            held.pooledAs = nextPoolID
            nextPoolID = nextPoolID == Int.max ? Self.poolBase : nextPoolID + 1
        }
        frames.append(entry)
        return held
    }

    /// Every frame held, removed: their slots, to give back.
    public mutating func removeAll() -> [Int] {
        defer { frames.removeAll(keepingCapacity: true) }
        return frames.map(\.slot)
    }

    /// Takes the newest `count` held frames whose exposure ended at or before `instant` (and,
    /// given `window`, began no earlier than `instant - window`), oldest first; their holds pass
    /// to the taker. They are one run of consecutive frames ending with the newest frame seen
    /// before the instant (`seen`): a frame another capture took ends the run, so a burst never
    /// reaches back past an earlier burst's frames to older ones.
    public mutating func take(before instant: SensorTime, count: Int, window: Duration? = nil, seen: [FrameMetadata]) -> [CompletedRequest] {
        guard count > 0, let newest = seen.last(where: { m in m.sensorTimestamp.map { $0 <= instant } ?? false }) else { return [] }
        var picked: [Int] = []
        var next = newest.sequence
        for i in frames.indices.reversed() where picked.count < count {
            let m = frames[i].metadata
            guard m.sequence <= next else { continue }
            guard m.sequence == next, m.exposure(against: instant) == .before else { break }
            if let window, let start = m.exposureStart, start < instant - window { break }
            picked.append(i)
            if next == 0 { break }
            next -= 1
        }
        let taken = picked.sorted().map { frames[$0] }
        for i in picked.sorted(by: >) { frames.remove(at: i) }
        return taken
    }

    /// Takes the held frame whose exposure covered `instant`, if one is held (its hold passes
    /// to the taker); nothing else is taken.
    public mutating func takeCovering(_ instant: SensorTime) -> CompletedRequest? {
        guard let i = frames.firstIndex(where: { $0.metadata.exposure(against: instant) == .covering }) else { return nil }
        return frames.remove(at: i)
    }

    /// What a capture exposing at an instant gets.
    public enum Choice: Sendable {
        /// A frame held whose exposure covered the instant; its hold passes to the taker.
        case covering(CompletedRequest)
        /// No held frame covered the instant, and the first exposed after it is held: taken
        /// instead, with the reason none covered it.
        case after(CompletedRequest, reason: String)
        /// Every frame held ended before the instant: the frame exposing at it is still to
        /// come back (or none will), so the capture waits for the next frames.
        case wait
        /// The instant is older than the frames held: the frame that covered it has left the
        /// ring.
        case gone(String)
    }

    /// Takes the frame exposing at `instant`, or says what to do instead.
    ///
    /// - Parameter seen: recent complete frames' metadata, to tell why none covered the
    ///   instant (a gap between exposures, drops, start-up).
    public mutating func take(exposingAt instant: SensorTime, seen: [FrameMetadata]) -> Choice {
        if let i = frames.firstIndex(where: { $0.metadata.exposure(against: instant) == .covering }) {
            return .covering(frames.remove(at: i))
        }
        // A frame pushed out ended after the instant: the one exposing then (or the first exposed
        // after) may be among those no longer held.
        if let until = pushedOutUntil, instant < until {
            let reach = frames.first?.metadata.exposureStart.map { ", and the oldest held began \(($0 - instant).millisecondsDescription) after it" } ?? ""
            return .gone("the frame exposing at \(instant) is no longer held: \(capacity) frame\(capacity == 1 ? " is" : "s are") held\(reach); hold more (--hold, or --pre for a burst) to reach further back")
        }
        guard let i = frames.firstIndex(where: { $0.metadata.exposure(against: instant) == .after }) else { return .wait }
        let f = frames[i].metadata
        // The first held frame exposed after is no stand-in for one far from the instant (an
        // instant from before the camera streamed): every frame since the last that ended
        // before the instant (taken by other captures, dropped, in start-up) accounts for a
        // period, and the gap between two exposures for one more.
        let before = seen.last { ($0.sensorTimestamp.map { $0 <= instant } ?? false) && $0.sequence < f.sequence }?.sequence
        let since = Int(f.sequence) - Int(before ?? 0)
        if let start = f.earliestExposureStart, let period = f.frameDuration ?? f.measuredFrameInterval, start - instant > period * (since + 1) {
            return .gone("no frame held was exposing at \(instant) or near it: the first held exposed after it began \((start - instant).millisecondsDescription) after it")
        }
        return .after(frames.remove(at: i), reason: Self.gap(before: f, instant: instant, seen: seen))
    }

    /// Why no frame covered `instant`, `f` being the first exposed after it.
    public static func gap(before f: FrameMetadata, instant: SensorTime, seen: [FrameMetadata]) -> String {
        let begins = f.earliestExposureStart.map { " began \(($0 - instant).millisecondsDescription) after it" } ?? " began after it"
        guard f.sequence > 0 else { return "frame 0, the first the sensor made,\(begins): there was no frame before it (start-up)" }
        // A frame seen that covered the instant, whichever it was: it went elsewhere (the
        // instant did not fall between two exposures, whatever the frame just before says).
        if let c = seen.last(where: { $0.sequence < f.sequence && $0.exposure(against: instant) == .covering }) {
            return "frame \(c.sequence), exposing at the instant, went to an earlier capture or was not held; frame \(f.sequence)\(begins)"
        }
        guard let p = seen.last(where: { $0.sequence < f.sequence }) else {
            return "frame \(f.sequence)\(begins), and no frame before it was seen (start-up frames, or frames dropped)"
        }
        if p.sequence + 1 < f.sequence {
            let n = Int(f.sequence - p.sequence - 1)
            return "\(n) frame\(n == 1 ? "" : "s") between \(p.sequence) and \(f.sequence) never came back complete (dropped or start-up), and frame \(f.sequence)\(begins)"
        }
        switch p.exposure(against: instant) {
        case .covering:
            return "frame \(p.sequence), exposing at the instant, went to an earlier capture or was not held; frame \(f.sequence)\(begins)"
        case .after:
            // Two frames after the instant, none seen covering it: whether it fell between two
            // exposures depends on the frame before them, which is said only where it was seen.
            if let q = seen.last(where: { $0.sequence < p.sequence }), q.sequence + 1 == p.sequence, q.exposure(against: instant) == .before {
                return "the instant fell between two exposures (frames \(q.sequence) and \(p.sequence)), and frame \(p.sequence), the first exposed after it, went to an earlier capture; frame \(f.sequence)\(begins)"
            }
            return "frame \(p.sequence), exposed after the instant, went to an earlier capture, and the frame exposing at the instant (if any) was not among those seen; frame \(f.sequence)\(begins)"
        case .before:
            let ended = p.sensorTimestamp.map { " ended \((instant - $0).millisecondsDescription) before it and" } ?? ""
            return "the instant fell between two exposures: frame \(p.sequence)'s\(ended) frame \(f.sequence)\(begins) (a sensor exposes for at most its frame period less a margin)"
        }
    }
}
