import ShutterbugCore

/// The exposure, white-balance and focus locks as a pure state machine: completed frames and
/// time in, settled or failed locks out. A lock settles on the first frame that carries its
/// setting (`StepTarget`, `LensSettle`), judged from the frame paired with the request that
/// carried it; it fails after `frameLimit` frames without it, or when no frame at all has come
/// for `timeLimit` (a stalled camera), whichever comes first, naming the lock and the cause.
public struct Locks: Sendable {
    public enum Kind: Sendable, Hashable, CustomStringConvertible {
        case exposure(StepTarget)
        case focus(Double)
        case whiteBalance(ColourGains)

        public var description: String {
            switch self {
            case .exposure(let t): return "the exposure lock (\(t))"
            case .focus(let l): return "the focus lock (\(String(format2: l)) dpt)"
            case .whiteBalance(let g): return "the white-balance lock (\(g))"
            }
        }
    }

    /// Where a lock first took effect.
    public struct Settled: Sendable, Hashable {
        public var id: Int
        public var sequence: UInt32
        public var timestamp: SensorTime?
        /// The frame paired with the request that carried the setting.
        public var requestFrame: UInt32
    }

    public enum Outcome: Sendable, Hashable {
        case settled(Settled)
        case failed(id: Int, reason: String)
    }

    private struct Lock: Sendable {
        var kind: Kind
        var cookie: UInt64?
        var pairedFrame: UInt32?
        /// Frames that came after the paired one: counted, not told by sequence numbers, which
        /// jump over a stall (no frame came for them).
        var framesAfter = 0
        var settle: LensSettle?
        var lastProgress: SensorTime
        var timeLimit: Duration
    }

    public let frameLimit: Int
    private var locks: [Int: Lock] = [:]

    /// - Parameter frameLimit: frames after the request's own frame before a lock fails.
    public init(frameLimit: Int = 60) {
        self.frameLimit = frameLimit
    }

    public var isEmpty: Bool { locks.isEmpty }
    public var ids: [Int] { Array(locks.keys) }

    /// A lock whose request has yet to go out (`sent`). It fails when no frame at all comes
    /// for `timeLimit`.
    public mutating func add(id: Int, kind: Kind, now: SensorTime, timeLimit: Duration = .seconds(2)) {
        var settle: LensSettle?
        if case .focus(let l) = kind { settle = LensSettle(target: l) }
        locks[id] = Lock(kind: kind, settle: settle, lastProgress: now, timeLimit: timeLimit)
    }

    /// The request carrying the locks `ids` went out with `cookie`.
    public mutating func sent(_ ids: [Int], cookie: UInt64) {
        for id in ids { locks[id]?.cookie = cookie }
    }

    /// Drops a lock (its waiter went away).
    public mutating func remove(_ id: Int) { locks[id] = nil }

    /// Judges one completed request. A failed or cancelled request still pairs its locks with
    /// its frame: the controls went to the pipeline with it.
    public mutating func complete(cookie: UInt64, status: CompletedRequest.Status, metadata m: FrameMetadata, now: SensorTime, timing: CameraTiming) -> [Outcome] {
        var out: [Outcome] = []
        for id in locks.keys.sorted() {
            guard var lock = locks[id] else { continue }
            lock.lastProgress = max(lock.lastProgress, now)
            if lock.cookie == cookie {
                lock.pairedFrame = m.sequence
            } else if let paired = lock.pairedFrame, m.sequence > paired {
                lock.framesAfter += 1
            }
            defer { if locks[id] != nil { locks[id] = lock } }
            guard status == .complete, let paired = lock.pairedFrame else { continue }
            var carried: Bool
            switch lock.kind {
            case .exposure(let target):
                // Sensor controls land several frames after the paired one.
                carried = Int(m.sequence) >= Int(paired) + timing.landingOffsets.lowerBound && target.isCarried(by: m, lineTime: timing.lineTime)
            case .whiteBalance(let g):
                // Colour is applied by the ISP to the paired frame itself.
                carried = m.sequence >= paired && StepTarget(colourGains: g).isCarried(by: m, lineTime: timing.lineTime)
            case .focus:
                carried = m.sequence >= paired && lock.settle!.observe(m, timing: timing)
            }
            if carried {
                locks[id] = nil
                out.append(.settled(Settled(id: id, sequence: m.sequence, timestamp: m.sensorTimestamp, requestFrame: paired)))
            } else if lock.framesAfter > frameLimit {
                locks[id] = nil
                out.append(.failed(id: id, reason: "\(lock.kind) did not show in the \(frameLimit) frames after its request (last frame \(m.sequence): \(Self.describe(m)))"))
            }
        }
        return out
    }

    /// Lets time pass: a lock with no frame for its time limit fails.
    public mutating func tick(now: SensorTime) -> [Outcome] {
        var out: [Outcome] = []
        for id in locks.keys.sorted() {
            guard let lock = locks[id], now - lock.lastProgress > lock.timeLimit else { continue }
            locks[id] = nil
            let waited = ((now - lock.lastProgress).secondsValue * 10).rounded() / 10
            out.append(.failed(id: id, reason: "\(lock.kind) timed out: no frame came back for \(waited) s (limit \(lock.timeLimit.secondsValue) s); the camera stalled"))
        }
        return out
    }

    static func describe(_ m: FrameMetadata) -> String {
        [m.exposureTime.map { $0.exposureDescription }, m.analogueGain.map { "gain \(String(format2: $0.value))" },
         m.lensPosition.map { "lens \(String(format2: $0.value)) dpt" }, m.colourGains.map { "colour gains \($0)" }]
            .compactMap { $0 }.joined(separator: ", ")
    }
}
