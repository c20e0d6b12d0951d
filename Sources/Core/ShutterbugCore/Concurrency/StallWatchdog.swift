import Synchronization

/// Progress reported by a loop that `withStallWatchdog` guards.
public final class StallWatch: Sendable {
    private let ticks = Atomic<Int>(0)
    /// A camera with no clock of its own (virtual time): frames come as fast as they are
    /// handled, so a stall shows only as a gap between their times. The limit and what stalled.
    private let cameraClock: (limit: Duration, what: String)?
    private let frames = Mutex<(last: SensorTime?, stall: ShutterbugError?)>((nil, nil))

    /// - Parameter cameraClock: judge the gaps between the frames' own times against `limit`
    ///   (a camera in virtual time, whose stalls no real-time watchdog sees).
    public init(cameraClock: (limit: Duration, what: String)? = nil) {
        self.cameraClock = cameraClock
    }

    /// Records progress (a frame arrived).
    public func tick() { ticks.add(1, ordering: .relaxed) }

    /// Records a frame taken at `time` on the camera's clock. Returns false, and from then on
    /// `stall` says why, once a gap on the camera's clock passed the limit: the frame came
    /// after the stall a real-time watchdog would have ended the loop at.
    public func tick(at time: SensorTime?) -> Bool {
        tick()
        guard let cameraClock, let time else { return true }
        return frames.withLock { f in
            if f.stall != nil { return false }
            defer { f.last = max(f.last ?? time, time) }
            guard let last = f.last, time - last > cameraClock.limit else { return true }
            let gap = ((time - last).secondsValue * 10).rounded() / 10
            f.stall = ShutterbugError(.timeout, "\(cameraClock.what): nothing arrived for \(gap) s on the camera's clock (limit \(cameraClock.limit.millisecondsDescription))")
            return false
        }
    }

    /// The stall seen on the camera's clock, if any.
    public var stall: ShutterbugError? { frames.withLock { $0.stall } }

    var count: Int { ticks.load(ordering: .relaxed) }
}

/// Runs `body`, failing with `.timeout` if it goes `timeout` without calling `tick()`.
///
/// One watchdog task for the whole loop, rather than a timer per wait: a per-frame timer task
/// costs more than the frame's own work on a small board.
public func withStallWatchdog<T: Sendable>(
    timeout: Duration, what: String, watching given: StallWatch? = nil,
    _ body: @escaping @Sendable (StallWatch) async throws -> T
) async throws -> T {
    let watch = given ?? StallWatch()
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body(watch) }
        group.addTask {
            var last = watch.count
            while true {
                try await Task.sleep(for: timeout)
                let now = watch.count
                if now == last { throw ShutterbugError(.timeout, "\(what): nothing arrived for \(timeout.millisecondsDescription)") }
                last = now
            }
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw ShutterbugError(.timeout, "\(what) ended without a result")
        }
        return value
    }
}
