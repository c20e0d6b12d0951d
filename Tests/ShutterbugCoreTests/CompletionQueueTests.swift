import ShutterbugCore
import ShutterbugPosix
import Testing

@Suite("Completion queue and ring", .timeLimit(.minutes(3)))
struct CompletionQueueTests {
    static func request(_ cookie: UInt64) -> CompletedRequest {
        CompletedRequest(slot: 0, cookie: cookie, status: .complete, metadata: FrameMetadata(sequence: UInt32(cookie)), buffers: [])
    }

    @Test("the consumer-idle handler runs once per wait and stays one call deep: 200,000 waits, then the queue is freed (a handler that grew per call overflowed the stack here)")
    func idleHandlerStaysFlat() async throws {
        final class Feeder: @unchecked Sendable {
            // `@unchecked`: touched only from the handler, which the queue calls on the consumer's task.
            var next: UInt64 = 0
            weak var queue: CompletionQueue?
        }
        let feeder = Feeder()
        var queue: CompletionQueue? = CompletionQueue()
        feeder.queue = queue
        // Each time the consumer waits, the handler pushes the next completion, which wakes it.
        queue!.onConsumerIdle {
            feeder.next += 1
            feeder.queue?.push(CompletedRequest(slot: 0, cookie: feeder.next, status: .complete, metadata: FrameMetadata(sequence: 0), buffers: []))
        }
        var last: UInt64 = 0
        for _ in 0..<200_000 {
            let c = try #require(try await queue!.next())
            #expect(c.cookie == last + 1)
            last = c.cookie
        }
        #expect(feeder.next == 200_000)
        queue = nil
        #expect(feeder.queue == nil, "the queue is freed")
    }

    @Test("the ring keeps order across wrap-around and growth")
    func ring() {
        var r = Ring<Int>(capacity: 3)
        var expected: [Int] = []
        var out: [Int] = []
        for i in 0..<50 {
            r.append(i)
            expected.append(i)
            if i % 3 == 0, let x = r.popFirst() { out.append(x) }
        }
        out += r.removeAll()
        #expect(out == expected)
        #expect(r.isEmpty)
    }

    @Test("a window of the newest: append(keepingAtMost:) drops the oldest, in order, at every limit and after pops")
    func window() {
        for limit in 1...4 {
            var r = Ring<Int>(capacity: 4)
            var model: [Int] = []
            for i in 0..<23 {
                r.append(i, keepingAtMost: limit)
                model.append(i)
                if model.count > limit { model.removeFirst() }
                if i % 7 == 6 { #expect(r.popFirst() == model.removeFirst()) }
                #expect(r.count == model.count && r.last == model.last && r.first == model.first, "limit \(limit) after \(i)")
            }
            #expect(r.capacity == 4, "never grows")
            #expect(r.removeAll() == model)
        }
    }

    @Test("completions arrive in push order, from another thread, to an awaiting consumer")
    func order() async throws {
        let q = CompletionQueue()
        let producer = OSThread {
            for i in 0..<1000 { q.push(Self.request(UInt64(i))) }
            q.finish()
        }
        var got: [UInt64] = []
        for try await c in q { got.append(c.cookie) }
        producer.join()
        #expect(got == (0..<1000).map { UInt64($0) })
    }

    @Test("finishing with an error delivers pending items first, then the error")
    func failure() async throws {
        let q = CompletionQueue()
        q.push(Self.request(1))
        q.finish(throwing: ShutterbugError(.cameraLost, "gone"))
        #expect(try await q.next()?.cookie == 1)
        await #expect(throws: ShutterbugError(.cameraLost, "gone")) { try await q.next() }
    }

    @Test("a wait with a deadline times out, and a later push is still delivered")
    func timeout() async throws {
        let q = CompletionQueue()
        await #expect(throws: ShutterbugError.self) { try await q.next(timeout: .milliseconds(50)) }
        q.push(Self.request(7))
        #expect(try await q.next(timeout: .seconds(1))?.cookie == 7)
    }

    @Test("a cancelled consumer stops waiting")
    func cancellation() async {
        let q = CompletionQueue()
        let task = Task { try await q.next() }
        // Cancel once it is really waiting (not before it got there).
        while !q.isConsumerIdle { await Task.yield() }
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
    }

    @Test("errors name the errno behind them")
    func errors() {
        let e = ShutterbugError.fromErrno(-16, while: "acquiring camera 'x'")
        #expect(e.code == .busy)
        #expect(e.description == "acquiring camera 'x' failed (EBUSY)")
        #expect(ShutterbugError.fromErrno(-19, while: "a").code == .noSuchCamera)
        #expect(ControlSet([.exposureTime, .lensPosition]).names == ["ExposureTime", "LensPosition"])
    }
}
