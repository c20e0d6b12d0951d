import Foundation

/// What a child process did.
public struct ChildResult: Sendable {
    public var status: Int32
    public var stdout: Data
    public var stderr: Data
    public var out: String { String(decoding: stdout, as: UTF8.self) }
    public var err: String { String(decoding: stderr, as: UTF8.self) }
}

/// Runs `executable` with `args` to the end, reading both pipes at once (so neither fills and
/// stalls the child), with `SHUTTERBUG_CAMERA` removed from the environment so tests choose
/// their camera. Blocks the calling thread: from async code use `runChild`.
public func runChildBlocking(_ executable: String, _ args: [String], environment extra: [String: String] = [:]) throws -> ChildResult {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = args
    var env = ProcessInfo.processInfo.environment
    env["SHUTTERBUG_CAMERA"] = nil
    env["SHUTTERBUG_MEMORY_BUDGET_MB"] = nil
    env.merge(extra) { $1 }
    p.environment = env
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let errData = LockedData()
    let done = DispatchSemaphore(value: 0)
    onThreadOfItsOwn {
        errData.set(err.fileHandleForReading.readDataToEndOfFile())
        done.signal()
    }
    let o = out.fileHandleForReading.readDataToEndOfFile()
    done.wait()
    p.waitUntilExit()
    return ChildResult(status: p.terminationStatus, stdout: o, stderr: errData.get())
}

/// `runChildBlocking` off Swift's cooperative pool: a thread of its own waits for the child, so
/// a test waiting for a process never starves the async work of tests running beside it.
public func runChild(_ executable: String, _ args: [String], environment: [String: String] = [:]) async throws -> ChildResult {
    try await offPool { try runChildBlocking(executable, args, environment: environment) }
}

/// Runs blocking work on a thread of its own and awaits it. Keep expectations out of `body`:
/// they belong to the test's own task.
///
/// Not on `DispatchQueue.global()`: on Linux that is the very queue Swift's global executor
/// runs its jobs on (libdispatch's default-QoS root queue), so blocking there took the
/// cooperative pool's threads. With a score of CLI tests each blocked on a child process, the
/// queue's threads were all waiting on children, libdispatch added threads one at a time, and
/// the async tests beside them (a session's frames, an actor's calls) waited a minute or more
/// for a thread: seen as tests over their time limit whenever the machine was busy.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { c in
        onThreadOfItsOwn { c.resume(with: Result { try body() }) }
    }
}

/// Runs `body` on a new thread (not one of libdispatch's, see `offPool`).
public func onThreadOfItsOwn(_ body: @escaping @Sendable () -> Void) {
    let t = Thread { body() }
    t.name = "test-blocking"
    t.start()
}

private final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    func get() -> Data { lock.lock(); defer { lock.unlock() }; return data }
}

/// SQLite's shell on a database: its output, trimmed. A failing query throws with sqlite3's
/// message, so a test sees why. The shell waits up to 10 s for a lock as the product's own
/// connections do (5 s): a journal a running service writes may be locked a moment (WAL
/// recovery, a checkpoint), and on a loaded machine the shell without a timeout failed at once
/// with "database is locked".
public func sqlite(_ db: String, _ sql: String) async throws -> String {
    let r = try await runChild("/usr/bin/sqlite3", ["-cmd", ".timeout 10000", db, sql])
    guard r.status == 0 else { throw SQLiteShellError(message: "sqlite3 \(db) \"\(sql)\": \(r.err)") }
    return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
}

public struct SQLiteShellError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
