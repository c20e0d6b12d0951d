import ShutterbugCore
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// An actor that runs on a given event loop and records where its methods ran.
private actor OnLoop {
    let loop: EventLoopExecutor
    var count = 0
    var offThread = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    init(_ loop: EventLoopExecutor) { self.loop = loop }

    func increment() {
        if !loop.isCurrent { offThread += 1 }
        count += 1
    }

    /// Consumes `n` completions from `queue` here, noting any resumed off the loop's thread.
    func consume(_ queue: CompletionQueue, _ n: Int) async throws -> [UInt64] {
        var cookies: [UInt64] = []
        for try await c in queue {
            if !loop.isCurrent { offThread += 1 }
            cookies.append(c.cookie)
            if cookies.count == n { break }
        }
        return cookies
    }
}

/// A pipe whose read end is an event loop's source: each byte written is one event.
private final class Pipe: @unchecked Sendable {
    let read: Int32, write: Int32
    init() {
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0)
        (read, write) = (fds[0], fds[1])
        _ = fcntl(read, F_SETFL, fcntl(read, F_GETFL) | O_NONBLOCK)
    }
    deinit { close(read); close(write) }
    func signal() { var b: UInt8 = 1; _ = Glibc.write(write, &b, 1) }
    func drain() { var b = [UInt8](repeating: 0, count: 64); while Glibc.read(read, &b, 64) > 0 {} }
}

@Suite("Event loop executor: one thread for a camera's completions and its session", .timeLimit(.minutes(2)))
struct EventLoopExecutorTests {
    @Test("an actor on the loop runs every call on its thread, one at a time: 8 tasks × 2,000 calls")
    func serialOnItsThread() async {
        let loop = EventLoopExecutor(name: "test-loop")
        let actor = OnLoop(loop)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<2000 { await actor.increment() } }
            }
        }
        #expect(await actor.count == 16_000)
        #expect(await actor.offThread == 0)
        #expect(!loop.isCurrent, "the test's own thread is not the loop's")
    }

    @Test("the source's handler runs on the loop's thread for each event, and a consumer on the loop is resumed there")
    func sourceFeedsConsumerOnTheLoop() async throws {
        let loop = EventLoopExecutor(name: "test-loop")
        let actor = OnLoop(loop)
        let queue = CompletionQueue()
        let pipe = Pipe()
        let handled = Mutex((calls: 0, offThread: 0, next: UInt64(0)))
        loop.setSource(fd: pipe.read) {
            pipe.drain()
            let cookie = handled.withLock { h -> UInt64 in
                h.calls += 1
                if !loop.isCurrent { h.offThread += 1 }
                h.next += 1
                return h.next
            }
            queue.push(CompletedRequest(slot: 0, cookie: cookie, status: .complete, metadata: FrameMetadata(sequence: UInt32(cookie)), buffers: []))
        }
        // The producer writes one event each time the consumer has taken the last one, as a
        // camera refilled by its consumer does.
        queue.onConsumerIdle { pipe.signal() }
        // The consumer's task prefers the loop (as a session's pump does): a continuation
        // resumes on the task's executor, so no completion goes through the global pool, and
        // no job comes to the loop from another thread.
        let before = loop.statistics
        let cookies = try await Task(executorPreference: loop) { try await actor.consume(queue, 500) }.value
        let after = loop.statistics
        #expect(cookies == Array(1...500))
        #expect(await actor.offThread == 0, "every completion was consumed on the loop's thread")
        #expect(handled.withLock { $0.offThread } == 0)
        #expect(after.sourceEvents - before.sourceEvents == 500)
        #expect(after.jobsFromOtherThreads - before.jobsFromOtherThreads <= 2, "only the call in and nothing per completion: \(before) -> \(after)")
        #expect(after.wakes - before.wakes <= 2, "\(before) -> \(after)")
        loop.removeSource()
    }

    @Test("removeSource returns only once a running handler has finished, and the handler is not called after")
    func removeSourceWaitsForTheHandler() async throws {
        let loop = EventLoopExecutor(name: "test-loop")
        let pipe = Pipe()
        let entered = ConditionLock()
        let state = Mutex((inHandler: false, release: false, calls: 0, finished: false))
        loop.setSource(fd: pipe.read) {
            pipe.drain()
            entered.withLock {
                state.withLock { $0.inHandler = true; $0.calls += 1 }
                entered.broadcast()
                while !state.withLock({ $0.release }) { entered.wait() }
            }
            state.withLock { $0.finished = true; $0.inHandler = false }
        }
        pipe.signal()
        entered.withLock { while !state.withLock({ $0.inHandler }) { entered.wait() } }
        // The handler is running and blocked: removeSource, from another thread, must wait.
        let removed = Mutex(false)
        let calling = Mutex(false)
        let remover = OSThread {
            entered.withLock {
                calling.withLock { $0 = true }
                entered.broadcast()
            }
            loop.removeSource()
            removed.withLock { $0 = state.withLock { $0.finished } }
        }
        // Once the remover is about to call, let the handler go: a removeSource that did not
        // wait would return while the handler is still blocked (or just woken).
        entered.withLock {
            while !calling.withLock({ $0 }) { entered.wait() }
            state.withLock { $0.release = true }
            entered.broadcast()
        }
        remover.join()
        #expect(removed.withLock { $0 }, "removeSource returned after the handler finished")
        // No more calls: an event now reaches nobody, while jobs still run on the loop.
        pipe.signal()
        let actor = OnLoop(loop)
        await actor.increment()
        await actor.increment()
        #expect(state.withLock { $0.calls } == 1)
        #expect(await actor.count == 2)
    }

    @Test("the thread is named, so top -H tells it apart")
    func named() async throws {
        let loop = EventLoopExecutor(name: "sb-test-name")
        let actor = OnLoop(loop)
        let name = await actor.threadName()
        #expect(name == "sb-test-name")
    }
}

extension OnLoop {
    func threadName() -> String {
        var buf = [CChar](repeating: 0, count: 32)
        let fd = open("/proc/thread-self/comm", O_RDONLY)
        defer { close(fd) }
        let n = read(fd, &buf, 31)
        guard n > 0 else { return "" }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self).trimmingCharacters(in: "\n")
    }
}

private extension String {
    func trimmingCharacters(in c: Character) -> String {
        var s = self
        while s.last == c { s.removeLast() }
        return s
    }
}
