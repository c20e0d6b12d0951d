import Synchronization

/// Progress reported by a loop that `withStallWatchdog` guards.
public final class StallWatch: Sendable {
    private let ticks = Atomic<Int>(0)
    public init() {}
    /// Records progress (a frame arrived).
    public func tick() { ticks.add(1, ordering: .relaxed) }
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
