import CaptureScheduler
import ShutterbugCore

/// A configured, streaming camera that captures photos and brackets and locks settings, the
/// analogue of AVFoundation's capture device plus photo output.
///
/// The session keeps every request slot queued: each completed slot goes straight back out with
/// the next planned controls (a bracket step, a lock, or a filler that repeats what is in
/// force), unless a photo holds its buffers. Frames are judged by their metadata only.
public actor CaptureSession {
    public let backend: any CameraBackend
    /// The camera's timing in the configured mode (known once `start` has configured it).
    public private(set) var timing: CameraTiming
    private let timingForConfiguration: @Sendable (CameraConfiguration) -> CameraTiming
    /// The clock the scheduler is given (the camera's: its frames' timestamps are on it).
    let now: @Sendable () -> SensorTime
    private var ticker: Task<Void, Never>?
    /// Request slots beyond a bracket's photos, so the sensor never starves while photos are
    /// held: the pipeline depth.
    public static let pipelineDepth = 4

    private var slots = 0
    private var prepared = 0
    private var nextCookie: UInt64 = 0
    private var running = false
    private var failure: ShutterbugError?
    /// Where every request slot is: queued, held by photos or sinks, or spare (pure).
    private var ledger = SlotLedger(slots: 0, depth: pipelineDepth)
    /// A camera that paces by demand (virtual time) takes frames only while something waits on
    /// them: the first `warmUpFrames` after start (AE, AWB and the metadata a capture plans
    /// from), then captures, locks, triggers and controls still to send. The pipeline stays
    /// full meanwhile, as on a real camera; only the frames hold still, so a seeded run repeats.
    static let warmUpFrames = 8
    private var warmUpLeft = 0
    private var warmedUp: CheckedContinuation<Void, Never>?
    /// Sinks beside the photo path, each with the frames it may hold at once.
    private var sinks: [SinkEntry] = []
    private var recent = Ring<FrameMetadata>(capacity: 8)
    private var lastSequence: UInt32?
    /// Controls in force outside a capture, sent again to restore after one.
    private var baseline = CameraControls()
    private var waitingControls = Ring<(controls: CameraControls, locks: [Int])>(capacity: 8)
    /// The locks in flight (pure: frames and time in, outcomes out) and their waiters; an
    /// outcome that comes before its waiter is kept for it.
    private var locks = Locks()
    private var lockWaiters: [Int: CheckedContinuation<SyncPoint, any Error>] = [:]
    private var lockOutcomes: [Int: Result<SyncPoint, any Error>] = [:]
    private var nextLockID = 0
    var captures: [ActiveCapture] = []
    /// Trigger-to-frame selection (pure) and its waiters.
    private var triggers = TriggerSelect()
    private var triggerWaiters: [Int: CheckedContinuation<CapturedPhoto, any Error>] = [:]
    private var nextTriggerID = 0
    private var pump: Task<Void, Never>?
    private var observers: [AsyncStream<FrameMetadata>.Continuation] = []

    var lastSequenceSeen: UInt32? { lastSequence }
    var recentMetadata: [FrameMetadata] {
        var copy = recent
        return copy.removeAll()
    }
    var baselineControls: CameraControls { baseline }

    /// - Parameters:
    ///   - clock: the time the bracket scheduler judges stalls by; default the camera's own
    ///     clock (`backend.now`), so a simulated camera in virtual time never "stalls" because
    ///     the machine is slow.
    ///   - timing: the camera's timing for the configuration `start` settles on; default the
    ///     backend's own (`CameraBackend.timing`).
    public init(backend: any CameraBackend, clock: (@Sendable () -> SensorTime)? = nil,
                timing: (@Sendable (CameraConfiguration) -> CameraTiming)? = nil) {
        self.backend = backend
        self.now = clock ?? { [backend] in backend.now }
        self.timingForConfiguration = timing ?? { [backend] _ in backend.timing }
        self.timing = .conservative(limits: ControlLimits(supported: []))
    }

    /// Every completed frame's metadata from now on, for monitoring. Keeps the newest
    /// `buffering` frames if the reader falls behind; never slows capture.
    public func frames(buffering: Int = 256) -> AsyncStream<FrameMetadata> {
        let (stream, c) = AsyncStream<FrameMetadata>.makeStream(bufferingPolicy: .bufferingNewest(buffering))
        observers.append(c)
        return stream
    }

    /// The newest frame the session has seen.
    public var latestFrame: FrameMetadata? { recent.last }

    /// Photos held by the consumer (not yet released), and frames held by sinks.
    public var photosHeld: Int { ledger.holders }

    /// Returns once exactly `count` photos and sink frames are held (photos are handed back
    /// through a task hop, so a release is not seen at once), or when the task is cancelled.
    public func waitUntilHeld(_ count: Int) async {
        guard ledger.holders != count else { return }
        let id = nextHeldWaiter
        nextHeldWaiter += 1
        await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                if Task.isCancelled { c.resume() } else { heldWaiters.append((id, count, c)) }
            }
        } onCancel: {
            Task { await self.endHeldWait(id) }
        }
    }

    private var heldWaiters: [(id: Int, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var nextHeldWaiter = 0

    private func endHeldWait(_ id: Int) {
        heldWaiters.removeAll { w in
            guard w.id == id else { return false }
            w.continuation.resume()
            return true
        }
    }

    private func resumeHeldWaiters() {
        guard !heldWaiters.isEmpty else { return }
        let holders = ledger.holders
        heldWaiters.removeAll { w in
            guard w.count == holders else { return false }
            w.continuation.resume()
            return true
        }
    }

    /// Every request slot's state: queued + held + spare add up to the slots allocated.
    public var slotLedger: SlotLedger { ledger }

    /// What each sink was offered, kept, and missed while it held all it may.
    public var sinkStatistics: [SinkStatistics] { sinks.map(\.statistics) }

    // MARK: Life

    /// Configures `stream` with buffers for the largest bracket declared here plus the pipeline
    /// depth, allocates them all, and starts streaming with auto exposure and white balance.
    /// A capture never allocates.
    ///
    /// - Throws: `.invalidArgument` for a bracket size outside 1...32.
    @discardableResult
    public func start(stream: StreamRequest, preparedBracketCount: Int = 9, sinks: [any FrameSink] = [], framesPerSink: Int = 1) async throws -> CameraConfiguration {
        try await start(streams: [stream], preparedBracketCount: preparedBracketCount, sinks: sinks, framesPerSink: framesPerSink)
    }

    /// Configures several streams (a raw stream for DNG beside the processed one for JPEG),
    /// each with buffers for the largest bracket plus the pipeline depth plus what the sinks
    /// may hold; a photo carries one buffer per stream, in this order.
    ///
    /// - Parameters:
    ///   - sinks: offered every completed frame (`FrameSink`); each may hold `framesPerSink`
    ///     frames at once, in buffers of its own, so what it holds never takes a bracket's.
    @discardableResult
    public func start(streams: [StreamRequest], preparedBracketCount: Int = 9, sinks: [any FrameSink] = [], framesPerSink: Int = 1) async throws -> CameraConfiguration {
        guard (1...32).contains(preparedBracketCount) else {
            throw ShutterbugError(.invalidArgument, "prepared bracket count must be in 1...32, not \(preparedBracketCount)")
        }
        guard (1...8).contains(framesPerSink) else {
            throw ShutterbugError(.invalidArgument, "frames per sink must be in 1...8, not \(framesPerSink)")
        }
        let sinkBuffers = sinks.count * framesPerSink
        let requests = streams.map { r -> StreamRequest in
            var s = r
            s.bufferCount = preparedBracketCount + Self.pipelineDepth + sinkBuffers
            return s
        }
        let config = try backend.configure(requests)
        timing = timingForConfiguration(config)
        slots = try backend.allocate()
        prepared = max(1, slots - Self.pipelineDepth - sinkBuffers)
        self.sinks = sinks.map { SinkEntry(sink: $0, quota: framesPerSink) }
        baseline = CameraControls(aeEnabled: true, awbEnabled: true,
                                  frameDurationLimits: timing.everyFramePeriod...max(timing.everyFramePeriod, .milliseconds(250)))
        if backend.controlLimits.supported.isDisjoint(with: [.aeEnable, .frameDurationLimits]) { baseline = CameraControls() }
        try backend.start(controls: baseline)
        running = true
        ledger = SlotLedger(slots: slots, depth: Self.pipelineDepth)
        warmUpLeft = Self.warmUpFrames
        topUp()
        let completions = backend.completions
        pump = Task { [weak self] in
            do {
                for try await c in completions {
                    guard let self else { return }
                    await self.handle(c)
                }
            } catch {
                await self?.fail(error as? ShutterbugError ?? ShutterbugError(.system, "\(error)"))
            }
        }
        if backend.pacesByDemand {
            // The warm-up frames run, and come back, before anything else is asked for.
            await withCheckedContinuation { warmedUp = $0 }
        }
        return config
    }

    /// While anything waits on frames (a capture, a lock, a trigger), lets the state machines
    /// see time pass every quarter second on the camera's clock, so a camera that stops
    /// delivering frames fails the wait with the cause instead of hanging it.
    func startTicking() {
        guard ticker == nil else { return }
        ticker = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                guard let self, await self.keepTicking() else { return }
            }
        }
    }

    private func keepTicking() -> Bool {
        tick()
        if (captures.isEmpty && locks.isEmpty && triggers.isEmpty) || !running {
            ticker = nil
            return false
        }
        return true
    }

    /// The most steps a bracket can have with the buffers prepared.
    public var maxBracketedCapturePhotoCount: Int { prepared }

    /// Stops streaming: captures in progress fail, held photos stay readable until released.
    public func stop() {
        guard running else { return }
        running = false
        try? backend.stop()
        pump?.cancel()
        ticker?.cancel()
        ticker = nil
        fail(ShutterbugError(.invalidState, "the session stopped"))
    }

    // MARK: Locks (the configuration scope)

    /// Settings changed together in one request, like AVFoundation's
    /// `lockForConfiguration()`…`unlockForConfiguration()`.
    public struct Configuration: Sendable {
        /// Fixed exposure and gain (ISO 100 = gain 1.0: `Gain(iso: 400)` is 4.0).
        public var customExposure: (duration: Duration, gain: Gain)?
        /// Auto-exposure target bias in stops (AVFoundation's `exposureTargetBias`). The AGC
        /// eases towards it over several frames, so it reports no sync point.
        public var exposureTargetBias: Double?
        /// Focus locked at a lens position.
        public var lockedFocus: Dioptres?
        /// Focus locked at AVFoundation's normalised lens position: 0 is the nearest the lens
        /// focuses (the top of its dioptre range), 1 is infinity (0 dioptres), linear between.
        public var lockedFocusNormalised: Double?
        /// White balance locked at colour gains.
        public var lockedWhiteBalance: ColourGains?
        /// Back to continuous auto exposure, white balance and focus.
        public var continuousAuto = false
        public init() {}
    }

    /// What each lock in a configuration reported.
    public struct ConfigurationResult: Sendable {
        public var exposure: SyncPoint?
        public var focus: SyncPoint?
        public var whiteBalance: SyncPoint?
        /// Settings changed to fit the sensor.
        public var adjustments: [String] = []
    }

    /// Applies a configuration in one request and returns when every lock in it has landed,
    /// with the first frame carrying each.
    ///
    /// - Throws: `.unsupported` for a control the camera lacks (a lens on a fixed-focus
    ///   module); `.timeout` when a setting never shows in the frames.
    public func configure(_ body: (inout Configuration) -> Void) async throws -> ConfigurationResult {
        var config = Configuration()
        body(&config)
        var controls = CameraControls()
        var result = ConfigurationResult()
        var kinds: [Locks.Kind] = []
        let supported = backend.controlLimits.supported
        if config.continuousAuto {
            controls = CameraControls(aeEnabled: true, exposureTime: .zero, analogueGain: Gain(0), awbEnabled: true, afMode: supported.contains(.afMode) ? .continuous : nil)
            baseline.aeEnabled = true
            baseline.exposureTime = nil
            baseline.analogueGain = nil
            baseline.awbEnabled = true
            baseline.colourGains = nil
        }
        if let e = config.customExposure {
            guard supported.isSuperset(of: [.exposureTime, .analogueGain]) else {
                throw ShutterbugError(.unsupported, "\(backend.info.id) does not support manual exposure (no ExposureTime/AnalogueGain controls)")
            }
            let (target, notes) = adjust(exposure: e.duration, gain: e.gain.value, what: "custom exposure")
            result.adjustments += notes
            let fd = timing.framePeriod(for: target.exposure!)
            controls.aeEnabled = false
            controls.exposureTime = target.exposure
            controls.analogueGain = Gain(target.gain!)
            controls.frameDurationLimits = fd...fd
            baseline.aeEnabled = false
            baseline.exposureTime = target.exposure
            baseline.analogueGain = Gain(target.gain!)
            baseline.frameDurationLimits = fd...fd
            kinds.append(.exposure(target))
        }
        if let bias = config.exposureTargetBias {
            guard supported.contains(.exposureValue) else {
                throw ShutterbugError(.unsupported, "\(backend.info.id) does not support an exposure bias (no ExposureValue control)")
            }
            guard (-8...8).contains(bias) else {
                throw ShutterbugError(.invalidArgument, "exposure target bias must be in -8...8 stops, not \(bias)")
            }
            controls.exposureValue = bias
            baseline.exposureValue = bias
        }
        if let n = config.lockedFocusNormalised, config.lockedFocus == nil {
            guard (0...1).contains(n) else {
                throw ShutterbugError(.invalidArgument, "a normalised lens position must be in 0...1, not \(n)")
            }
            config.lockedFocus = Dioptres(normalised: n, in: backend.controlLimits.lensPosition ?? 0...15)
        }
        if let l = config.lockedFocus {
            guard supported.contains(.lensPosition), let range = backend.controlLimits.lensPosition ?? (supported.contains(.lensPosition) ? 0...15 : nil) else {
                throw ShutterbugError(.unsupported, "\(backend.info.id) has no focus motor; lens positions need a camera with one, such as sim:imx708 (Camera Module 3)")
            }
            let clamped = min(max(l.value, range.lowerBound), range.upperBound)
            if clamped != l.value { result.adjustments.append("lens position \(l) adjusted to \(Dioptres(clamped)) (range \(String(format2: range.lowerBound))...\(String(format2: range.upperBound)))") }
            controls.afMode = .manual
            controls.lensPosition = Dioptres(clamped)
            baseline.afMode = .manual
            baseline.lensPosition = Dioptres(clamped)
            kinds.append(.focus(clamped))
        }
        if let g = config.lockedWhiteBalance {
            guard supported.contains(.colourGains) else {
                throw ShutterbugError(.unsupported, "\(backend.info.id) does not support fixed white balance (no ColourGains control)")
            }
            controls.awbEnabled = false
            controls.colourGains = g
            baseline.awbEnabled = false
            baseline.colourGains = g
            kinds.append(.whiteBalance(g))
        }
        guard running else { throw failure ?? ShutterbugError(.invalidState, "the session is not running") }
        if kinds.isEmpty {
            waitingControls.append((controls, []))
            topUp()
            return result
        }
        // One request carries all of them; each fails on its own if its setting never shows
        // (60 frames) or no frame comes for 2 s or ten of the locked exposure's frames.
        let period = controls.exposureTime.map { timing.framePeriod(for: $0) } ?? timing.everyFramePeriod
        let limit = max(.seconds(2), period * 10)
        var ids: [Int] = []
        for kind in kinds {
            ids.append(nextLockID)
            locks.add(id: nextLockID, kind: kind, now: now(), timeLimit: limit)
            nextLockID += 1
        }
        waitingControls.append((controls, ids))
        topUp()
        startTicking()
        try await withThrowingTaskGroup(of: (Locks.Kind, SyncPoint).self) { group in
            for (kind, id) in zip(kinds, ids) {
                group.addTask { (kind, try await self.waitForLock(id)) }
            }
            for try await (kind, point) in group {
                switch kind {
                case .exposure: result.exposure = point
                case .focus: result.focus = point
                case .whiteBalance: result.whiteBalance = point
                }
            }
        }
        return result
    }

    private func waitForLock(_ id: Int) async throws -> SyncPoint {
        try await withCheckedThrowingContinuation { c in
            if let outcome = lockOutcomes.removeValue(forKey: id) { return c.resume(with: outcome) }
            if let f = failure { return c.resume(throwing: f) }
            lockWaiters[id] = c
        }
    }

    /// Settles a lock: resumes its waiter, or keeps the outcome until the waiter arrives.
    private func settle(lock id: Int, _ outcome: Result<SyncPoint, any Error>) {
        if let c = lockWaiters.removeValue(forKey: id) {
            c.resume(with: outcome)
        } else {
            lockOutcomes[id] = outcome
        }
    }

    private func perform(_ outcomes: [Locks.Outcome]) {
        for o in outcomes {
            switch o {
            case .settled(let p):
                settle(lock: p.id, .success(SyncPoint(sequence: p.sequence, timestamp: p.timestamp, requestFrame: p.requestFrame)))
            case .failed(let id, let reason):
                settle(lock: id, .failure(ShutterbugError(.timeout, reason)))
            }
        }
    }

    /// Adjusts a requested exposure and gain to the sensor, explaining each change.
    func adjust(exposure: Duration, gain: Double, what: String) -> (StepTarget, [String]) {
        var notes: [String] = []
        var e = exposure, g = gain
        let er = timing.exposureRange, gr = timing.gainRange
        // Out of range by more than rounding noise (an EV plan's 0.9999999 is not worth a
        // notice): clamp and say so, with enough digits that the two numbers differ.
        let clampedE = min(max(e, er.lowerBound), er.upperBound)
        if abs((clampedE - e).nanosecondsValue) > 1 {
            notes.append("\(what): exposure \(e.exposureDescription) adjusted to \(clampedE.exposureDescription) (sensor range \(er.lowerBound.microsecondsValue.rounded()) µs to \(er.upperBound.millisecondsDescription))")
        }
        e = clampedE
        let clampedG = min(max(g, gr.lowerBound), gr.upperBound)
        if abs(clampedG - g) > 1e-6 * clampedG {
            let (from, to) = String.distinct(g, clampedG)
            notes.append("\(what): gain \(from) adjusted to \(to) (sensor range \(String(format2: gr.lowerBound)) to \(String(format2: gr.upperBound)))")
        }
        g = clampedG
        // Whole lines, so the target is what the sensor will report.
        return (StepTarget(exposure: timing.quantise(e), gain: g), notes)
    }

    // MARK: Capture

    /// Captures a photo or a bracket. Events come in AVFoundation's order; photos hold their
    /// buffers until released.
    public func capture(_ settings: PhotoSettings) -> AsyncThrowingStream<CaptureEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<CaptureEvent, any Error>.makeStream()
        let capture = ActiveCapture(settings: settings, continuation: continuation)
        if let f = failure ?? (running ? nil : ShutterbugError(.invalidState, "the session is not running")) {
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
        continuation.onTermination = { [weak self] reason in
            if case .cancelled = reason { Task { await self?.cancel(captureID: id) } }
        }
        captures.append(capture)
        if captures.count == 1 { activate() }
        return stream
    }

    /// Checks that this camera, as configured, can take `settings`, as `capture` does first;
    /// lets a caller refuse a request before anything is captured.
    ///
    /// - Throws: `.unsupported` for a bracket the camera has no controls for, or
    ///   `.invalidArgument` for more steps than `maxBracketedCapturePhotoCount`, with the range.
    public func validate(_ settings: PhotoSettings) throws {
        guard let b = settings.bracket else { return }
        let supported = backend.controlLimits.supported
        if case .lensPositions = b {
            guard supported.contains(.lensPosition) else {
                throw ShutterbugError(.unsupported, "\(backend.info.id) has no focus motor; a focus bracket needs a camera with one, such as sim:imx708")
            }
        } else if !supported.isSuperset(of: [.exposureTime, .analogueGain]) {
            throw ShutterbugError(.unsupported, "\(backend.info.id) does not support ExposureTime and AnalogueGain, so it cannot bracket exposures")
        }
        if case .manualExposure(let steps) = b {
            let targets = steps.map { adjust(exposure: $0.duration, gain: $0.gain.value, what: "").0 }
            if let reason = ambiguity(targets) { throw ShutterbugError(.invalidArgument, reason) }
        }
        guard (1...prepared).contains(b.count) else {
            throw ShutterbugError(.invalidArgument, "a bracket of \(b.count) steps does not fit: \(backend.info.id) has \(slots) buffers per stream and \(Self.pipelineDepth) stay in flight for the pipeline, so maxBracketedCapturePhotoCount is \(prepared) (accepted 1...\(prepared))")
        }
    }

    /// The first frame whose exposure began at or after `instant` (`SensorTimestamp -
    /// ExposureTime >= instant`): what a trigger at that instant should capture.
    ///
    /// - Throws: `.timeout` when no such frame came within `timeout` on the camera's clock.
    public func captureFrame(exposedAfter instant: SensorTime, timeout: Duration = .seconds(5)) async throws -> CapturedPhoto {
        if let f = failure { throw f }
        guard running else { throw ShutterbugError(.invalidState, "the session is not running") }
        let id = nextTriggerID
        nextTriggerID += 1
        // The deadline counts from the instant or from now, whichever is later: a trigger
        // timestamped in the past still gets its whole timeout.
        let start = max(instant, now())
        triggers.add(id: id, exposedAfter: instant, deadline: start + timeout)
        topUp()
        startTicking()
        return try await withCheckedThrowingContinuation { c in
            triggerWaiters[id] = c
        }
    }

    // MARK: Frames

    private func handle(_ c: CompletedRequest) {
        let m = c.metadata
        var holders = 0
        if c.status == .complete {
            recent.append(m)
            if recent.count > 6 { _ = recent.popFirst() }
            lastSequence = m.sequence
            for o in observers { o.yield(m) }
        }
        if !locks.isEmpty { perform(locks.complete(cookie: c.cookie, status: c.status, metadata: m, now: now(), timing: timing)) }
        if let w = triggers.complete(status: c.status, metadata: m), let cont = triggerWaiters.removeValue(forKey: w.id) {
            let slot = c.slot
            cont.resume(returning: CapturedPhoto(step: ResolvedStep(index: 0, requested: "frame exposed after \(w.instant)", planned: StepTarget(), actual: m),
                                                 metadata: m, buffers: c.buffers) { [weak self] in Task { await self?.returnSlot(slot) } })
            holders += 1
        }
        if let capture = captures.first, judge(c, for: capture) {
            holders += 1
        }
        if c.status == .complete { holders += offerToSinks(c) }
        ledger.completed(c.slot, holders: holders)
        if holders > 0 { resumeHeldWaiters() }
        if warmUpLeft > 0 { warmUpLeft -= 1 }
        if warmUpLeft == 0, let w = warmedUp {
            warmedUp = nil
            w.resume()
        }
        topUp()
    }

    /// Offers a frame to each sink with room for it; returns how many kept it.
    private func offerToSinks(_ c: CompletedRequest) -> Int {
        var kept = 0
        for i in sinks.indices {
            sinks[i].statistics.offered += 1
            guard sinks[i].held < sinks[i].quota else {
                sinks[i].statistics.dropped += 1
                continue
            }
            let slot = c.slot
            let lease = BufferLease { [weak self] in Task { await self?.sinkReleased(i, slot: slot) } }
            if sinks[i].sink.process(SinkFrame(metadata: c.metadata, buffers: c.buffers, lease: lease)) {
                sinks[i].held += 1
                sinks[i].statistics.kept += 1
                kept += 1
            } else {
                // Declined: the frame going away must not give back a hold never taken.
                lease.disarm()
            }
        }
        return kept
    }

    private func sinkReleased(_ index: Int, slot: Int) {
        sinks[index].held -= 1
        returnSlot(slot)
    }

    /// Keeps `pipelineDepth` requests queued, from the spare slots, and lets a camera that
    /// paces by demand take frames while anything waits on them.
    func topUp() {
        while running, let slot = ledger.nextToQueue() {
            requeue(slot)
        }
        if backend.pacesByDemand { backend.allowFrames(hasDemand) }
    }

    private var hasDemand: Bool {
        warmUpLeft > 0 || !captures.isEmpty || !locks.isEmpty || !triggers.isEmpty || !waitingControls.isEmpty
    }

    private func requeue(_ slot: Int) {
        guard running else { return }
        let cookie = nextCookie
        nextCookie += 1
        var controls = CameraControls.none
        if let capture = captures.first, let s = capture.scheduler?.controls(forRequest: cookie) {
            controls = s
        } else if captures.first?.scheduler == nil || captures.first?.scheduler?.isFinished == true, let w = waitingControls.popFirst() {
            controls = w.controls
            locks.sent(w.locks, cookie: cookie)
        }
        do {
            try backend.queue(slot: slot, cookie: cookie, controls: controls)
        } catch {
            ledger.queueFailed(slot)
            if running { fail(error as? ShutterbugError ?? ShutterbugError(.system, "\(error)")) }
        }
    }

    /// The controls in force outside captures go out with the next request.
    func restoreBaseline() {
        waitingControls.append((baseline, []))
        topUp()
    }

    /// Called when a photo is released: the slot goes back out.
    func returnSlot(_ slot: Int) {
        guard ledger.released(slot) else { return }
        resumeHeldWaiters()
        topUp()
    }

    func fail(_ error: ShutterbugError) {
        failure = failure ?? error
        warmedUp?.resume()
        warmedUp = nil
        for capture in captures { capture.finish(throwing: error) }
        captures.removeAll()
        for id in locks.ids {
            locks.remove(id)
            settle(lock: id, .failure(error))
        }
        for (_, c) in triggerWaiters { c.resume(throwing: error) }
        triggerWaiters.removeAll()
        triggers = TriggerSelect()
    }

    private func cancel(captureID: Int64) {
        guard let index = captures.firstIndex(where: { $0.settings.uniqueID == captureID }) else { return }
        let capture = captures.remove(at: index)
        for slot in capture.heldSlots { returnSlot(slot) }
        // Whatever the bracket set goes back to what was in force.
        if capture.scheduler != nil { restoreBaseline() }
        if index == 0, !captures.isEmpty { activate() }
    }

    /// Lets the state machines see time pass: stalled locks, triggers and captures fail.
    func tick() {
        let t = now()
        if !locks.isEmpty { perform(locks.tick(now: t)) }
        for w in triggers.tick(now: t) {
            triggerWaiters.removeValue(forKey: w.id)?.resume(throwing: ShutterbugError(.timeout, "no frame exposed after \(w.instant) came back by \(w.deadline) (the camera's clock is now \(t))"))
        }
        tickCaptures(now: t)
    }
}

/// What a sink was offered, kept, and missed because it held all the frames it may.
public struct SinkStatistics: Sendable, Hashable {
    public var name: String
    public var offered = 0
    public var kept = 0
    public var dropped = 0
}

struct SinkEntry {
    let sink: any FrameSink
    let quota: Int
    var held = 0
    var statistics: SinkStatistics

    init(sink: any FrameSink, quota: Int) {
        self.sink = sink
        self.quota = quota
        statistics = SinkStatistics(name: sink.name)
    }
}
