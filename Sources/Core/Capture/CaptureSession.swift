import CaptureScheduler
import ShutterbugCore
import ShutterbugPosix

/// A configured, streaming camera that captures photos and brackets and locks settings, the
/// analogue of AVFoundation's capture device plus photo output.
///
/// The session keeps every request slot queued: each completed slot goes straight back out with
/// the next planned controls (a bracket step, a lock, or a filler that repeats what is in
/// force), unless a photo holds its buffers. Frames are judged by their metadata only.
public actor CaptureSession {
    public let backend: any CameraBackend
    /// The thread the session runs on when it has one (the camera's): a completion is handled
    /// where it is heard, with no thread woken between libcamera's and this one.
    let eventLoop: (any CameraEventLoop)?
    /// Otherwise a plain actor's executor, as if the session were one (shared: the helper
    /// holds no state and runs nothing of its own).
    let poolExecutor = PoolExecutorHost()

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        eventLoop?.asUnownedSerialExecutor() ?? poolExecutor.unownedExecutor
    }
    /// The camera's clock, its timing for a configuration and its constant traits.
    let camera: CameraTraits
    /// Request slots beyond a bracket's photos, so the sensor never starves while photos are
    /// held: the pipeline depth.
    public static let pipelineDepth = RequestFeeder.pipelineDepth

    /// The most the configuration's buffers may take.
    public nonisolated let memoryBudget: MemoryBudget
    public nonisolated let poolBudget: MemoryBudget
    // The session's state below is the actor's own: only its isolation reaches it, one runner
    // at a time, so Swift's run-time exclusivity check on each access (a `swift_beginAccess`
    // and a thread-local lookup, some 30 per frame) guards nothing the isolation does not: 1.5
    // µs of the 93 a frame cost on the emulated board (bench-cam). The checks are off for these
    // properties alone (`@exclusivity(unchecked)`, not a compiler flag, which a package that
    // depends on Shutterbug could not build with); the compile-time checks stay, and the
    // machines they hold are values that never call back into the session.

    /// Prepared, running, failed or stopped; how completions come in.
    @exclusivity(unchecked) var life = Life()
    /// The pure machines: the requests (slots, numbers, controls between captures, warm-up),
    /// the captures and triggers (frames in, actions out), and the locks.
    @exclusivity(unchecked) var feeder = RequestFeeder()
    @exclusivity(unchecked) var machine = CaptureMachine(timing: .conservative(limits: ControlLimits(supported: [])), limits: ControlLimits(supported: []))
    @exclusivity(unchecked) var locks = Locks()
    /// Observers, monitors, sinks and held-frame waiters.
    @exclusivity(unchecked) var fanOut = FrameFanOut()
    /// Whoever waits on the machines: captures' event streams, locks, triggers, the warm-up.
    @exclusivity(unchecked) var waiters = Waiters()
    /// What the frames have shown: counts, and the camera's time as they bring it.
    @exclusivity(unchecked) var seen = FrameTally()
    /// Copies of the frames held beyond what the camera's buffers can spare.
    @exclusivity(unchecked) var pool = HeldFramePool()
    /// Where the pool's copies are made: a thread of its own, off the actor.
    let copier = PoolCopier()

    deinit { copier.finish() }

    /// - Parameters:
    ///   - clock: the time the bracket scheduler judges stalls by; default the camera's own
    ///     clock (`backend.now`), so a simulated camera in virtual time never "stalls" because
    ///     the machine is slow.
    ///   - timing: the camera's timing for the configuration `start` settles on; default the
    ///     backend's own (`CameraBackend.timing`).
    ///   - memoryBudget: the most the buffers may take; a configuration over it is refused
    ///     before anything is allocated (frames held for zero shutter lag that do not fit are
    ///     copied into a pool instead). Default `MemoryBudget.system()`.
    ///   - poolBudget: the most those copies may take (process memory). Default
    ///     `MemoryBudget.pool()`.
    ///   - executor: the thread the session runs on; default the camera's own
    ///     (`CameraBackend.executor`: on libcamera, the thread that hears its completions),
    ///     else Swift's cooperative pool.
    public init(backend: any CameraBackend, clock: (@Sendable () -> SensorTime)? = nil,
                timing: (@Sendable (CameraConfiguration) -> CameraTiming)? = nil,
                memoryBudget: MemoryBudget = .system(), poolBudget: MemoryBudget = .pool(), executor: (any CameraEventLoop)? = nil) {
        self.backend = backend
        self.eventLoop = executor ?? backend.executor
        self.camera = CameraTraits(now: clock ?? { [backend] in backend.now }, timing: timing ?? { [backend] _ in backend.timing },
                                   framesOnTriggerOnly: backend.framesOnTriggerOnly, pacesByDemand: backend.pacesByDemand)
        self.memoryBudget = memoryBudget
        self.poolBudget = poolBudget
    }

    /// The configuration in force, once prepared.
    public var configuration: CameraConfiguration? { life.configuration }

    /// The camera's timing in the configured mode (known once `prepare` has configured it).
    public var timing: CameraTiming { machine.timing }

    /// Every completed frame's metadata from now on, for monitoring. Keeps the newest
    /// `buffering` frames if the reader falls behind; never slows capture. It watches and does
    /// not ask: on a camera that paces its frames by demand (the simulated camera in virtual
    /// time) frames come only while a capture, a lock, a trigger or a request monitor
    /// (`requests(count:)`) waits on them, so a loop over this stream alone waits for ever there.
    public func frames(buffering: Int = 256) -> AsyncStream<FrameMetadata> {
        let (stream, c) = AsyncStream<FrameMetadata>.makeStream(bufferingPolicy: .bufferingNewest(buffering))
        fanOut.observe(c)
        return stream
    }

    /// The newest frame the session has seen.
    public var latestFrame: FrameMetadata? { machine.newest }

    /// What the session has seen since it started, for metrics.
    public typealias FrameStatistics = CaptureScheduler.FrameStatistics

    /// Counts of the frames seen since the session started.
    public var statistics: FrameStatistics { seen.statistics }

    /// Why the session failed (a request error, a camera that went away), if it did; `stop`
    /// itself is not a failure.
    public var failureReason: ShutterbugError? { life.running ? life.failure : nil }

    /// Photos held by the consumer (not yet released), and frames held by sinks.
    public var photosHeld: Int { feeder.ledger.holders }

    /// Every request slot's state: queued + held + spare add up to the slots allocated.
    public var slotLedger: SlotLedger { feeder.ledger }

    /// The most frames held for zero-shutter-lag captures (`prepare(holding:)`), and those held now.
    public var heldFramesCapacity: Int { machine.heldFramesCapacity }
    public var heldFrames: [FrameMetadata] { machine.heldFrames }
    /// Of the frames held, the most copied into a pool (the camera's buffers could not spare
    /// them), and the pool's bytes at most (`BufferPlan.poolBytes`).
    public var heldFramesPooled: (frames: Int, bytes: Int) { (life.poolFrames, life.poolBytes) }
    /// The frames held now as copies in the pool, oldest first.
    public var heldFramesInPool: [FrameMetadata] { machine.heldFramesInPool }
    /// Frames copied into the pool since the session started.
    public var heldFramesCopied: Int { pool.copies }

    /// The camera's frame period now: the newest frame's, else the mode's fastest (a
    /// pre-capture window is counted in frames at it).
    public var framePeriod: Duration { machine.newest.flatMap { $0.frameDuration ?? $0.measuredFrameInterval } ?? machine.timing.everyFramePeriod }

    /// What each sink was offered, kept, and missed while it held all it may.
    public var sinkStatistics: [SinkStatistics] { fanOut.sinkStatistics }

    // MARK: Life

    /// Configures `stream` with buffers for the largest bracket declared here plus the pipeline
    /// depth, allocates them all, and starts streaming with auto exposure and white balance.
    /// A capture never allocates.
    ///
    /// - Throws: `.invalidArgument` for a bracket size outside 1...32.
    @discardableResult
    public func start(stream: StreamRequest, preparedBracketCount: Int = 9, controls: CameraControls? = nil, sinks: [any FrameSink] = [], framesPerSink: Int = 1,
                      holding held: HeldFrames = .none, bursts: [BurstRequest] = []) async throws -> CameraConfiguration {
        try await start(streams: [stream], preparedBracketCount: preparedBracketCount, controls: controls, sinks: sinks, framesPerSink: framesPerSink, holding: held, bursts: bursts)
    }

    /// Configures several streams (a raw stream for DNG beside the processed one for JPEG),
    /// each with buffers for the largest bracket plus the pipeline depth plus what the sinks
    /// may hold, and starts; a photo carries one buffer per stream, in this order.
    /// `prepare` then `start(controls:)` in one call.
    @discardableResult
    public func start(streams: [StreamRequest], preparedBracketCount: Int = 9, controls: CameraControls? = nil, sinks: [any FrameSink] = [], framesPerSink: Int = 1,
                      holding held: HeldFrames = .none, bursts: [BurstRequest] = []) async throws -> CameraConfiguration {
        let config = try prepare(streams: streams, preparedBracketCount: preparedBracketCount, sinks: sinks, framesPerSink: framesPerSink, holding: held, bursts: bursts)
        try await start(controls: controls)
        return config
    }

    /// Configures the streams and allocates every buffer, without starting: the camera's
    /// mode and timing are then known (`timing`, `backend.configuredMode`), to choose the
    /// controls `start(controls:)` begins with.
    ///
    /// - Parameters:
    ///   - sinks: offered every completed frame (`FrameSink`); each may hold `framesPerSink`
    ///     frames at once, in buffers of its own, so what it holds never takes a bracket's.
    ///   - held: the newest frames held in place for zero-shutter-lag captures
    ///     (`PhotoSettings.zeroShutterLag`), in buffers of their own: a count, or a window at
    ///     the mode's fastest frame rate (0...32 frames either way).
    ///   - bursts: pre-capture's bursts: the frames before each are held, and photos for the
    ///     largest (windows at the mode's fastest frame rate) besides the bracket's.
    /// - Throws: `.invalidArgument` for a bracket size outside 1...32, frames per sink
    ///   outside 1...8, ring frames outside 0...32, or buffers over the memory budget (naming
    ///   the bytes); `.invalidState` while running.
    @discardableResult
    public func prepare(streams: [StreamRequest], preparedBracketCount: Int = 9, sinks: [any FrameSink] = [], framesPerSink: Int = 1,
                        holding held: HeldFrames = .none, bursts: [BurstRequest] = []) throws -> CameraConfiguration {
        guard !life.running else { throw ShutterbugError(.invalidState, "the session is running; stop it before configuring it again") }
        var plan = try BufferPlan(bracketCount: preparedBracketCount, sinks: sinks.count, framesPerSink: framesPerSink, holding: held, bursts: bursts, period: nil)
        // A camera an earlier session used may still hold that session's cancelled requests
        // (stop returns them): they are not this session's, and their slots are about to be
        // allocated afresh.
        while backend.completions.tryNext() != nil {}
        var config = try backend.configure(plan.requests(streams))
        if held.window > .zero || bursts.contains(where: \.hasWindow) {
            // The mode (and so its fastest frame rate) is known once configured: the buffers are
            // asked for again with the frames that hold the windows.
            plan = try BufferPlan(bracketCount: preparedBracketCount, sinks: sinks.count, framesPerSink: framesPerSink, holding: held, bursts: bursts, period: camera.timing(config).everyFramePeriod)
            config = try backend.configure(plan.requests(streams))
        }
        if config.bufferBytes > memoryBudget.bytes, let n = plan.fittingInPlace(config, within: memoryBudget), n < plan.ringFrames {
            // The camera's buffers with every frame held in place are over the budget (a Pi 4's
            // CMA pool): as many held in place as fit, the rest copied into the pool, which
            // process memory holds.
            plan.ringInPlaceLimit = n
            config = try backend.configure(plan.requests(streams))
        }
        try plan.check(config, within: memoryBudget, pool: poolBudget)
        let slots = try backend.allocate()
        // The frames held that the camera's buffers cannot spare beside the photos, the
        // pipeline and the sinks are copied into the pool.
        machine = CaptureMachine(timing: camera.timing(config), limits: backend.controlLimits, keepsNewest: camera.framesOnTriggerOnly, ringFrames: plan.ringFrames,
                                 ringFramesInPlace: plan.ringInPlace(slots: slots))
        (life.poolFrames, life.poolBytes) = (plan.ringPooled(slots: slots), plan.poolBytes(config))
        (life.configuration, life.slots, life.photos) = (config, slots, plan.photos(slots: slots))
        fanOut.setSinks(sinks, quota: framesPerSink)
        return config
    }

    /// Starts streaming a prepared session. On a camera that paces by demand, returns once the
    /// warm-up frames have come back.
    ///
    /// - Parameter controls: the controls in force outside captures, from the first frame;
    ///   default auto exposure and white balance at any frame rate from the mode's fastest
    ///   to 4 fps.
    /// - Throws: `.invalidState` when not prepared, already running, or stopped (a session runs
    ///   once).
    public func start(controls: CameraControls? = nil) async throws {
        guard life.slots > 0 else { throw ShutterbugError(.invalidState, "the session is not prepared: call prepare(streams:) first") }
        guard !life.running else { throw ShutterbugError(.invalidState, "the session is already running") }
        // One run per session: a stopped session's requests may still be coming back.
        guard life.failure == nil, case .none = life.delivery else {
            throw ShutterbugError(.invalidState, "a session runs once; this one has stopped (\(life.failure?.message ?? "stopped")): make a new CaptureSession")
        }
        var baseline = CameraControls(aeEnabled: true, awbEnabled: true, frameDurationLimits: timing.autoFrameDurationLimits)
        if backend.controlLimits.supported.isDisjoint(with: [.aeEnable, .frameDurationLimits]) { baseline = CameraControls() }
        if let controls { baseline = controls }
        machine.baseline = baseline
        feeder.refused(try backend.start(controls: baseline))
        life.running = true
        // A triggered sensor makes frames only when pulsed: there is nothing to warm up on.
        feeder.start(slots: life.slots, warmUp: !camera.framesOnTriggerOnly)
        topUp()
        let completions = backend.completions
        if let eventLoop {
            // On the camera's thread the completions come to the session directly, where the
            // camera's event is heard, outside any of the session's jobs (so the handler is
            // the actor's only runner, as a job would be): a frame costs no task resumption,
            // as cam's event loop callback costs none.
            life.delivery = .direct
            completions.consumeDirectly(on: eventLoop, completion: { [weak self] c in
                // The queue hands a completion over only on the loop's thread between its jobs
                // (`isBetweenJobs`), so no job of this actor runs and the thread may act as it;
                // the check costs a thread-local read and the executor's thread comparison.
                self?.assumeIsolated { $0.handle(c) }
            }, end: { [weak self] error in
                guard let error else { return }
                self?.assumeIsolated { $0.fail(error) }
            })
        } else {
            life.delivery = .pump(Task { await self.pumpCompletions(completions) })
        }
        if camera.pacesByDemand && feeder.warmUpLeft > 0 {
            // The warm-up frames run, and come back, before anything else is asked for.
            await withCheckedContinuation { waiters.warmedUp = $0 }
        }
    }

    /// Handles each completion, for a camera without an event loop (the simulated one): a
    /// loop inside the actor, so a frame costs one task resumption and no hop onto the actor
    /// from a task of its own. Holds the session until the camera's completions end or `stop`
    /// cancels it.
    func pumpCompletions(_ completions: CompletionQueue) async {
        do {
            for try await c in completions {
                handle(c)
                // Completions always ready (a consumer behind) would otherwise keep the actor:
                // other calls (stop, capture) get their turn between frames.
                if completions.pendingCount > 0 { await Task.yield() }
            }
        } catch {
            fail(error as? ShutterbugError ?? ShutterbugError(.system, "\(error)"))
        }
    }

    /// While anything waits on frames (a capture, a lock, a trigger), lets the state machines
    /// see time pass every quarter second on the camera's clock, so a camera that stops
    /// delivering frames fails the wait with the cause instead of hanging it.
    func startTicking() {
        guard life.ticker == nil else { return }
        life.ticker = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                guard let self, await self.keepTicking() else { return }
            }
        }
    }

    func keepTicking() -> Bool {
        tick()
        if (machine.isIdle && locks.isEmpty) || !life.running {
            life.ticker = nil
            return false
        }
        return true
    }

    /// The most steps a bracket can have with the buffers prepared.
    public var maxBracketedCapturePhotoCount: Int { life.photos }

    /// Stops streaming: captures in progress fail, held photos stay readable until released.
    public func stop() {
        guard life.running else { return }
        life.running = false
        for slot in machine.dropRetained() { returnSlot(slot) }
        // Copies still reading the camera's buffers finish before the camera stops (their
        // slots come back through a task hop, as released photos' do).
        copier.finish()
        try? backend.stop()
        switch life.delivery {
        case .direct: backend.completions.endDirectConsumer()
        case .pump(let task): task.cancel()
        case .none, .ended: break
        }
        // Not `.none`: a session runs once.
        life.delivery = .ended
        life.ticker?.cancel()
        life.ticker = nil
        seen.stopped()
        fail(ShutterbugError(.invalidState, "the session stopped"))
    }

    // MARK: Capture

    /// Captures a photo or a bracket. Events come in AVFoundation's order; photos hold their
    /// buffers until released.
    public func capture(_ settings: PhotoSettings) -> AsyncThrowingStream<CaptureEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<CaptureEvent, any Error>.makeStream()
        if let f = life.failure ?? (life.running ? nil : ShutterbugError(.invalidState, "the session is not running")) {
            continuation.finish(throwing: f)
            return stream
        }
        do {
            try validate(settings)
        } catch {
            continuation.finish(throwing: error)
            return stream
        }
        let id = settings.uniqueID
        guard waiters.captures[id] == nil else {
            continuation.finish(throwing: ShutterbugError(.invalidArgument, "these photo settings (unique ID \(id)) are being captured already; make new PhotoSettings for each capture, as AVFoundation asks"))
            return stream
        }
        continuation.onTermination = { [weak self] reason in
            if case .cancelled = reason { Task { await self?.cancel(captureID: id) } }
        }
        waiters.captures[id] = continuation
        machine.add(settings, now: camera.now())
        startTicking()
        topUp()
        return stream
    }

    /// The unique IDs of the captures asked for and not over (waiting for frames, or for
    /// their last photo to be handed out).
    public var capturesInProgress: Set<Int64> { Set(waiters.captures.keys) }

    /// Calls `observer` with each capture's unique ID as the capture ends (its last event
    /// handed out, or it failed or was cancelled), on the session, before the frame after it
    /// is handled. Returns a token for `removeCaptureEndObserver`.
    public func addCaptureEndObserver(_ observer: @escaping @Sendable (Int64) -> Void) -> Int {
        let token = waiters.newID()
        waiters.captureEndObservers[token] = observer
        return token
    }

    public func removeCaptureEndObserver(_ token: Int) {
        waiters.captureEndObservers[token] = nil
    }

    /// A capture is over: its waiter, and its observers told.
    private func endCapture(_ id: Int64) -> AsyncThrowingStream<CaptureEvent, any Error>.Continuation? {
        guard let c = waiters.captures.removeValue(forKey: id) else { return nil }
        for o in waiters.captureEndObservers.values { o(id) }
        return c
    }

    /// Checks that this camera, as configured, can take `settings`, as `capture` does first;
    /// lets a caller refuse a request before anything is captured.
    ///
    /// - Throws: `.unsupported` for a bracket the camera has no controls for, or
    ///   `.invalidArgument` for more steps than `maxBracketedCapturePhotoCount`, with the range.
    public func validate(_ settings: PhotoSettings) throws {
        try machine.validate(settings, camera: backend.info.id, slots: life.slots, photos: life.photos)
    }

    // MARK: Frames

    func handle(_ c: CompletedRequest) {
        // A completion already on its way when `stop` ran (the pump resumed with it and waited
        // for the actor behind `stop`): nothing holds it now, not the ring `stop` emptied, so
        // its slot is spare rather than held for good.
        guard life.running else {
            _ = feeder.completed(c, holders: 0)
            return
        }
        // Time is the camera's. A camera that paces its frames by demand (virtual time) has a
        // clock that jumps over a stall, so no tick sees the stall pass: a frame that comes
        // after a gap lets the machines judge the gap before they take it, and progress is
        // counted by the frames' own times. A real-time camera's stalls are seen by the ticks,
        // which never blame the camera for frames it dropped while the session was starved
        // of CPU (that gap is ours).
        if camera.pacesByDemand, let gapEnd = seen.arrived(c), !(machine.isIdle && locks.isEmpty) {
            judge(at: gapEnd)
        }
        defer { seen.handled() }
        seen.count(c)
        fanOut.publish(c, carriedControlsFor: fanOut.records(c.status) ? feeder.carriedControls(c.cookie) : nil)
        if !locks.isEmpty { perform(locks.complete(cookie: c.cookie, status: c.status, metadata: c.metadata, now: progressTime(), timing: timing)) }
        var sinkHolds = 0
        if c.status == .complete, fanOut.sinkCount > 0 {
            let slot = c.slot
            sinkHolds = fanOut.offerToSinks(c) { i in BufferLease { [weak self] in Task { await self?.sinkReleased(i, slot: slot) } } }
        }
        let holders = sinkHolds + machine.frame(c, now: progressTime(), clock: seen.frameTime == nil ? nil : camera.now(), otherHolders: sinkHolds)
        let warmUpEnded = feeder.completed(c, holders: holders)
        if holders > 0 { fanOut.held(feeder.ledger.holders) }
        if warmUpEnded, let w = waiters.warmedUp {
            waiters.warmedUp = nil
            w.resume()
        }
        topUp()
    }

    /// Keeps `pipelineDepth` requests queued, from the spare slots, lets a camera that paces by
    /// demand take frames while anything waits on them, and carries out what the capture
    /// machine decided.
    func topUp() {
        // What the machine decided first: a restore waits for the next request.
        applyMachineActions()
        // Not once the session failed: a camera that refuses requests would hand the slot
        // straight back, and this would spin.
        while life.running, life.failure == nil, let (slot, request) = feeder.nextToQueue() {
            requeue(slot, request: request)
        }
        applyMachineActions()
        if camera.pacesByDemand { backend.allowFrames(hasDemand) }
    }

    var hasDemand: Bool {
        feeder.wantsFrames || !machine.isIdle || !locks.isEmpty || fanOut.wantsFrames
    }

    /// When progress was made: the frame being handled's time, else the camera's clock.
    func progressTime() -> SensorTime { seen.frameTime ?? camera.now() }

    func requeue(_ slot: Int, request cookie: UInt64) {
        guard life.running else { return }
        // A capture's own controls (a bracket step, a phase lock's pre-roll); between captures,
        // controls asked for this request, a configuration, a restore; else none (a filler).
        var controls = CameraControls()  // none (not the static: a once-check per frame)
        if let c = machine.controls(forRequest: cookie, queued: feeder.ledger.queuedCount, now: progressTime(), clock: seen.frameTime == nil ? nil : camera.now()) {
            controls = c
        } else if machine.isBetweenCaptures, let w = feeder.betweenCaptures(cookie) {
            controls = w.controls
            if !w.locks.isEmpty { locks.sent(w.locks, cookie: cookie) }
        }
        do {
            feeder.refused(try backend.queue(slot: slot, cookie: cookie, controls: controls))
        } catch {
            feeder.queueFailed(slot)
            if life.running { fail(error as? ShutterbugError ?? ShutterbugError(.system, "\(error)")) }
        }
    }

    /// Carries out the capture machine's actions, in order: events to the captures' streams,
    /// frames to triggers, holds given back, the baseline restored.
    func applyMachineActions() {
        guard !life.applying, machine.hasActions else { return }
        life.applying = true
        defer { life.applying = false }
        while machine.hasActions {
            for a in machine.takeActions() { apply(a) }
        }
    }

    private func apply(_ a: CaptureMachine.Action) {
        switch a {
        case .resolved(let id, let r): waiters.captures[id]?.yield(.settingsResolved(r))
        case .exposureStarted(let id, let t): waiters.captures[id]?.yield(.exposureStarted(t))
        case .exposureEnded(let id, let t): waiters.captures[id]?.yield(.exposureEnded(t))
        case .photo(let id, let step, let frame):
            // Made first, whoever takes it: a photo nobody reads (its stream was cancelled)
            // gives its slot back as it is freed.
            let p = photo(frame, step: step)
            waiters.captures[id]?.yield(.photo(p))
        case .finished(let id, let r):
            let c = endCapture(id)
            c?.yield(.captureFinished(r))
            c?.finish()
        case .failed(let id, let error): endCapture(id)?.finish(throwing: error)
        case .release(let slot): returnSlot(slot)
        case .pool(let frame, let id):
            // Copied before its slot is queued again; then the slot goes back. The bytes are
            // copied off the actor; a photo of the copy made meanwhile waits for them.
            let slot = frame.slot
            if let copy = pool.copy(frame, id: id) {
                copier.run(copy) { [weak self] in Task { await self?.returnSlot(slot) } }
            } else {
                returnSlot(slot)
            }
        case .restoreBaseline: feeder.enqueue(machine.baseline)
        case .triggered(let id, let instant, let frame):
            let p = photo(frame, step: ResolvedStep(index: 0, requested: "frame exposed after \(instant)", planned: StepTarget(), actual: frame.metadata))
            waiters.triggers.removeValue(forKey: id)?.resume(returning: p)
        case .triggerFailed(let id, let error): waiters.triggers.removeValue(forKey: id)?.resume(throwing: error)
        }
    }

    /// A frame lent out as a photo: its slot goes back when the photo is released or freed.
    func photo(_ frame: CompletedRequest, step: ResolvedStep) -> CapturedPhoto {
        let slot = frame.slot
        let pooled = ExposureRing.isPooled(slot)
        let buffers = pooled ? pool.buffers(slot) ?? [] : frame.buffers
        return CapturedPhoto(step: step, metadata: frame.metadata, buffers: buffers, fromPool: pooled) { [weak self] in Task { await self?.returnSlot(slot) } }
    }

    /// Called when a photo is released: the slot goes back out (a pooled copy's memory, to
    /// the pool's free list).
    func returnSlot(_ slot: Int) {
        if ExposureRing.isPooled(slot) { return pool.release(slot) }
        guard feeder.released(slot) else { return }
        fanOut.held(feeder.ledger.holders)
        topUp()
    }

    func fail(_ error: ShutterbugError) {
        life.failure = life.failure ?? error
        waiters.warmedUp?.resume()
        waiters.warmedUp = nil
        machine.failAll(error)
        for id in locks.ids {
            locks.remove(id)
            settle(lock: id, .failure(error))
        }
        fanOut.endMonitors()
        applyMachineActions()
    }

    func cancel(captureID: Int64) {
        guard endCapture(captureID) != nil else { return }
        machine.cancel(captureID, now: camera.now())
        topUp()
    }

    /// Lets the state machines see time pass: stalled locks, triggers and captures fail.
    ///
    /// A stall is the camera's, never ours: while completions the camera has delivered wait to
    /// be handled (the session starved of CPU, behind its camera), time is not judged; the
    /// frames in the backlog are the progress, and the next tick after them judges again.
    func tick() {
        guard backend.completions.isConsumerIdle else { return }
        judge(at: camera.now())
    }

    /// Virtual time: the camera's clock has reached `t` with no frame since the last one
    /// handled (`CameraBackend.holdFrames` returned): the machines judge the wait as real
    /// time's ticks would, so a capture the camera stalled under fails at its limit, not when
    /// the next frame comes. Ignored for a real-time camera (its ticks judge).
    /// An instant the clock has not reached (the wait for it was cancelled, or the camera
    /// stopped first) is ignored: judged there, a capture under way would fail for a stall
    /// that never happened (a trigger restarted by a reload while its next instant was 19 s
    /// ahead failed a timelapse's bracket as "no frame came back for 18.9 s").
    public func clockReached(_ t: SensorTime) {
        guard camera.pacesByDemand, life.running, backend.completions.isConsumerIdle, t <= camera.now() else { return }
        judge(at: t)
    }

    /// Lets the state machines see the camera's clock at `t`: stalled locks, triggers and
    /// captures fail.
    func judge(at t: SensorTime) {
        if !locks.isEmpty { perform(locks.tick(now: t)) }
        machine.tick(now: t)
        topUp()
    }
}

/// A stateless actor whose executor a `CaptureSession` without a thread of its own uses: the
/// session then runs on the cooperative pool exactly as a plain actor would.
final actor PoolExecutorHost {}
