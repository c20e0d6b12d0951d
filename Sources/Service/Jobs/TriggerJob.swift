import Capture
import CaptureScheduler
import ImageOutput
import ServiceLifecycle
import ShutterbugCore
import Synchronization

/// An open trigger source and how to close it.
public struct TriggerHandle: Sendable {
    public var source: any TriggerSource
    /// Ends the source's sequence without waiting (a GPIO line's reader woken): called from
    /// whoever stops the job, at any time, maybe more than once.
    public var stop: @Sendable () -> Void
    /// Waits for the source to be closed (the reader thread joined): called once, by the job,
    /// when it ends. Default: `stop`.
    public var close: @Sendable () -> Void
    /// Edges the kernel lost (its event buffer full).
    public var kernelLost: @Sendable () -> Int
    public init(source: any TriggerSource, stop: @escaping @Sendable () -> Void, close: (@Sendable () -> Void)? = nil,
                kernelLost: @escaping @Sendable () -> Int = { 0 }) {
        self.source = source
        self.stop = stop
        self.close = close ?? stop
        self.kernelLost = kernelLost
    }
}

/// A line driven while a capture runs (a busy LED, a flash or tally line): held from a
/// capture's start until its frames are captured.
public protocol BusyLine: Sendable {
    func hold() throws
    func release() throws
}

/// Triggers to captures: a source's triggers queued, coalesced or dropped by a policy, each
/// captured as the first frame (or bracket) exposed after its instant, written where a writer
/// is given, and counted. `shutterbug trigger` and the service's triggers both run it.
///
/// The queue frees for the next capture once a capture's frames are in (its files are written
/// meanwhile). A camera in external-trigger mode (`CameraCapabilities.externalTrigger`) is
/// pulsed for every trigger, which exposes its frame whatever the queue then does; a
/// zero-shutter-lag trigger's frame is the one exposing at its edge, taken as it is asked for:
/// both ask for every trigger's capture at once, up to `queue` in flight (the policy does not
/// apply: no trigger waits for another's capture, by when its frame would be gone). A camera
/// that paces its frames by demand (virtual time) is fed one trigger at a time, once its frames
/// have reached the trigger's instant, as they would have in real time.
///
/// `run()` ends once stopped (`stop(_:)`, a graceful shutdown, `count` captures) or the source
/// ended, after the captures in flight; the `Summary` says how, and whether the source failed.
public final class TriggerJob: Service, Sendable {
    public struct Options: Sendable {
        public var bracket: BracketSettings?
        public var formats: Set<PhotoFormat>
        public var policy: TriggerPolicy
        /// Triggers that may wait (queue), or captures in flight with an external trigger.
        public var queue: Int
        /// Stop after this many captures (taken or failed).
        public var count: Int?
        /// An external trigger's pulse width (the exposure, plus the sensor's offset).
        public var pulseWidth: Duration
        /// Each photo is the frame that was exposing at the trigger's instant, from the frames
        /// the session holds (`PhotoSettings.zeroShutterLag`), not the first exposed after.
        public var zeroShutterLag: Bool
        /// Pre-capture: each trigger's capture is a burst of frames around it (`PhotoSettings
        /// .burst`), from the frames the session holds and those that follow; a window is
        /// counted at the camera's frame rate when the trigger comes.
        public var burst: BurstRequest?

        public init(bracket: BracketSettings? = nil, formats: Set<PhotoFormat> = [.jpeg], policy: TriggerPolicy = .queue, queue: Int = 8, count: Int? = nil,
                    pulseWidth: Duration = .milliseconds(10), zeroShutterLag: Bool = false, burst: BurstRequest? = nil) {
            self.bracket = bracket
            self.formats = formats
            self.policy = policy
            self.queue = queue
            self.count = count
            self.pulseWidth = pulseWidth
            self.zeroShutterLag = zeroShutterLag
            self.burst = burst
        }
    }

    /// One trigger's capture.
    public struct Captured: Sendable {
        public var lag: TriggerLag
        /// The first frame's exposure start (nil: no frame came).
        public var exposureStart: SensorTime?
        public var sequences: [UInt32]
        public var files: [WrittenFile]
        /// Files that could not be written (format: why); the frames were captured.
        public var failures: [String]
        public var adjustments: [String]
        /// The capture's unique ID (its files' names say it).
        public var uniqueID: Int64
        public var steps: Int
        /// How long the busy line was held.
        public var busy: Duration?
        /// Zero shutter lag: whether the frame covered the instant, or why not.
        public var zeroShutterLag: ZeroShutterLag?
    }

    public enum Event: Sendable {
        /// Listening on the source (armed on settled frames).
        case listening(source: String)
        case notice(String)
        case captured(Trigger, Captured)
        case failed(Trigger, ShutterbugError)
        case dropped(Trigger, reason: String)
        case coalesced(Trigger)
        /// The counts and lags after a change.
        case progress(TriggerCounts, lags: [TriggerLag])
        case finished(Summary)
    }

    public struct Summary: Sendable {
        public var source: String
        public var counts: TriggerCounts
        public var lags: [TriggerLag]
        /// Why it stopped: `stop(_:)`'s reason, the source's failure, or "the trigger source ended".
        public var stoppedBy: String
        /// The source broke down (not stopped): a GPIO chip gone, a signal source closed.
        public var sourceFailure: ShutterbugError?
    }

    public let options: Options
    public let session: CaptureSession
    public let camera: any CameraBackend
    /// Writes each capture's files; without one, captures only measure their lags.
    public let writer: PhotoFileWriter?
    public let busy: (any BusyLine)?
    /// Opens the source once the camera streams settled frames, given the camera's time then.
    public let open: @Sendable (_ now: SensorTime) throws -> TriggerHandle
    /// Sees every event of every capture's files (the service's metrics).
    public let observe: (@Sendable (OutputEvent) -> Void)?
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let wake: AsyncStream<Internal>.Continuation
    private let internalEvents: AsyncStream<Internal>
    private let stopping = Mutex<String?>(nil)
    private let handle = Mutex<TriggerHandle?>(nil)
    /// Virtual time: the captures under way, until the loop has taken the news that their
    /// frames are in.
    private let underWay: CapturesUnderWay
    private let holder: UInt64
    private static let holders = Atomic<UInt64>(0)

    public init(options: Options, session: CaptureSession, camera: any CameraBackend, writer: PhotoFileWriter?, busy: (any BusyLine)? = nil,
                observe: (@Sendable (OutputEvent) -> Void)? = nil, open: @escaping @Sendable (SensorTime) throws -> TriggerHandle) {
        self.options = options
        self.session = session
        self.camera = camera
        self.writer = writer
        self.busy = busy
        self.observe = observe
        self.open = open
        (events, continuation) = AsyncStream.makeStream(of: Event.self)
        (internalEvents, wake) = AsyncStream.makeStream(of: Internal.self)
        // Two holds on a virtual-time camera: the feeder's, at the next trigger's instant, and
        // the pause while captures catch up (`CapturesUnderWay`).
        holder = Self.holders.add(2, ordering: .relaxed).newValue
        let pauser = holder + 1
        underWay = CapturesUnderWay { [weak camera] paused in
            camera?.setFrameHold(pauser, at: paused ? SensorTime(nanoseconds: .min) : nil)
        }
    }

    /// Stops listening: what waits is dropped and counted, the captures in flight complete.
    public func stop(_ why: String) {
        stopping.withLock { $0 = $0 ?? why }
        handle.withLock { $0 }?.stop()
        wake.yield(.stop)
    }

    enum Internal: Sendable {
        /// A trigger; `handled`, where given, is called once the trigger has been dealt with:
        /// the capture it started is held by the session (or it started none).
        case trigger(Trigger, handled: (@Sendable () -> Void)? = nil)
        /// External-trigger mode: the sensor ignored the pulse (it came during the previous
        /// frame's readout), so there is no frame to capture.
        case ignoredBySensor(Trigger)
        /// The capture's frames are all captured: the next may start while its files are written.
        case framesCaptured(Trigger)
        case finished(Trigger, Result<Captured, ShutterbugError>)
        case stop
        /// The source has no more triggers: what waits is still captured.
        case sourceEnded
    }

    public func run() async throws {
        defer { continuation.finish() }
        try await withGracefulShutdownHandler {
            try await self.listen()
        } onGracefulShutdown: {
            self.stop("the service is stopping")
        }
    }

    private func emit(_ e: Event) { continuation.yield(e) }

    private func listen() async throws {
        let (session, camera, options, wake) = (session, camera, options, wake)
        let externalSensor = camera.capabilities.externalTrigger
        // Armed once the camera streams settled frames (past its start-up frames, which no
        // capture takes): a trigger before then would wait them out, a start-up lag that is
        // not the shutter's. A triggered sensor makes no frame until pulsed.
        if externalSensor == nil {
            do {
                try await session.captureFrame(exposedAfter: camera.now, timeout: .seconds(10)).release()
            } catch let e as ShutterbugError {
                throw ShutterbugError(e.code, "the camera streamed no settled frame to arm the trigger on: \(e.message)", errno: e.errno)
            }
        }
        let opened = await session.latestFrame?.sensorTimestamp ?? camera.now
        // Virtual time: the clock held where the source opens until the feeder holds it at the
        // first trigger's instant; meanwhile the camera would race past it (in `serve`, 1.3 s
        // past a zero-shutter-lag trigger's first instant, its frame no longer held).
        let virtual = camera.pacesByDemand && externalSensor == nil
        if virtual { camera.setFrameHold(holder, at: opened) }
        let h: TriggerHandle
        do {
            h = try open(opened)
        } catch {
            if virtual { camera.setFrameHold(holder, at: nil) }
            throw error
        }
        handle.withLock { $0 = h }
        // Stopped before the source was open: close it now.
        if stopping.withLock({ $0 }) != nil { h.stop() }
        let source = h.source
        emit(.listening(source: source.name))
        let width = options.pulseWidth
        let notices = continuation
        /// The trigger wired to the sensor's trigger input as well: every trigger exposes a
        /// frame, whatever the queue then does with it, unless the sensor ignores the pulse.
        @Sendable func pulseSensor(_ t: Trigger) -> Bool {
            guard let externalSensor else { return true }
            do { return try externalSensor.pulse(at: t.instant, width: width) } catch {
                notices.yield(.notice("trigger \(t.sequence): \(error)"))
                return false
            }
        }
        /// Virtual time: what tells the feeder a trigger was handled (finished on the way out,
        /// so a feeder still waiting goes on and ends).
        var acknowledgements: AsyncStream<Void>.Continuation?
        defer { acknowledgements?.finish() }
        var endObserver: Int?
        let feeder: Task<Void, Never>
        if camera.pacesByDemand && externalSensor == nil {
            // The camera's clock runs as fast as the CPU allows. Each trigger is passed on when
            // the camera's clock reaches its instant, as it would be in real time: the camera
            // makes the frames up to the instant and holds back the next until the trigger has
            // been dealt with, and every capture whose frames came before it has been taken
            // by the loop (in real time the work between frames takes next to no time). A
            // capture under way then looks busy to a trigger that came during it, and nothing
            // depends on which task the machine ran first: a seeded run is one answer.
            let (handledStream, handled) = AsyncStream<Void>.makeStream()
            acknowledgements = handled
            let underWay = underWay
            endObserver = await session.addCaptureEndObserver { id in underWay.sessionEnded(id) }
            let holder = holder
            feeder = Task {
                var handledAcks = handledStream.makeAsyncIterator()
                for await t in source.triggers() {
                    if self.stopping.withLock({ $0 }) == nil {
                        await camera.holdFrames(holder, until: t.instant)
                        // The wait up to the instant is judged (a stall fails what it held up
                        // at its limit, as real time's ticks would), then what it ended settles.
                        await session.clockReached(t.instant)
                        await underWay.settled()
                    } else {
                        // Stopping: the triggers left are dropped and counted; the captures
                        // under way need the frames after them.
                        await camera.holdFrames(holder, until: nil)
                    }
                    // No frame after the instant comes until the capture for this trigger is
                    // held by the session: in real time it is asked for before that frame.
                    wake.yield(.trigger(t, handled: { handled.yield() }))
                    _ = await handledAcks.next()
                }
                await camera.holdFrames(holder, until: nil)
                wake.yield(.sourceEnded)
            }
        } else {
            feeder = Task {
                for await t in source.triggers() {
                    wake.yield(pulseSensor(t) ? .trigger(t) : .ignoredBySensor(t))
                }
                wake.yield(.sourceEnded)
            }
        }

        // A triggered sensor has exposed the trigger's frame already, busy or not, and a
        // zero-shutter-lag photo is the frame exposing at the edge, held as it comes: each
        // trigger's capture is asked of the session at once (the session takes them in order,
        // each zero-shutter-lag one taking its frame as it is asked for), up to `queue` in
        // flight; past that the trigger is dropped (waiting would find its frame gone).
        let external = externalSensor != nil
        let concurrent = external || (options.zeroShutterLag && options.burst == nil)
        var q = concurrent ? try TriggerQueue(policy: .drop, concurrency: options.queue) : try TriggerQueue(policy: options.policy, limit: options.queue)
        var lags: [TriggerLag] = []
        var sourceEnded = false
        var stopping: String? { self.stopping.withLock { $0 } }
        // Captures started and not finished (their files may still be being written), and the
        // triggers whose frames are all captured.
        var unfinished = 0
        var framesDone: Set<UInt64> = []
        /// Starts what the queue says; `handled` is called once every capture started is held
        /// by the session (at once if none was started).
        func start(_ actions: [TriggerQueue.Action], handled: (@Sendable () -> Void)? = nil) {
            var handled = handled
            for a in actions {
                switch a {
                case .capture(let t):
                    unfinished += 1
                    let ack = handled ?? {}
                    handled = nil
                    // Virtual time: the feeder passes on no trigger while a capture whose frames
                    // are in (or that holds no frame yet) waits for the loop to take the news.
                    underWay.started(t.sequence)
                    Task {
                        let result = await self.capture(t, registered: ack,
                                                        framesCaptured: { wake.yield(.framesCaptured(t)) })
                        wake.yield(.finished(t, result))
                    }
                case .dropped(let t):
                    emit(.dropped(t, reason: concurrent ? "\(options.queue) captures in flight, --queue \(options.queue)" : "busy, --policy \(options.policy.rawValue)"))
                case .coalesced(let t):
                    emit(.coalesced(t))
                }
            }
            handled?()
        }
        /// The queue's capture is over (its frames are in, or it failed): the next may start.
        func captureOver(_ t: Trigger, failed: Bool) {
            if let count = options.count, q.counts.captured + q.counts.failed + 1 >= count, stopping == nil {
                self.stopping.withLock { $0 = $0 ?? "--count" }
            }
            // Once stopping, what waits is dropped and counted, not captured.
            start(q.finished(failed: failed, stopping: stopping != nil))
        }
        loop: for await e in internalEvents {
            var changed = true
            switch e {
            case .ignoredBySensor(let t):
                _ = q.refused(t)
                emit(.dropped(t, reason: "the sensor ignored the pulse (it came while the previous frame was being read out)"))
            case .trigger(let t, let handled) where concurrent:
                // No more captures than `count` asks for are started.
                if let count = options.count, stopping == nil, q.counts.captured + q.counts.failed + q.inFlight.count >= count {
                    _ = q.refused(t)
                    emit(.dropped(t, reason: "--count reached"))
                    handled?()
                } else if stopping == nil {
                    start(q.arrived(t), handled: handled)
                } else {
                    handled?()
                }
            case .trigger(let t, let handled):
                if stopping == nil { start(q.arrived(t), handled: handled) } else { handled?() }
            case .framesCaptured(let t):
                // Captures asked for at once are over when they finish: they run together.
                if concurrent { break }
                framesDone.insert(t.sequence)
                captureOver(t, failed: false)
                // The news is taken (and what waited started): the feeder may go on.
                underWay.over(t.sequence)
            case .finished(let t, let result):
                unfinished -= 1
                switch result {
                case .success(let c):
                    lags.append(c.lag)
                    if lags.count > 100_000 { lags.removeFirst(lags.count - 100_000) }
                    emit(.captured(t, c))
                case .failure(let error):
                    let ignored = externalSensor?.pulsesIgnored ?? 0
                    emit(.failed(t, ignored > 0 ? ShutterbugError(error.code, "\(error.message) (the sensor ignored \(ignored) pulse\(ignored == 1 ? "" : "s") that came while the previous frame was being read out)", errno: error.errno) : error))
                }
                // A capture that failed before its frames were in ends the queue's capture now.
                if framesDone.remove(t.sequence) == nil {
                    captureOver(t, failed: { if case .failure = result { return true } else { return false } }())
                    underWay.over(t.sequence)
                }
            case .stop:
                changed = false
            case .sourceEnded:
                sourceEnded = true
                changed = false
            }
            if changed { emit(.progress(q.counts, lags: lags)) }
            if (stopping != nil || sourceEnded) && q.busy == nil && unfinished == 0 { break loop }
        }
        feeder.cancel()
        // Captures whose news the loop will not take now: a feeder waiting on them ends.
        underWay.reset()
        if let endObserver { await session.removeCaptureEndObserver(endObserver) }
        h.stop()
        h.close()
        q.lostBySource(h.kernelLost())
        let failure = stopping == nil ? source.failure : nil
        emit(.progress(q.counts, lags: lags))
        emit(.finished(Summary(source: source.name, counts: q.counts, lags: lags, stoppedBy: stopping ?? failure?.description ?? "the trigger source ended",
                               sourceFailure: failure)))
    }

    /// One capture exposed after `t`, with its lags. In real time delivery and files are timed
    /// on CLOCK_MONOTONIC too; in virtual time only the lag to exposure start (on the camera's
    /// clock) means something. The busy line is held from the start until the capture's frames
    /// are all captured (or it fails).
    private func capture(_ t: Trigger, registered: @escaping @Sendable () -> Void, framesCaptured: @Sendable () -> Void) async -> Result<Captured, ShutterbugError> {
        // A triggered sensor's frame for this pulse starts at its edge; the next pulse's cannot
        // start before this frame is read out. A capture asked for after a later pulse's frame
        // replaced this one's (a machine too loaded to ask in time) fails as late instead of
        // taking the later pulse's frame as this trigger's.
        let latest = camera.capabilities.externalTrigger == nil ? nil : t.instant + options.pulseWidth + (await session.timing.readoutTime) / 2
        var burst: PhotoSettings.Burst?
        if let b = options.burst { burst = b.burst(period: await session.framePeriod, fastest: await session.timing.everyFramePeriod) }
        let settings = PhotoSettings(bracket: options.bracket, formats: options.formats, trigger: t, exposedBefore: latest, zeroShutterLag: options.zeroShutterLag,
                                     burst: burst)
        let frames = settings.stepCount
        let realTime = !camera.pacesByDemand
        var c = Captured(lag: TriggerLag(trigger: t.instant, exposureStart: t.instant), sequences: [], files: [], failures: [], adjustments: [],
                         uniqueID: settings.uniqueID, steps: frames)
        var firstStart: SensorTime?, delivered: SensorTime?
        var held: ContinuousClock.Instant?
        var announced = false
        /// The session holds the capture once it is in its queue (or it is over): said once.
        /// Not at its resolved settings, which an EV bracket has only after metering: the
        /// feeder would hold the next trigger back while the bracket's frames ran on, and a
        /// trigger that came while it was busy would find it idle.
        let underWay = underWay
        underWay.identified(t.sequence, id: settings.uniqueID)
        let holds = Once {
            underWay.registered(t.sequence)
            registered()
        }
        func sessionHoldsIt() { holds.run() }
        defer { sessionHoldsIt() }
        /// The frames are in: the busy line goes inactive, and the queue may start the next.
        func framesIn() {
            if !announced, c.sequences.count == frames {
                announced = true
                framesCaptured()
            }
            guard let h = held, let busy else { return }
            held = nil
            try? busy.release()
            c.busy = ContinuousClock.now - h
        }
        /// A burst's frame at the trigger (the lag is to it, not to the frames before).
        var pivot = 0
        func photo(_ step: ResolvedStep, _ m: FrameMetadata) {
            c.sequences.append(m.sequence)
            // The lag is to the capture's first exposure (from the trigger's frame on): the
            // earliest of its frames, which is not step 1's when step 1 was retried on a later
            // frame (photos come in step order). The sidecar says the same.
            if step.index >= pivot, let start = m.earliestExposureStart {
                firstStart = min(firstStart ?? start, start)
                c.exposureStart = firstStart
                if delivered == nil { delivered = realTime ? MonotonicClock.now() : nil }
            }
            if c.sequences.count == frames { framesIn() }
        }
        do {
            if let busy {
                try busy.hold()
                held = ContinuousClock.now
            }
            defer { framesIn() }
            for try await e in await OutputEvent.capture(settings, on: session, writer: writer, queued: { holds.run() }) {
                observe?(e)
                switch e {
                case .settingsResolved(let r):
                    c.adjustments += r.adjustments
                    pivot = r.pivotStep ?? 0
                    sessionHoldsIt()
                case .captureFinished(let r): c.zeroShutterLag = r.zeroShutterLag
                case .photoCaptured(let step, let m): photo(step, m)
                case .fileWritten(let f): c.files.append(f)
                case .writeFailed(_, let format, let error): c.failures.append("\(format): \(error.message)")
                case .notice(let n): emit(.notice(n))
                default: break
                }
            }
            c.lag = TriggerLag(trigger: t.instant, exposureStart: firstStart ?? t.instant, delivered: delivered,
                               filesWritten: realTime && writer != nil ? MonotonicClock.now() : nil)
            return .success(c)
        } catch let e as ShutterbugError {
            return .failure(e)
        } catch {
            return .failure(ShutterbugError(.system, "\(error)"))
        }
    }
}

/// A closure run once, whoever calls first.
final class Once: Sendable {
    private let body: Mutex<(@Sendable () -> Void)?>
    init(_ body: @escaping @Sendable () -> Void) { self.body = Mutex(body) }
    func run() { body.withLock { b in defer { b = nil }; return b }?() }
}

/// Virtual time: a trigger job's captures from their start until its loop has taken the news
/// that their frames are in (or that they ended). While one is starting (not yet held by the
/// session) or is over for the session but its news not yet taken, the camera's clock is
/// paused: that work takes next to no time in real time, and frames racing on meanwhile would
/// meet a job that had not caught up (a queued trigger's capture asked for late, a trigger
/// finding the queue busy with a capture whose frames were long in).
final class CapturesUnderWay: Sendable {
    private enum Phase { case starting, waitingForFrames, over }
    private struct State {
        var phases: [UInt64: Phase] = [:]
        /// Each capture's unique ID, by trigger, and back.
        var ids: [Int64: UInt64] = [:]
        var version = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
        var ended = false
        var paused: Bool { !ended && phases.values.contains { $0 != .waitingForFrames } }
    }
    private let state = Mutex(State())
    /// Pauses and resumes the camera's clock.
    private let pause: @Sendable (Bool) -> Void

    init(pause: @escaping @Sendable (Bool) -> Void = { _ in }) { self.pause = pause }

    /// The loop started a capture for `trigger`.
    func started(_ trigger: UInt64) { change { $0.phases[trigger] = .starting } }
    /// The capture's settings are made (before the session is asked).
    func identified(_ trigger: UInt64, id: Int64) { change { $0.ids[id] = trigger } }
    /// The session holds it: it waits for frames, unless it is over already.
    func registered(_ trigger: UInt64) { change { if $0.phases[trigger] == .starting { $0.phases[trigger] = .waitingForFrames } } }
    /// The session ended the capture with this unique ID (any capture's: others are ignored).
    func sessionEnded(_ id: Int64) {
        change { s in
            guard let t = s.ids.removeValue(forKey: id), s.phases[t] != nil else { return }
            s.phases[t] = .over
        }
    }
    /// The loop took the news.
    func over(_ trigger: UInt64) {
        change { s in
            s.phases[trigger] = nil
            s.ids = s.ids.filter { $0.value != trigger }
        }
    }

    /// The job ended: nothing more will change, and nobody waits for it.
    func reset() {
        change {
            $0.phases = [:]
            $0.ids = [:]
            $0.ended = true
        }
    }

    private func change(_ body: (inout State) -> Void) {
        let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            let was = s.paused
            body(&s)
            s.version += 1
            // Under the lock: changes made on different threads (the session's, the loop's)
            // pause and resume the camera in the order they were made.
            if s.paused != was { pause(s.paused) }
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in ready { w.resume() }
    }

    /// Returns once no capture is starting or waiting for the loop to take its news.
    func settled() async {
        while true {
            let (version, paused) = state.withLock { ($0.version, $0.paused) }
            if !paused { return }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.version != version || s.ended { return true }
                    s.waiters.append(c)
                    return false
                }
                if now { c.resume() }
            }
        }
    }
}
