import Synchronization

/// The completion side of a camera: producers (libcamera's event loop, the simulated sensor)
/// push completed requests; one consumer awaits them as an `AsyncSequence`, or takes them
/// directly on an event loop (`consumeDirectly`).
///
/// Pushing never blocks and, in steady state, never allocates. Waiting uses a continuation, not
/// polling: an unsafe one, because a checked continuation allocates a canary object per wait,
/// which was the one allocation left per frame. Each waiter is resumed exactly once: by a push,
/// by `finish`, by its deadline or by cancellation, whichever takes it out of `state` first.
public final class CompletionQueue: AsyncSequence, Sendable {
    public typealias Element = CompletedRequest

    private struct Waiter {
        var token: UInt64
        var continuation: UnsafeContinuation<CompletedRequest?, any Error>
    }

    private struct State {
        var items = Ring<CompletedRequest>(capacity: 16)
        var waiter: Waiter?
        var nextToken: UInt64 = 0
        var finished = false
        var failure: ShutterbugError?
        /// A deadline that passed before its waiter registered (the timer can win that race).
        var expired: (token: UInt64, error: any Error)?
        /// The direct consumer, if there is one, and its delivery's state.
        var direct: Direct?
        var delivering = false
        var deliveryScheduled = false
        var endDelivered = false
    }

    /// What a direct consumer is handed.
    public enum DirectEvent: Sendable {
        case completion(CompletedRequest)
        /// The sequence ended (the camera was released), with the error if it went away.
        case finished(ShutterbugError?)
    }

    /// The direct consumer: a completion is passed to `completion` as it is (borrowed, not
    /// copied into an event), the end to `end`.
    private final class Direct: Sendable {
        let loop: any CameraEventLoop
        let completion: @Sendable (CompletedRequest) -> Void
        let end: @Sendable (ShutterbugError?) -> Void
        init(loop: any CameraEventLoop, completion: @escaping @Sendable (CompletedRequest) -> Void, end: @escaping @Sendable (ShutterbugError?) -> Void) {
            self.loop = loop
            self.completion = completion
            self.end = end
        }
    }

    private let state = Mutex(State())
    /// Called (outside the queue's lock) each time the consumer comes back for more and finds
    /// nothing: it has dealt with every completion so far. Every way the queue becomes idle
    /// calls it (a consumer that waits, a delivery that ran dry, a direct consumer set on an
    /// empty queue, `tryNext` taking the last item): a producer that waits for idleness under
    /// its own lock is woken by it, and one missed call leaves that producer waiting for good.
    ///
    /// Held in a class: a function value read through `Mutex.withLock`'s generic `inout` is
    /// re-abstracted on the way out and written back wrapped on the way in, so a bare closure
    /// stored there grew by two thunks per read, one read per frame (a stack overflow when
    /// freed after ~100,000 frames, and calls slowing as the chain grew).
    private let consumerIdle = Mutex<Handler?>(nil)
    /// Whether `consumerIdle` holds a handler: read per frame without taking its lock.
    private let hasIdleHandler = Atomic<Bool>(false)

    private final class Handler: Sendable {
        let call: @Sendable () -> Void
        init(_ call: @escaping @Sendable () -> Void) { self.call = call }
    }

    public init() {}

    /// Sets what to call when the consumer has dealt with every completion and waits again.
    public func onConsumerIdle(_ handler: (@Sendable () -> Void)?) {
        let boxed = handler.map(Handler.init)
        consumerIdle.withLock {
            $0 = boxed
            hasIdleHandler.store(boxed != nil, ordering: .releasing)
        }
    }

    /// Whether the consumer has taken every completion and is waiting for the next.
    public var isConsumerIdle: Bool {
        state.withLock { $0.items.isEmpty && ($0.waiter != nil || ($0.direct != nil && !$0.delivering)) }
    }

    /// Hands a completed request to the consumer.
    public func push(_ request: CompletedRequest) {
        enum Action { case direct(DirectAction), resume(Waiter), handOver(Direct) }
        let action: Action = state.withLock { s in
            if let w = s.waiter {
                s.waiter = nil
                return .resume(w)
            }
            // The usual frame: from the loop's source, nothing waiting before it. Straight to
            // the handler, not through the ring.
            if s.items.isEmpty, let d = s.direct, !s.delivering, d.loop.isBetweenJobs {
                s.delivering = true
                return .handOver(d)
            }
            s.items.append(request)
            return .direct(directAction(&s))
        }
        switch action {
        case .resume(let w): w.continuation.resume(returning: request)
        case .direct(let a): perform(a)
        case .handOver(let d):
            d.completion(request)
            deliver(d)  // what the handler pushed meanwhile, and the end; then idle
        }
    }

    private enum DirectAction { case none, deliver(Direct), schedule(Direct) }

    private func perform(_ a: DirectAction) {
        switch a {
        case .none: break
        case .deliver(let d): deliver(d)
        case .schedule(let d): d.loop.execute { [self] in deliverScheduled() }
        }
    }

    // MARK: The direct consumer

    /// Hands every completion (and the end) to `handler` on `loop`'s thread, outside its jobs,
    /// in order, instead of to an awaiting consumer: a push from the loop's source handler (the
    /// camera's completion event) calls it right there, so a frame costs no task resumption
    /// and no job; a push from anywhere else is delivered by a closure on the loop. The handler
    /// may act as an actor on `loop` (`assumeIsolated`): it never runs inside one of its jobs.
    ///
    /// One consumer at a time: not while a task awaits `next()`.
    public func consumeDirectly(on loop: any CameraEventLoop, _ handler: @escaping @Sendable (DirectEvent) -> Void) {
        consumeDirectly(on: loop, completion: { handler(.completion($0)) }, end: { handler(.finished($0)) })
    }

    /// `consumeDirectly(on:_:)` with a function per kind of event: each completion is passed to
    /// `completion` without being copied into an event (a frame's metadata is a few hundred
    /// bytes), the end (with the error if the camera went away) to `end`.
    public func consumeDirectly(on loop: any CameraEventLoop, completion: @escaping @Sendable (CompletedRequest) -> Void,
                                end: @escaping @Sendable (ShutterbugError?) -> Void) {
        let d = Direct(loop: loop, completion: completion, end: end)
        enum Next { case schedule, idle, none }
        let next: Next = state.withLock { s in
            precondition(s.waiter == nil && s.direct == nil, "CompletionQueue has one consumer at a time")
            s.direct = d
            s.endDelivered = false
            // Nothing to hand over: the consumer is idle from now on, and a producer that waited
            // for that (a simulated sensor in lock-step, which found no consumer at all) must
            // hear it; nothing else would wake it.
            guard !s.items.isEmpty || s.finished else { return .idle }
            guard !s.deliveryScheduled else { return .none }
            s.deliveryScheduled = true
            return .schedule
        }
        switch next {
        case .schedule: loop.execute { [self] in deliverScheduled() }
        case .idle: callIdleHandler()
        case .none: break
        }
    }

    private func callIdleHandler() {
        if hasIdleHandler.load(ordering: .acquiring) { consumerIdle.withLock { $0 }?.call() }
    }

    /// Stops handing completions to the direct consumer; they are kept for the next consumer.
    /// Called on the loop (the consumer's own actor), no delivery runs after it returns.
    public func endDirectConsumer() {
        state.withLock { $0.direct = nil }
    }

    /// With `s` locked, after an item or the end was added: deliver now (the push is on the
    /// loop, outside its jobs), schedule a delivery on the loop, or nothing (one is under way).
    private func directAction(_ s: inout State) -> DirectAction {
        guard let d = s.direct, !s.delivering else { return .none }
        if d.loop.isBetweenJobs {
            s.delivering = true
            return .deliver(d)
        }
        guard !s.deliveryScheduled else { return .none }
        s.deliveryScheduled = true
        return .schedule(d)
    }

    private func deliverScheduled() {
        let d: Direct? = state.withLock { s in
            s.deliveryScheduled = false
            guard let d = s.direct, !s.delivering else { return nil }
            s.delivering = true
            return d
        }
        if let d { deliver(d) }
    }

    /// Hands over everything waiting, in order, then the end if the sequence has ended; pushes
    /// made meanwhile (from the handler itself, such as a stop's cancelled requests) are taken
    /// by this same loop. `delivering` is set by the caller.
    private func deliver(_ d: Direct) {
        while true {
            let event: DirectEvent? = state.withLock { s in
                guard s.direct === d else {
                    s.delivering = false
                    return nil
                }
                if let item = s.items.popFirst() { return .completion(item) }
                if s.finished, !s.endDelivered {
                    s.endDelivered = true
                    return .finished(s.failure)
                }
                s.delivering = false
                return nil
            }
            guard let event else { break }
            switch event {
            case .completion(let c): d.completion(c)
            case .finished(let error): d.end(error)
            }
        }
        callIdleHandler()
    }

    /// Ends the sequence after the requests already pushed; with `error`, the consumer gets it
    /// after the last request.
    public func finish(throwing error: ShutterbugError? = nil) {
        let (waiter, direct): (Waiter?, DirectAction) = state.withLock { s in
            guard !s.finished else { return (nil, .none) }
            s.finished = true
            s.failure = error
            let w = s.waiter
            s.waiter = nil
            return (w, directAction(&s))
        }
        if let waiter {
            if let error { waiter.continuation.resume(throwing: error) } else { waiter.continuation.resume(returning: nil) }
        }
        perform(direct)
    }

    /// How many completions wait to be read.
    public var pendingCount: Int { state.withLock { $0.items.count } }

    /// The next completion if one is waiting, without waiting.
    public func tryNext() -> CompletedRequest? {
        let (item, idle) = state.withLock { s -> (CompletedRequest?, Bool) in
            let item = s.items.popFirst()
            return (item, item != nil && s.items.isEmpty && s.direct != nil && !s.delivering)
        }
        if idle { callIdleHandler() }
        return item
    }

    /// Waits for the next completion; `nil` when the sequence has ended.
    ///
    /// - Throws: `.cameraLost` when the camera went away, `CancellationError` when the task is
    ///   cancelled.
    public func next() async throws -> CompletedRequest? {
        try await next(deadlineToken: nil)
    }

    /// Waits at most `timeout` for the next completion.
    ///
    /// - Throws: `.timeout` when nothing arrived in time, plus what `next()` throws.
    public func next(timeout: Duration) async throws -> CompletedRequest? {
        if let ready = try takeReady() { return ready }
        let token = state.withLock { s -> UInt64 in
            s.nextToken += 1
            return s.nextToken
        }
        let timer = Task { [weak self] in
            try await Task.sleep(for: timeout)
            self?.expire(token: token, after: timeout)
        }
        defer { timer.cancel() }
        return try await next(deadlineToken: token)
    }

    private func takeReady() throws -> CompletedRequest?? {
        try state.withLock { s -> CompletedRequest?? in
            if let item = s.items.popFirst() { return .some(item) }
            if s.finished {
                if let f = s.failure { throw f }
                return .some(nil)
            }
            return nil
        }
    }

    /// Waits for the next completion on the caller's actor: the consumer is resumed onto that
    /// actor's executor, not the global one and then the actor (a `for try await` in an actor
    /// calls this). A session on a camera's `EventLoopExecutor` is resumed on the thread that
    /// pushed, with no other thread woken.
    public func next(isolation actor: isolated (any Actor)?) async throws -> CompletedRequest? {
        try await next(deadlineToken: nil, isolation: actor)
    }

    private func next(deadlineToken: UInt64?, isolation actor: isolated (any Actor)? = #isolation) async throws -> CompletedRequest? {
        if let ready = try takeReady() { return ready }
        let token = deadlineToken ?? state.withLock { s -> UInt64 in
            s.nextToken += 1
            return s.nextToken
        }
        return try await withTaskCancellationHandler(operation: {
            try await withUnsafeThrowingContinuation(isolation: actor) { (c: UnsafeContinuation<CompletedRequest?, any Error>) in
                enum Outcome { case wait, item(CompletedRequest), end, fail(any Error) }
                let outcome: Outcome = state.withLock { s in
                    if let item = s.items.popFirst() { return .item(item) }
                    if s.finished { return s.failure.map { .fail($0) } ?? .end }
                    if Task.isCancelled { return .fail(CancellationError()) }
                    if let e = s.expired, e.token == token {
                        s.expired = nil
                        return .fail(e.error)
                    }
                    precondition(s.waiter == nil && s.direct == nil, "CompletionQueue has one consumer at a time")
                    s.waiter = Waiter(token: token, continuation: c)
                    return .wait
                }
                switch outcome {
                case .wait: callIdleHandler()
                case .item(let item): c.resume(returning: item)
                case .end: c.resume(returning: nil)
                case .fail(let e): c.resume(throwing: e)
                }
            }
        }, onCancel: {
            self.resumeWaiter(token: token, throwing: CancellationError())
        }, isolation: actor)
    }

    private func expire(token: UInt64, after timeout: Duration) {
        resumeWaiter(token: token, throwing: ShutterbugError(.timeout, "no frame completed within \(timeout.millisecondsDescription)"))
    }

    private func resumeWaiter(token: UInt64, throwing error: any Error) {
        let waiter: Waiter? = state.withLock { s in
            guard let w = s.waiter, w.token == token else {
                s.expired = (token, error)
                return nil
            }
            s.waiter = nil
            return w
        }
        waiter?.continuation.resume(throwing: error)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let queue: CompletionQueue
        public mutating func next() async throws -> CompletedRequest? { try await queue.next() }
        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> CompletedRequest? {
            try await queue.next(isolation: actor)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(queue: self) }
}
