import Foundation

/// A wait that ran out: says what was waited for and for how long.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var waitingFor: String
    public var limit: Duration
    public var description: String { "waited \(limit) for \(waitingFor)" }
}

/// Runs `body` and returns its result, or throws `DeadlineExceeded` naming `what` when it has
/// not finished within `limit` (the body is then cancelled). With `orNil`, running out returns
/// nil instead of throwing, for a wait whose "nothing came" is an answer.
///
/// The deadline holds even for a body that ignores cancellation (awaiting a task's value, a
/// call that blocks): body and timer race to one continuation and the loser is left behind. A
/// task group would wait for the body at its end whatever the deadline said, and the test would
/// hang past it instead of failing with what it waited for.
public func withDeadline<T: Sendable>(_ limit: Duration, _ what: String, orNil: Bool = false,
                                      _ body: @escaping @Sendable () async throws -> T?) async throws -> T? {
    let race = Race<T?>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T?, any Error>) in
            race.start(c)
            let work = Task {
                do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
            }
            let timer = Task {
                try? await Task.sleep(for: limit)
                if race.finish(orNil ? .success(nil) : .failure(DeadlineExceeded(waitingFor: what, limit: limit))) { work.cancel() }
            }
            race.onFinish { timer.cancel(); work.cancel() }
        }
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The first of several results resumes a continuation; the rest are dropped.
private final class Race<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, any Error>?
    private var early: Result<T, any Error>?
    private var done = false
    private var cleanup: (@Sendable () -> Void)?

    func start(_ c: CheckedContinuation<T, any Error>) {
        lock.lock()
        if let early {
            lock.unlock()
            c.resume(with: early)
            return
        }
        continuation = c
        lock.unlock()
    }

    /// What to do once a result won (stop the others).
    func onFinish(_ body: @escaping @Sendable () -> Void) {
        lock.lock()
        let already = done
        if !already { cleanup = body }
        lock.unlock()
        if already { body() }
    }

    /// Resumes with `result` if nothing did yet; true if this one won.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        lock.lock()
        guard !done else { lock.unlock(); return false }
        done = true
        let c = continuation
        continuation = nil
        if c == nil { early = result }
        let after = cleanup
        cleanup = nil
        lock.unlock()
        c?.resume(with: result)
        after?()
        return true
    }
}

/// `withDeadline` for a body that always returns a value.
public func withDeadline<T: Sendable>(_ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let r: T? = try await withDeadline(limit, what, orNil: false) { () async throws -> T? in try await body() }
    return r!
}

/// The CPU time this process has used, user and system.
public enum ProcessCPU {
    public static func now() -> Duration {
        var u = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &u)
        let us = Int64(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1_000_000 + Int64(u.ru_utime.tv_usec + u.ru_stime.tv_usec)
        return .microseconds(us)
    }
}
