import ShutterbugCore
import ShutterbugPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A camera in-process, behaving like the Raspberry Pi pipeline (`SimulatedPipeline`): the
/// default when no camera is attached, and the bed every scheduling rule is tested on.
///
/// A sensor thread runs the frame loop: in real time it paces frames on the monotonic clock and
/// drops frames when no request is waiting (a starved pipeline); in virtual time it runs as fast
/// as the CPU allows and waits for requests instead.
public final class SimulatedCamera: CameraBackend, @unchecked Sendable {
    // `@unchecked Sendable`: every mutable field below is guarded by `lock`, which the sensor
    // thread and callers share; the pipeline itself lives on the sensor thread only.

    public let profile: SensorProfile
    public let options: SimulationOptions
    public let info: CameraInfo
    public let completions = CompletionQueue()

    private let lock = ConditionLock()
    private let renderer = SceneRenderer()
    private var requested: [StreamRequest] = []
    private var streams: [StreamConfiguration] = []
    private var mode: SensorMode
    private var slotBuffers: [[SimulatedFrameBuffer]] = []
    private var slotBoxes: [[any FrameBuffer]] = []
    private var queued = Ring<SimulatedPipeline.Request>(capacity: 16)
    private var slotQueued: [Bool] = []
    private var running = false
    private var stopping = false
    private var lost = false
    private var requestedStall: Duration?
    /// Virtual time: the completion time of the frame last delivered.
    private var virtualNow: SensorTime?
    private var released = false
    private var thread: OSThread?
    private var startCount: UInt64 = 0
    /// Virtual-time gate (`allowFrames`): off until a consumer first uses it.
    private var gated = false
    private var framesAllowed = true
    /// Virtual time: each holder's instant (`holdFrames`), the frame the sensor thread is about
    /// to deliver (its completion), and who waits for the camera to reach their instant.
    private var holds: [UInt64: SensorTime] = [:]
    private var pendingCompletion: SensorTime?
    private var holdWaiters: [(holder: UInt64, instant: SensorTime, continuation: CheckedContinuation<Void, Never>)] = []
    /// External-trigger mode: pulses waiting for the sensor, and those it ignored.
    private var pulses = Ring<(start: SensorTime, width: Duration)>(capacity: 64)
    private var ignoredPulses = 0
    private var pulseBusyUntil: SensorTime?

    /// The clock its frames are timed on: CLOCK_MONOTONIC in real time; in virtual time the
    /// `VirtualCameraClock` it was given (a job's, shared by every camera it opens) or its own.
    public let clock: any CameraClock
    private let virtualClock: VirtualCameraClock?

    /// Creates a simulated camera with a sensor profile.
    ///
    /// - Precondition: `options.externalTrigger` only for a profile with an external trigger
    ///   (`init(checking:options:)` throws instead).
    /// - Parameter virtualClock: in virtual time, the clock to go on from and move (a reopened
    ///   camera goes on from where the one before it got to); a camera of its own by default.
    public init(profile: SensorProfile, options: SimulationOptions = SimulationOptions(), virtualClock: VirtualCameraClock? = nil) {
        precondition(!options.externalTrigger || profile.externalTrigger != nil, "\(profile.model) has no external trigger")
        self.profile = profile
        self.options = options
        if options.clock == .virtual {
            let v = virtualClock ?? VirtualCameraClock()
            self.virtualClock = v
            self.clock = v
        } else {
            self.virtualClock = nil
            self.clock = MonotonicCameraClock.shared
        }
        self.mode = profile.fullResolution
        self.info = CameraInfo(
            id: "sim:\(profile.model)", model: profile.model,
            pixelArrayWidth: profile.fullResolution.width, pixelArrayHeight: profile.fullResolution.height,
            isSimulated: true)
    }

    /// As `init(profile:options:)`, with a clear error for external-trigger mode on a sensor
    /// without a trigger input.
    public convenience init(checking profile: SensorProfile, options: SimulationOptions, virtualClock: VirtualCameraClock? = nil) throws {
        if options.externalTrigger && profile.externalTrigger == nil {
            let able = SensorProfile.catalogue.filter { $0.externalTrigger != nil }.map { "sim:\($0.model)" }
            throw ShutterbugError(.invalidArgument,
                                  "\(profile.model) has no external trigger input; external-trigger mode needs \(able.joined(separator: " or "))")
        }
        self.init(profile: profile, options: options, virtualClock: virtualClock)
    }

    deinit { release() }

    // MARK: External trigger

    /// Whether the sensor waits for trigger pulses instead of free-running.
    public var isExternallyTriggered: Bool { options.externalTrigger }
    public var framesOnTriggerOnly: Bool { options.externalTrigger }

    /// The profile's modes (the Pi pipeline's choices), a camera this process can open again,
    /// and in external-trigger mode its trigger input.
    public var capabilities: CameraCapabilities {
        let modes = profile.modes.map { m in
            SensorModeReport(width: m.width, height: m.height, bitDepth: profile.bitDepth, frameDurationLimits: m.minFramePeriod...(m.maxExposure + m.margin),
                             exposureLimits: profile.exposureRange(in: m), source: "simulated sensor")
        }
        return CameraCapabilities(sensorModes: modes, reopensInProcess: true, externalTrigger: isExternallyTriggered ? self : nil)
    }

    /// A trigger pulse on the sensor's trigger input (the IMX296's XTR): the sensor exposes one
    /// frame from `start` for `width` plus its offset. A pulse that starts before the previous
    /// frame's readout has ended is ignored, as the sensor ignores it, and counted.
    ///
    /// - Returns: false when the sensor ignores the pulse.
    /// - Throws: `.invalidState` unless the camera is in external-trigger mode;
    ///   `.invalidArgument` for a width outside the sensor's exposure range.
    @discardableResult
    public func pulse(at start: SensorTime, width: Duration) throws -> Bool {
        guard options.externalTrigger, let t = profile.externalTrigger else {
            throw ShutterbugError(.invalidState, "\(info.id) is not in external-trigger mode")
        }
        let mode = sensorMode
        let range = profile.exposureRange(in: mode)
        let exposure = width + t.exposureOffset
        guard range.contains(exposure) else {
            throw ShutterbugError(.invalidArgument,
                                  "a pulse of \(width.preciseDescription) exposes for \(exposure.preciseDescription); \(profile.model) exposes \(range.lowerBound.preciseDescription)...\(range.upperBound.preciseDescription) (pulse width + \(t.exposureOffset.preciseDescription))")
        }
        return lock.withLock {
            // Busy until the previous pulse's frame is read out.
            if let busy = pulseBusyUntil, start < busy {
                ignoredPulses += 1
                return false
            }
            if pulses.count == pulses.capacity {
                ignoredPulses += 1
                return false
            }
            pulseBusyUntil = start + exposure + mode.readoutTime
            pulses.append((start, width))
            lock.broadcast()
            return true
        }
    }

    /// Pulses the sensor ignored (one came during the previous frame's readout).
    public var pulsesIgnored: Int { lock.withLock { ignoredPulses } }

    /// The sensor mode chosen by the last `configure`.
    public var sensorMode: SensorMode { lock.withLock { mode } }
    public var sensorProfile: SensorProfile? { profile }
    public var configuredMode: SensorMode? { sensorMode }

    public var sensorModeReport: SensorModeReport? {
        let m = sensorMode
        // The frame-duration limits the Pi reports for a mode: its fastest period to the
        // longest exposure plus the margin.
        return SensorModeReport(width: m.width, height: m.height, bitDepth: profile.bitDepth,
                                frameDurationLimits: m.minFramePeriod...(m.maxExposure + m.margin),
                                exposureLimits: profile.exposureRange(in: m), source: "simulated sensor")
    }

    /// The profile's timing in the configured mode, with this simulation's IPA rate and lens.
    public var timing: CameraTiming {
        var t = CameraTiming(profile: profile, mode: sensorMode, ipaMinInterval: options.ipaMinInterval)
        t.lensSettleTime = options.lensSettleTime
        return t
    }

    /// The controls this sensor's pipeline accepts: the lens ones only with a focus motor.
    private var supportedControls: ControlSet {
        profile.hasFocusMotor ? .all : ControlSet.all.subtracting([.afMode, .lensPosition])
    }

    public var controlLimits: ControlLimits {
        let m = sensorMode
        return ControlLimits(
            supported: supportedControls,
            exposureTime: profile.exposureRange(in: m),
            analogueGain: profile.analogueGainRange,
            frameDuration: m.minFramePeriod...(m.maxExposure + m.margin),
            lensPosition: profile.lensRange)
    }

    /// Virtual time: a frame happens only when a request is there to take it.
    public var pacesByDemand: Bool { options.clock == .virtual }

    /// Virtual time, once a consumer uses it: frames happen only while allowed, and each only
    /// after the consumer has dealt with the previous one (lock-step), so what it queues in
    /// answer to a frame is there for the next. Real time ignores it (the sensor has a clock).
    public func allowFrames(_ allowed: Bool) {
        guard options.clock == .virtual else { return }
        lock.withLock {
            if !gated {
                gated = true
                completions.onConsumerIdle { [weak self] in self?.lock.withLock { self?.lock.broadcast() } }
            }
            guard framesAllowed != allowed else { return }
            framesAllowed = allowed
            lock.broadcast()
        }
    }

    public func holdFrames(_ holder: UInt64, until instant: SensorTime?) async {
        guard options.clock == .virtual else { return }
        guard let instant else {
            liftHold(holder)
            return
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let reached = lock.withLock { () -> Bool in
                    holds[holder] = instant
                    lock.broadcast()
                    if !running || stopping || lost || Task.isCancelled { return true }
                    holdWaiters.append((holder, instant, c))
                    return false
                }
                if reached { c.resume() }
            }
        } onCancel: {
            liftHold(holder)
        }
    }

    public func setFrameHold(_ holder: UInt64, at instant: SensorTime?) {
        guard options.clock == .virtual else { return }
        lock.withLock {
            holds[holder] = instant
            lock.broadcast()
        }
    }

    /// Virtual time: where the clock is and what holds it, for a message about a run that made
    /// no progress.
    public var clockState: String {
        lock.withLock {
            let h = holds.sorted { $0.key < $1.key }.map { "\($0.key)@\($0.value)" }.joined(separator: " ")
            return "now \(virtualNow.map { "\($0)" } ?? "-"), next frame ends \(pendingCompletion.map { "\($0)" } ?? "-"), holds [\(h)], waiting [\(holdWaiters.map { "\($0.holder)@\($0.instant)" }.joined(separator: " "))], \(queued.count) requests queued, frames \(framesAllowed ? "allowed" : "not wanted"), consumer \(completions.isConsumerIdle ? "idle" : "busy")"
        }
    }

    /// Lifts a holder's hold; whoever of it waits goes on.
    private func liftHold(_ holder: UInt64) {
        let ready = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            holds[holder] = nil
            lock.broadcast()
            let (mine, others) = (holdWaiters.filter { $0.holder == holder }, holdWaiters.filter { $0.holder != holder })
            holdWaiters = others
            return mine.map(\.continuation)
        }
        for c in ready { c.resume() }
    }

    /// Lock held: virtual time moves on to `t`, never back.
    private func advanceVirtualNow(to t: SensorTime) {
        guard virtualNow.map({ $0 < t }) ?? true else { return }
        virtualNow = t
        virtualClock?.advance(to: t)
    }

    /// Lock held: the waiters whose instant the camera has reached (all of them once it stops),
    /// taken off the list to be resumed outside the lock.
    private func reachedHolds(all: Bool) -> [CheckedContinuation<Void, Never>] {
        guard !holdWaiters.isEmpty else { return [] }
        let idle = completions.isConsumerIdle
        let reached = holdWaiters.filter { w in all || (idle && (pendingCompletion.map { $0 > w.instant } ?? false)) }
        guard !reached.isEmpty else { return [] }
        holdWaiters.removeAll { w in all || (idle && (pendingCompletion.map { $0 > w.instant } ?? false)) }
        return reached.map(\.continuation)
    }

    /// Real time: CLOCK_MONOTONIC. Virtual time: the completion time of the newest frame.
    public var now: SensorTime {
        guard options.clock == .virtual else { return MonotonicClock.now() }
        return lock.withLock { virtualNow } ?? MonotonicClock.now()
    }

    // MARK: Fault injection

    /// The sensor delivers nothing for `duration`, from the next frame on: a pipeline that
    /// hangs (real time), or a jump in the sequence numbers (virtual time).
    public func stall(for duration: Duration) {
        lock.withLock {
            requestedStall = duration
            lock.broadcast()
        }
    }

    // MARK: Configuration

    public func configure(_ requests: [StreamRequest]) throws -> CameraConfiguration {
        try lock.withLock {
            try checkUsable()
            guard !running else { throw ShutterbugError(.invalidState, "cannot configure \(info.id) while it is running; stop it first") }
            guard !requests.isEmpty, requests.count <= 4 else {
                throw ShutterbugError(.invalidArgument, "a configuration has 1 to 4 streams, not \(requests.count)")
            }
            let full = profile.fullResolution
            // The raw stream, or else the largest processed stream, picks the sensor mode.
            let sizes = requests.map { defaultSize(for: $0) }
            let driving = requests.firstIndex { $0.role == .raw }.map { sizes[$0] } ?? sizes.max { $0.0 * $0.1 < $1.0 * $1.1 }!
            let chosen = profile.mode(forWidth: driving.0, height: driving.1)

            var settled: [StreamConfiguration] = []
            for (r, size) in zip(requests, sizes) {
                var w = min(size.0, full.width), h = min(size.1, full.height)
                let format: PixelFormat
                if r.role == .raw {
                    (w, h) = (chosen.width, chosen.height)
                    // The sensor's own order and depth; CSI-2 packed as the Pi 4's Unicam
                    // delivers it, or PISP_COMP1 as the Pi 5's front end does (a requested
                    // CSI-2 format is rewritten to it), unless the unpacked layout is asked for.
                    let packed = options.platform == .pi5
                        ? PixelFormat.bayer(BayerFormat(cfa: profile.cfa, bits: 16, packing: .pispComp1))
                        : PixelFormat.bayer(BayerFormat(cfa: profile.cfa, bits: profile.bitDepth, packing: .csi2))
                    let unpacked = PixelFormat.bayer(BayerFormat(cfa: profile.cfa, bits: profile.bitDepth, packing: .none))
                    format = r.pixelFormat == unpacked ? unpacked : packed
                } else {
                    let supported: [PixelFormat] = [.yuv420, .xrgb8888, .rgb888, .bgr888]
                    format = r.pixelFormat.flatMap { supported.contains($0) ? $0 : nil } ?? defaultFormat(for: r.role)
                    // ISP output: even sizes (YUV420 chroma subsampling), at least 64x64.
                    w = max(64, w & ~1)
                    h = max(64, h & ~1)
                }
                let count = min(max(r.bufferCount ?? defaultBufferCount(for: r.role), 1), 16)
                let layout = SimulatedBufferLayout(width: w, height: h, format: format)
                settled.append(StreamConfiguration(role: r.role, width: w, height: h, pixelFormat: format, stride: layout.planes[0].stride, frameSize: layout.size, bufferCount: count))
            }
            requested = requests
            streams = settled
            mode = chosen
            slotBuffers = []
            slotBoxes = []
            return CameraConfiguration(streams: settled, adjustments: CameraConfiguration.adjustments(requested: requests, settled: settled))
        }
    }

    private func defaultSize(for r: StreamRequest) -> (Int, Int) {
        let full = profile.fullResolution
        let fallback: (Int, Int)
        switch r.role {
        case .raw, .still: fallback = (full.width, full.height)
        case .video: fallback = (min(1920, full.width), min(1080, full.height))
        case .viewfinder: fallback = (800, 600)
        }
        return (r.width ?? fallback.0, r.height ?? fallback.1)
    }

    private func defaultFormat(for role: StreamRole) -> PixelFormat {
        role == .viewfinder ? .xrgb8888 : .yuv420
    }

    /// The Pi's defaults: raw 2, still 1 (too few for a bracket), video and viewfinder 4.
    private func defaultBufferCount(for role: StreamRole) -> Int {
        switch role {
        case .raw: return 2
        case .still: return 1
        case .video, .viewfinder: return 4
        }
    }

    public func allocate() throws -> Int {
        try lock.withLock {
            try checkUsable()
            guard !running else { throw ShutterbugError(.invalidState, "cannot allocate buffers while \(info.id) is running") }
            guard !streams.isEmpty else { throw ShutterbugError(.invalidState, "configure \(info.id) before allocating buffers") }
            let slots = streams.map(\.bufferCount).min()!
            slotBuffers = try (0..<slots).map { _ in
                try streams.map { s in
                    let b = try SimulatedFrameBuffer(layout: SimulatedBufferLayout(width: s.width, height: s.height, format: s.pixelFormat), profile: profile, renderer: renderer)
                    b.snapshots = options.snapshotCopies
                    return b
                }
            }
            slotBoxes = slotBuffers.map { $0.map { $0 as any FrameBuffer } }
            slotQueued = Array(repeating: false, count: slots)
            queued = Ring(capacity: slots)
            return slots
        }
    }

    public func buffer(stream: Int, slot: Int) -> any FrameBuffer {
        lock.withLock { slotBuffers[slot][stream] }
    }

    // MARK: Streaming

    @discardableResult
    public func start(controls: CameraControls) throws -> ControlSet {
        let unsupported = controls.set.subtracting(supportedControls)
        let pipeline = try lock.withLock { () throws -> SimulatedPipeline in
            try checkUsable()
            guard !running else { throw ShutterbugError(.invalidState, "\(info.id) is already running") }
            guard !slotBuffers.isEmpty else { throw ShutterbugError(.invalidState, "allocate buffers before starting \(info.id)") }
            running = true
            stopping = false
            startCount += 1
            var options = self.options
            options.seed = options.seed &+ (startCount - 1) &* 0x9E37_79B9_7F4A_7C15
            // Virtual time is its own: a camera started again (reopened after a fault, or after
            // a timelapse stopped it between slots) goes on from where its virtual clock had got
            // to. Never from the monotonic clock: on a busy machine virtual time falls behind
            // it, and a camera that jumped to it skipped a timelapse's slot as 15 s late.
            let real = MonotonicClock.now()
            let now = virtualClock?.now ?? real
            var pipeline = SimulatedPipeline(profile: profile, mode: mode, options: options, start: now, controls: strip(controls, unsupported))
            var wall = timespec()
            clock_gettime(CLOCK_REALTIME, &wall)
            pipeline.wallClockOffsetNanoseconds = Int64(wall.tv_sec) * 1_000_000_000 + Int64(wall.tv_nsec) - real.nanoseconds
            return pipeline
        }
        thread = OSThread(name: "sb-sim-sensor") { [self] in sensorLoop(pipeline) }
        return unsupported
    }

    @discardableResult
    public func queue(slot: Int, cookie: UInt64, controls: CameraControls) throws -> ControlSet {
        let unsupported = controls.set.subtracting(supportedControls)
        try lock.withLock {
            try checkUsable()
            guard running, !stopping else { throw ShutterbugError(.invalidState, "\(info.id) is not running; start it before queueing requests") }
            guard slot >= 0, slot < slotQueued.count else {
                throw ShutterbugError(.invalidArgument, "request slot \(slot) is out of range 0...\(slotQueued.count - 1)")
            }
            guard !slotQueued[slot] else { throw ShutterbugError(.busy, "request slot \(slot) is already queued") }
            slotQueued[slot] = true
            queued.append(SimulatedPipeline.Request(slot: slot, cookie: cookie, controls: strip(controls, unsupported)))
            lock.broadcast()
        }
        return unsupported
    }

    public func stop() throws {
        let t: OSThread? = lock.withLock {
            guard running else { return nil }
            stopping = true
            lock.broadcast()
            return thread
        }
        t?.join()
        let cancelled = lock.withLock { () -> [CompletedRequest] in
            guard running else { return [] }
            running = false
            stopping = false
            thread = nil
            return drainQueued()
        }
        for c in cancelled { completions.push(c) }
    }

    public func release() {
        try? stop()
        let first = lock.withLock { () -> Bool in
            defer { released = true }
            return !released
        }
        if first { completions.finish() }
    }

    /// Makes the camera disappear now, as if unplugged (fault injection).
    public func disconnect() {
        let t: OSThread? = lock.withLock {
            lost = true
            lock.broadcast()
            return thread
        }
        t?.join()
        let cancelled = lock.withLock { () -> [CompletedRequest] in
            running = false
            thread = nil
            return drainQueued()
        }
        for c in cancelled { completions.push(c) }
        completions.finish(throwing: ShutterbugError(.cameraLost, "\(info.id) went away"))
    }

    // MARK: The sensor thread

    private func sensorLoop(_ initial: SimulatedPipeline) {
        // However the loop ends, no frame comes any more: whoever waits for one goes on.
        defer { for c in lock.withLock({ reachedHolds(all: true) }) { c.resume() } }
        var pipeline = initial
        let realTime = options.clock == .realTime
        let faults = options.faults
        var faultRNG = SplitMix64(seed: options.seed ^ 0xFA17)
        var injected: Duration?
        let triggered = options.externalTrigger
        while true {
            if triggered {
                // The sensor sleeps until a pulse comes (`pulse` already refused those that
                // came during the previous frame's readout).
                let pulse: (start: SensorTime, width: Duration)? = lock.withLock {
                    while !stopping, !lost, pulses.isEmpty { lock.wait() }
                    return stopping || lost ? nil : pulses.popFirst()
                }
                guard let pulse else { return }
                pipeline.trigger(at: pulse.start, width: pulse.width)
            }
            let timing = pipeline.beginFrame()
            if let f = faults.disconnectAtFrame, timing.sequence >= f {
                let cancelled = lock.withLock { () -> [CompletedRequest] in
                    lost = true
                    running = false
                    return drainQueued()
                }
                for c in cancelled { completions.push(c) }
                completions.finish(throwing: ShutterbugError(.cameraLost, "\(info.id) went away at frame \(timing.sequence)"))
                return
            }
            let stallFor = faults.stallAtFrame == timing.sequence ? faults.stallDuration : injected
            injected = nil
            if let stallFor {
                if realTime {
                    let resume = MonotonicClock.now() + stallFor
                    let interrupted = lock.withLock { () -> Bool in
                        while !stopping, !lost, MonotonicClock.now() < resume { lock.wait(until: resume) }
                        return stopping || lost
                    }
                    if interrupted { return }
                }
                pipeline.stall(for: stallFor)
                continue
            }

            // One lock per frame: wait, then take the request (nil in real time when the queue
            // ran dry: the frame is lost) or learn that the loop must end.
            // Waiters whose instant the clock reached are resumed outside the lock: resuming
            // takes the task's own lock, which a task being cancelled holds while its
            // cancellation handler (`liftHold`) waits for this one.
            var next: (request: SimulatedPipeline.Request?, end: Bool, reached: [CheckedContinuation<Void, Never>])
            repeat {
                next = lock.withLock {
                    if let r = requestedStall {
                        injected = r
                        requestedStall = nil
                    }
                    if realTime {
                        while !stopping, !lost, MonotonicClock.now() < timing.completion {
                            lock.wait(until: timing.completion)
                        }
                    } else {
                        pendingCompletion = timing.completion
                        while !stopping, !lost {
                            // Held (`holdFrames`): the clock reaches the earliest holder's instant
                            // and stands there; the frames up to it happen, wanted or not.
                            let barrier = holds.values.min()
                            let held = barrier.map { timing.completion > $0 } ?? false
                            if held, let barrier { advanceVirtualNow(to: barrier) }
                            let reached = reachedHolds(all: false)
                            if !reached.isEmpty { return (nil, false, reached) }
                            let allowed = framesAllowed || barrier != nil
                            if held || queued.isEmpty || (gated && !(allowed && completions.isConsumerIdle)) {
                                lock.wait()
                                continue
                            }
                            break
                        }
                        // The clock is at the newest frame's end once it happens (not while it
                        // waits to: what reads the clock meanwhile sees the frame before).
                        advanceVirtualNow(to: timing.completion)
                    }
                    if stopping || lost { return (nil, true, []) }
                    // Only this thread takes requests off; it does so once the frame completes,
                    // so a dropped frame leaves the request for the next one.
                    return (queued.first, false, [])
                }
                for c in next.reached { c.resume() }
            } while !next.reached.isEmpty
            if next.end { return }
            let request = next.request

            switch pipeline.finishFrame(request: request) {
            case .dropped:
                continue
            case .completed(let frame):
                let slot = frame.request.slot
                let boxes = lock.withLock { () -> [any FrameBuffer] in
                    _ = queued.popFirst()
                    for b in slotBuffers[slot] { b.recipe = frame.recipe }
                    slotQueued[slot] = false
                    return slotBoxes[slot]
                }
                let failed = faults.requestErrorProbability > 0 && faultRNG.unit() < faults.requestErrorProbability
                let startup = frame.metadata.sequence < pipeline.startupFrames
                completions.push(CompletedRequest(
                    slot: slot, cookie: frame.request.cookie, status: failed ? .error : startup ? .startup : .complete,
                    metadata: frame.metadata, buffers: boxes, requestSequence: frame.requestSequence))
            }
        }
    }

    // MARK: Helpers (lock held)

    private func drainQueued() -> [CompletedRequest] {
        var out: [CompletedRequest] = []
        while let r = queued.popFirst() {
            slotQueued[r.slot] = false
            out.append(CompletedRequest(slot: r.slot, cookie: r.cookie, status: .cancelled, metadata: FrameMetadata(sequence: 0), buffers: slotBoxes[r.slot]))
        }
        return out
    }

    private func checkUsable() throws {
        if released { throw ShutterbugError(.invalidState, "\(info.id) has been released") }
        if lost { throw ShutterbugError(.cameraLost, "\(info.id) went away") }
    }

    private func strip(_ c: CameraControls, _ unsupported: ControlSet) -> CameraControls {
        guard !unsupported.isEmpty else { return c }
        var c = c
        if unsupported.contains(.afMode) { c.afMode = nil }
        if unsupported.contains(.lensPosition) { c.lensPosition = nil }
        return c
    }
}

extension SimulatedCamera: ExternalTriggerInput {
    public var triggeredSensor: SensorProfile { profile }

    /// The scene's light: the trigger mode's fixed white balance is set for it, as a user sets
    /// `--awbgains` for theirs.
    public var startColourGains: ColourGains { profile.colour.gains(kelvin: options.illuminant) }
}
