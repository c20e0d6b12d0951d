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
public func withDeadline<T: Sendable>(_ limit: Duration, _ what: String, orNil: Bool = false,
                                      _ body: @escaping @Sendable () async throws -> T?) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            if orNil { return nil }
            throw DeadlineExceeded(waitingFor: what, limit: limit)
        }
        defer { group.cancelAll() }
        return try await group.next()!
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
