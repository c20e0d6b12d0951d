import Dispatch
import ShutterbugCore
import ShutterbugPosix
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

    @Test("a wake that lands after the thread woke for its source leaves no spin: idle, the thread waits (it came back at once, over and over, at 100% of a core)")
    func noSpinAfterARacingWake() async throws {
        let loop = EventLoopExecutor(name: "test-loop")
        let pipe = Pipe()
        loop.setSource(fd: pipe.read) { pipe.drain() }
        // A source event and a wake from another thread, together, many times over: now and
        // then the thread wakes for the source between a caller marking it woken and the
        // caller's signal.
        DispatchQueue.concurrentPerform(iterations: 2) { side in
            for _ in 0..<20_000 {
                if side == 0 { pipe.signal() } else { loop.execute {} }
            }
        }
        // Everything before has run once this has.
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in loop.execute { c.resume() } }
        // Idle now. The window is what is measured (not a wait for anything): a waiting thread
        // comes back from its wait once, for the last wake, or not at all.
        let before = loop.statistics.waitsEnded
        try await Task.sleep(for: .milliseconds(200))
        let after = loop.statistics.waitsEnded
        #expect(after - before <= 2, "the idle thread came back from its wait \(after - before) times in 200 ms")
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

@Suite("Completion queue's direct consumer on an event loop", .timeLimit(.minutes(2)))
struct DirectConsumerTests {
    static func request(_ cookie: UInt64, status: CompletedRequest.Status = .complete) -> CompletedRequest {
        CompletedRequest(slot: 0, cookie: cookie, status: status, metadata: FrameMetadata(sequence: UInt32(cookie)), buffers: [])
    }

    /// What a direct consumer saw.
    final class Seen: Sendable {
        let events = Mutex<[String]>([])
        let outsideJobs = Mutex(true)
        let done = ConditionLock()
        func add(_ e: String, _ loop: EventLoopExecutor) {
            if !loop.isBetweenJobs { outsideJobs.withLock { $0 = false } }
            done.withLock {
                events.withLock { $0.append(e) }
                done.broadcast()
            }
        }
        func wait(for n: Int) -> [String] {
            done.withLock {
                while events.withLock({ $0.count }) < n { done.wait() }
            }
            return events.withLock { $0 }
        }
    }

    static func describe(_ e: CompletionQueue.DirectEvent) -> String {
        switch e {
        case .completion(let c): return "\(c.cookie)"
        case .finished(let error?): return "end: \(error.message)"
        case .finished(nil): return "end"
        }
    }

    @Test("pushed from the loop's source, each completion is handled right in the handler: no job, in order, outside any job")
    func fromTheSource() async throws {
        let loop = EventLoopExecutor(name: "test-direct")
        let queue = CompletionQueue()
        let seen = Seen()
        let pipe = Pipe()
        let next = Mutex(UInt64(0))
        loop.setSource(fd: pipe.read) {
            pipe.drain()
            let n = next.withLock { $0 += 1; return $0 }
            queue.push(Self.request(n))
            if n == 300 { queue.finish() }
        }
        queue.consumeDirectly(on: loop) { e in seen.add(Self.describe(e), loop) }
        let before = loop.statistics
        for _ in 0..<300 {
            // One event at a time, each after the last was handled (as a camera's frames come).
            let k = seen.events.withLock { $0.count }
            pipe.signal()
            _ = seen.wait(for: k + 1)
        }
        let events = seen.wait(for: 301)
        #expect(events == (1...300).map { "\($0)" } + ["end"])
        #expect(seen.outsideJobs.withLock { $0 }, "never inside a job")
        #expect(loop.statistics.jobs == before.jobs, "no job at all: \(before) -> \(loop.statistics)")
        loop.removeSource()
    }

    @Test("pushed from other threads, completions and the end (with its error) reach the handler on the loop, in order")
    func fromElsewhere() async throws {
        let loop = EventLoopExecutor(name: "test-direct")
        let queue = CompletionQueue()
        let seen = Seen()
        queue.push(Self.request(1))  // before the consumer: kept for it
        queue.consumeDirectly(on: loop) { e in seen.add(Self.describe(e), loop) }
        let producer = OSThread {
            for i in 2...500 { queue.push(Self.request(UInt64(i))) }
            queue.finish(throwing: ShutterbugError(.cameraLost, "gone"))
        }
        producer.join()
        let events = seen.wait(for: 501)
        #expect(events == (1...500).map { "\($0)" } + ["end: gone"])
        #expect(seen.outsideJobs.withLock { $0 })
    }

    @Test("a push from inside the handler (a stop's cancelled requests) is handled after it returns, not inside it; after endDirectConsumer completions wait for the next consumer")
    func reentrantAndEnded() async throws {
        let loop = EventLoopExecutor(name: "test-direct")
        let queue = CompletionQueue()
        let seen = Seen()
        let depth = Mutex(0)
        let nested = Mutex(false)
        queue.consumeDirectly(on: loop) { e in
            if depth.withLock({ $0 += 1; return $0 }) > 1 { nested.withLock { $0 = true } }
            if case .completion(let c) = e, c.cookie == 1 {
                queue.push(Self.request(2, status: .cancelled))
                queue.push(Self.request(3, status: .cancelled))
            }
            seen.add(Self.describe(e), loop)
            depth.withLock { $0 -= 1 }
        }
        queue.push(Self.request(1))
        #expect(seen.wait(for: 3) == ["1", "2", "3"])
        #expect(!nested.withLock { $0 }, "the handler never ran inside itself")
        // Ended (on the loop, as a session's stop is): what comes next is kept.
        let ended = ConditionLock()
        let endedFlag = Mutex(false)
        loop.execute {
            queue.endDirectConsumer()
            ended.withLock {
                endedFlag.withLock { $0 = true }
                ended.broadcast()
            }
        }
        ended.withLock { while !endedFlag.withLock({ $0 }) { ended.wait() } }
        queue.push(Self.request(4))
        #expect(queue.tryNext()?.cookie == 4)
        #expect(seen.events.withLock { $0 } == ["1", "2", "3"])
    }

    /// A simulated sensor in lock-step waits, under its own lock, until the consumer is idle,
    /// and is woken only by the idle handler. A session on an event loop lets frames through
    /// (its first top-up) before it becomes the direct consumer: a sensor that looked in
    /// between saw no consumer, waited, and was never told one had come (1 start in ~2,300 on
    /// a loaded machine hung in its warm-up, and CI's unit tier with it).
    @Test("the idle handler hears every way the queue becomes idle: a direct consumer set on an empty queue, tryNext taking the last item, a delivery that ran dry")
    func idleIsAlwaysSaid() async throws {
        let loop = EventLoopExecutor(name: "test-idle")
        let queue = CompletionQueue()
        let calls = Mutex(0)
        queue.onConsumerIdle { calls.withLock { $0 += 1 } }
        #expect(!queue.isConsumerIdle, "no consumer yet")
        queue.consumeDirectly(on: loop) { _ in }
        #expect(queue.isConsumerIdle)
        #expect(calls.withLock { $0 } == 1, "a direct consumer on an empty queue is idle at once, and says so")

        // The loop held by a job: a push from here is scheduled behind it, and taken here first.
        let gate = ConditionLock()
        let open = Mutex(false)
        loop.execute { gate.withLock { while !open.withLock({ $0 }) { gate.wait() } } }
        queue.push(Self.request(1))
        #expect(!queue.isConsumerIdle, "an item waits")
        #expect(queue.tryNext()?.cookie == 1)
        #expect(queue.isConsumerIdle)
        #expect(calls.withLock { $0 } == 2, "tryNext took the last item: idle, and said so")
        gate.withLock {
            open.withLock { $0 = true }
            gate.broadcast()
        }

        // A delivery that ran dry says so too (a queue of its own: the scheduled delivery above
        // runs dry as well, once the gate opens).
        let dry = CompletionQueue()
        let said = ConditionLock()
        let saidCount = Mutex(0)
        dry.onConsumerIdle { said.withLock { saidCount.withLock { $0 += 1 }; said.broadcast() } }
        dry.consumeDirectly(on: loop) { _ in }
        #expect(saidCount.withLock { $0 } == 1)
        dry.push(Self.request(2))
        let deadline = MonotonicClock.now() + .seconds(30)
        let n = said.withLock { () -> Int in
            while saidCount.withLock({ $0 }) < 2, MonotonicClock.now() < deadline { said.wait(until: deadline) }
            return saidCount.withLock { $0 }
        }
        #expect(n == 2, "the delivery of 2 ran dry and said so (waited up to 30 s)")
        #expect(dry.isConsumerIdle)
    }
}
