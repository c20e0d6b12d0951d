import ShutterbugCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The capture queue as a pure state machine: captures (a photo or a bracket) in the order they
/// were asked for, and trigger waiters; frames, requests and the camera's clock in, actions out
/// (`takeActions`). The capture at the head meters, waits for its instant, phase-locks and
/// brackets (`BracketScheduler`, `PhaseLock`); the rest wait their turn. "The first frame
/// exposed after an instant" is one rule (`FrameMetadata.exposed(after:)`), judged here for a
/// capture and for a trigger alike.
///
/// A frame is identified by what it carries, never by when it came: a photo is a frame whose
/// metadata proves it is its step's, and the machine hands out nothing else. The session owns
/// the continuations and the slots; the machine says which frame goes to whom
/// (`Action.photo`, `.triggered`) and which slot it no longer holds (`.release`).
public struct CaptureMachine: Sendable {
    /// What the session does for the machine, in order.
    public enum Action: Sendable {
        /// The capture's plan (its `settingsResolved` event).
        case resolved(capture: Int64, ResolvedPhotoSettings)
        case exposureStarted(capture: Int64, SensorTime)
        case exposureEnded(capture: Int64, SensorTime)
        /// A step's frame, its slot held for the photo (one hold, given back by the consumer).
        case photo(capture: Int64, step: ResolvedStep, frame: CompletedRequest)
        /// The capture is complete: every step's photo was handed out.
        case finished(capture: Int64, ResolvedPhotoSettings)
        /// The capture ends with an error (the photos it had captured were handed out first,
        /// unless the error is `.late`).
        case failed(capture: Int64, ShutterbugError)
        /// A hold the machine took on a slot ends (or, for an id from `ExposureRing.poolBase`
        /// up, a copy held in the pool).
        case release(slot: Int)
        /// A frame held for zero shutter lag beyond what the camera's buffers can spare: its
        /// buffers are copied into the pool under `id`, then its slot is given back (the
        /// machine's hold on it ends).
        case pool(frame: CompletedRequest, id: Int)
        /// What a bracket set goes back to what was in force (`baseline`).
        case restoreBaseline
        /// A trigger's frame, its slot held for the taker.
        case triggered(trigger: Int, instant: SensorTime, frame: CompletedRequest)
        case triggerFailed(trigger: Int, ShutterbugError)
    }

    /// Frames the AGC gets to settle before an EV bracket gives up.
    public static let meteringFrameLimit = 90

    /// The camera's timing in the configured mode.
    public let timing: CameraTiming
    /// What the camera's controls can do (ranges, a lens).
    public let limits: ControlLimits
    /// Requests kept queued ahead of the newest frame.
    public let depth: Int
    /// A sensor that makes frames only when triggered: its newest complete frame nobody took
    /// is kept, its slot held, until the next comes or a capture or trigger takes it (the frame
    /// completes exposure + readout after the edge, so the capture for that pulse may be asked
    /// for after it came back).
    public let keepsNewest: Bool
    /// Controls in force outside captures: what a bracket restores.
    public var baseline = CameraControls()
    private var retained: CompletedRequest?
    /// Zero shutter lag: the newest frames nobody took, held so a capture can take the one that
    /// was exposing at its instant after it came back.
    private var ring: ExposureRing
    /// The newest complete frame's sequence.
    public private(set) var lastSequence: UInt32?
    private var recent = Ring<FrameMetadata>(capacity: 8)
    /// After a gap in the frames: the first frame whose exposure and gain the AGC decided
    /// after it. Before it, three frames agreeing do not mean auto exposure settled.
    private var settlesFrom: UInt32?
    /// After a capture that set exposure and gain by hand: the newest frame that may still
    /// carry them (the restore to `baseline` lands `depth` + the sensor's delay later). Until
    /// auto exposure has settled on frames after it, metering waits, and so does a photo
    /// taken at "the settings in force": neither is judged by the last step's exposure, nor by
    /// the AGC still easing back from it.
    public private(set) var autoExposureResumesAfter: UInt32?
    private var captures: [Capture] = []
    private var triggers = TriggerSelect()
    private var actions: [Action] = []
    /// The camera's clock at the call being handled (for a frame of a camera that paces by
    /// demand, ahead of the frame's own time): a capture activated then counts its progress
    /// from it.
    private var clock = SensorTime(nanoseconds: 0)

    /// - Parameter ringFrames: frames to hold for zero-shutter-lag captures (0: none).
    /// - Parameter ringFramesInPlace: of those, the most held in the camera's buffers; the rest
    ///   are copied into a pool (`Action.pool`). Default: all.
    public init(timing: CameraTiming, limits: ControlLimits, depth: Int = RequestFeeder.pipelineDepth, keepsNewest: Bool = false, ringFrames: Int = 0,
                ringFramesInPlace: Int? = nil) {
        self.timing = timing
        self.limits = limits
        self.depth = depth
        self.keepsNewest = keepsNewest
        ring = ExposureRing(capacity: ringFrames, inPlace: ringFramesInPlace)
    }

    /// One capture in the queue.
    struct Capture: Sendable {
        enum Phase: Sendable {
            /// Waiting for auto-exposure to settle before an EV bracket is converted.
            case metering
            case bracketing
            /// A single photo: the first frame after this one.
            case single(after: UInt32?)
            /// A zero-shutter-lag photo waiting for the frame exposing at its instant (or, where
            /// none covers it, the first exposed after).
            case exposing(SensorTime)
            /// A burst: the frames before are taken; waiting for the frame at the instant (while
            /// `next` is the pivot's step) and the frames after.
            case burst(SensorTime, pivot: Int)
            /// A bracket exposed after a trigger waits until its requests would land after it.
            case waitingForInstant(SensorTime)
            /// A phase-locked bracket: pre-roll frames planned so its first step starts at the
            /// instant; the bracket takes over when the lock says.
            case phaseLocking
            case done
        }

        let settings: PhotoSettings
        var phase = Phase.metering
        var scheduler: BracketScheduler?
        /// Phase-locked brackets: the lock (from when its pre-roll starts) and the steps
        /// planned then.
        var lock: PhaseLock?
        var lockedPlan: [(ResolvedStep, BracketScheduler.Step)] = []
        var resolved: ResolvedPhotoSettings
        /// Photos by step, held until every step is captured (AVFoundation delivers them after
        /// "exposure ended").
        var photos: [Int: (CompletedRequest, ResolvedStep)] = [:]
        var exposureStartSent = false
        /// A zero-shutter-lag bracket: the held frame that was exposing at its instant, taken
        /// when the capture began (before metering could push it out), until the plan says
        /// whether it carries step 1; and the bracket's steps before the scheduler's (1 when
        /// step 1 is that frame).
        var heldStep: CompletedRequest?
        /// Whether `heldStep` came from the frames held (else it came back during metering).
        var heldStepWasHeld = false
        /// A zero-shutter-lag photo asked for behind another capture: its frame is taken as it
        /// is asked for (`heldStep`), or as it comes back while it waits its turn (this is set
        /// until then), not when its turn comes, by when it may have left the frames held.
        var awaitingHeldFrame = false
        /// Whether `heldStep` was taken while the capture waited its turn.
        var heldEarly = false
        /// A burst queued behind another capture: its frames taken as it was asked for (those
        /// before the instant, and the one at it) and as they come back while it waits its
        /// turn (the one at the instant, if still to come, then those after), in step order;
        /// how many are from before the instant.
        var early: [CompletedRequest] = []
        var earlyBefore = 0
        var stepOffset = 0
        /// A burst's next step to fill, and the newest frame it took.
        var burstNext = 0
        var burstNewest: UInt32?
        /// Metering and single photos: when a frame last came, and how many were metered, so a
        /// stalled camera or an AGC that never settles fails the capture instead of hanging it.
        var lastProgress: SensorTime?
        var meteredFrames = 0

        var id: Int64 { settings.uniqueID }

        init(_ settings: PhotoSettings) {
            self.settings = settings
            resolved = ResolvedPhotoSettings(uniqueID: settings.uniqueID, steps: [], adjustments: [])
        }
    }

    // MARK: State

    /// What the session is to do, oldest first; emptied.
    public mutating func takeActions() -> [Action] {
        guard !actions.isEmpty else { return [] }
        defer { actions.removeAll() }
        return actions
    }

    public var hasActions: Bool { !actions.isEmpty }
    /// Nothing waits on frames.
    public var isIdle: Bool { captures.isEmpty && triggers.isEmpty }
    /// The newest complete frame's metadata.
    public var newest: FrameMetadata? { recent.last }
    /// The newest complete frames, oldest first (at most six).
    public var recentFrames: [FrameMetadata] {
        var copy = recent
        return copy.removeAll()
    }

    /// Whether requests between captures may carry other controls: no bracket is planning them
    /// (a bracket's requests between its steps repeat its own).
    public var isBetweenCaptures: Bool {
        guard let s = captures.first?.scheduler else { return true }
        return s.isFinished
    }

    // MARK: Inputs

    /// Queues a capture (checked beforehand); the head starts at once.
    public mutating func add(_ settings: PhotoSettings, now: SensorTime) {
        clock = now
        captures.append(Capture(settings))
        if captures.count == 1 {
            activate(now: now)
        } else {
            takeHeldFrameEarly(captures.count - 1)
        }
    }

    /// A zero-shutter-lag capture queued behind another takes the frame exposing at its
    /// instant now, from the frames held (or as it comes back), whatever the capture ahead is
    /// doing: the trigger's frame is the one at its edge, not the one held when its turn comes.
    /// A single photo takes the frame covering the instant, else the first exposed after (saying
    /// why); an exposure bracket, the frame covering it, to be its step 1 if it carries it.
    private mutating func takeHeldFrameEarly(_ i: Int) {
        let s = captures[i].settings
        if let b = s.burst, let instant = s.exposedAfter, ring.isEnabled, s.bracket == nil {
            captures[i].early = ring.take(before: instant, count: b.before, window: b.window, seen: recentFrames)
            captures[i].earlyBefore = captures[i].early.count
            captures[i].heldEarly = true
            switch ring.take(exposingAt: instant, seen: recentFrames) {
            case .covering(let c):
                captures[i].early.append(c)
                captures[i].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: true, fromHeldFrames: true)
            case .after(let c, let reason):
                captures[i].early.append(c)
                captures[i].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: false, fallback: reason, fromHeldFrames: true)
            case .wait, .gone:
                // Still to come (or, gone, its turn says so).
                captures[i].awaitingHeldFrame = true
            }
            return
        }
        guard s.zeroShutterLag, s.burst == nil, let instant = s.exposedAfter, ring.isEnabled else { return }
        switch s.bracket {
        case nil:
            switch ring.take(exposingAt: instant, seen: recentFrames) {
            case .covering(let c):
                captures[i].heldStep = c
                captures[i].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: true, fromHeldFrames: true)
            case .after(let c, let reason):
                captures[i].heldStep = c
                captures[i].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: false, fallback: reason, fromHeldFrames: true)
            case .wait:
                captures[i].awaitingHeldFrame = true
            case .gone:
                // Its turn says so (the frames held only get newer).
                return
            }
            captures[i].heldEarly = captures[i].heldStep != nil
        case .exposureBias?, .manualExposure?:
            captures[i].heldStep = ring.takeCovering(instant)
            captures[i].heldStepWasHeld = captures[i].heldStep != nil
            captures[i].heldEarly = captures[i].heldStep != nil
        case .lensPositions?:
            return
        }
    }

    /// A frame come back that no capture took: the first queued zero-shutter-lag photo waiting
    /// for its frame takes it when it is that frame (covering the instant, else the first
    /// exposed after). Returns whether one did.
    private mutating func takeForQueued(_ c: CompletedRequest) -> Bool {
        guard c.status == .complete, captures.count > 1 else { return false }
        for i in 1..<captures.count {
            // A burst whose frame at the instant is in takes the frames after it, in order.
            if let b = captures[i].settings.burst, captures[i].heldEarly, !captures[i].awaitingHeldFrame,
               captures[i].early.count > captures[i].earlyBefore, captures[i].early.count < b.count,
               let last = captures[i].early.last, c.metadata.sequence > last.metadata.sequence {
                captures[i].early.append(c)
                return true
            }
            guard captures[i].awaitingHeldFrame, let instant = captures[i].settings.exposedAfter else { continue }
            switch c.metadata.exposure(against: instant) {
            case .before:
                continue
            case .covering:
                captures[i].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: true, fromHeldFrames: false)
            case .after:
                let why = ExposureRing.gap(before: c.metadata, instant: instant, seen: recentFrames.filter { $0.sequence < c.metadata.sequence })
                captures[i].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: false, fallback: why, fromHeldFrames: false)
            }
            captures[i].awaitingHeldFrame = false
            if captures[i].settings.burst != nil {
                captures[i].early.append(c)
            } else {
                captures[i].heldStep = c
            }
            captures[i].heldEarly = true
            return true
        }
        return false
    }

    /// Drops a capture (its consumer went away): what it held goes back, and what a bracket
    /// set is restored.
    public mutating func cancel(_ id: Int64, now: SensorTime) {
        clock = now
        guard let index = captures.firstIndex(where: { $0.id == id }) else { return }
        let capture = captures.remove(at: index)
        for (r, _) in capture.photos.values { actions.append(.release(slot: r.slot)) }
        if let h = capture.heldStep { actions.append(.release(slot: h.slot)) }
        for e in capture.early { actions.append(.release(slot: e.slot)) }
        if capture.scheduler != nil || capture.lock != nil {
            actions.append(.restoreBaseline)
            noteManualExposureEnded(capture)
        }
        if index == 0, !captures.isEmpty { activate(now: now) }
    }

    /// Waits for the first frame exposed at or after `instant`, until `deadline` on the
    /// camera's clock. Returns the kept frame when it is that frame (its hold passes to the
    /// caller); otherwise the frame comes as `.triggered`.
    public mutating func addTrigger(id: Int, exposedAfter instant: SensorTime, deadline: SensorTime) -> CompletedRequest? {
        if let r = takeRetained(exposedAfter: instant) { return r }
        triggers.add(id: id, exposedAfter: instant, deadline: deadline)
        return nil
    }

    /// Stops keeping the kept frame and the frames held for zero shutter lag; their slots, to
    /// give back.
    public mutating func dropRetained() -> [Int] {
        defer { retained = nil }
        return (retained.map { [$0.slot] } ?? []) + ring.removeAll()
    }

    /// Frames held for zero-shutter-lag captures, oldest first.
    public var heldFrames: [FrameMetadata] { ring.frames.map(\.metadata) }
    /// The most frames held for zero-shutter-lag captures.
    public var heldFramesCapacity: Int { ring.capacity }
    /// The frames held now as copies in the pool, oldest first.
    public var heldFramesInPool: [FrameMetadata] { ring.frames.filter { ExposureRing.isPooled($0.slot) }.map(\.metadata) }

    /// A completed request, with `otherHolders` (sinks) keeping its buffers besides. Returns the
    /// holds the machine took on its slot (a trigger's, a capture's, the kept frame's).
    ///
    /// - Parameters:
    ///   - now: the time progress is counted by (the frame's own, for a camera that paces by
    ///     demand).
    ///   - clock: the camera's clock now, when ahead of `now`.
    public mutating func frame(_ c: CompletedRequest, now: SensorTime, clock: SensorTime? = nil, otherHolders: Int = 0) -> Int {
        self.clock = clock ?? now
        let m = c.metadata
        if c.status == .complete {
            recent.append(m, keepingAtMost: 6)
            // Frames after a gap (a stall, a dropped frame) carry, until the sensor writes
            // decided after it land, what the AGC decided before it: the same values, frame after
            // frame, whether it had converged or not. They prove nothing about settling.
            if let previous = lastSequence, m.sequence &- previous > 1 {
                settlesFrom = m.sequence &+ UInt32(timing.latestLanding(framePeriod: timing.minFramePeriod))
            }
            lastSequence = m.sequence
            if let after = autoExposureResumesAfter, Self.settled(Array(recentFrames.suffix(3)), after: max(after, settlesFrom.map { $0 &- 1 } ?? after)) { autoExposureResumesAfter = nil }
        }
        var holders = 0
        if !triggers.isEmpty, let w = triggers.complete(status: c.status, metadata: m) {
            actions.append(.triggered(trigger: w.id, instant: w.instant, frame: c))
            holders += 1
        }
        if !captures.isEmpty, judge(c, now: now) { holders += 1 }
        if holders == 0, takeForQueued(c) { holders += 1 }
        if ring.isEnabled, c.status == .complete, holders == 0 {
            // Held for a zero-shutter-lag capture asked for after it came back; the oldest
            // held goes back. Beyond the frames the camera's buffers can spare it is copied
            // into the pool, and the copy's action gives its slot back.
            let h = ring.hold(c)
            if let old = h.released { actions.append(.release(slot: old)) }
            if let id = h.pooledAs { actions.append(.pool(frame: c, id: id)) }
            holders += 1
        } else if keepsNewest, c.status == .complete {
            // The newest frame nobody took waits for a capture registered late; the one it
            // replaces goes back.
            if let old = retained { actions.append(.release(slot: old.slot)) }
            retained = holders + otherHolders == 0 ? c : nil
            if retained != nil { holders += 1 }
        }
        return holders
    }

    /// The controls request `cookie` carries for the head capture (nil: none of its own), its
    /// pairing being the frame after the newest, past `queued` requests in flight.
    public mutating func controls(forRequest cookie: UInt64, queued: Int, now: SensorTime, clock: SensorTime? = nil) -> CameraControls? {
        guard !captures.isEmpty else { return nil }
        self.clock = clock ?? now
        if case .phaseLocking = captures[0].phase, let c = phaseLockControls(cookie: cookie, queued: queued, now: now) {
            // A phase-locked bracket's pre-roll, or its first step.
            return c
        }
        guard !captures.isEmpty, captures[0].scheduler != nil else { return nil }
        return captures[0].scheduler!.controls(forRequest: cookie)
    }

    /// Lets the machine see the camera's clock at `t`: stalled triggers and captures fail.
    public mutating func tick(now t: SensorTime) {
        clock = t
        for w in triggers.tick(now: t) {
            actions.append(.triggerFailed(trigger: w.id, ShutterbugError(.timeout, "no frame exposed after \(w.instant) came back by \(w.deadline) (the camera's clock is now \(t))")))
        }
        guard !captures.isEmpty else { return }
        switch captures[0].phase {
        case .bracketing:
            guard var s = captures[0].scheduler else { return }
            let out = s.tick(now: t)
            captures[0].scheduler = s
            // The first failure ends the capture (a second would be the next capture's).
            for case .failed(_, let reason) in out {
                fail(ShutterbugError(.timeout, reason), now: t)
                return
            }
        case .metering, .single, .exposing, .burst, .waitingForInstant, .phaseLocking:
            let period = recent.last?.frameDuration ?? timing.everyFramePeriod
            let limit = max(.seconds(2), period * 10)
            guard let last = captures[0].lastProgress, t - last > limit else { return }
            let what = if case .metering = captures[0].phase { "metering for the EV bracket" } else { "the photo" }
            fail(ShutterbugError(.timeout, "\(what) timed out: no frame came back for \(((t - last).secondsValue * 10).rounded() / 10) s (limit \(limit.secondsValue) s); the camera stalled"), now: t)
        case .done:
            return
        }
    }

    /// Every capture and trigger fails with `error` (the session stopped or failed).
    public mutating func failAll(_ error: ShutterbugError) {
        for capture in captures {
            for (r, _) in capture.photos.values { actions.append(.release(slot: r.slot)) }
            if let h = capture.heldStep { actions.append(.release(slot: h.slot)) }
            for e in capture.early { actions.append(.release(slot: e.slot)) }
            actions.append(.failed(capture: capture.id, error))
        }
        captures.removeAll()
        for w in triggers.removeAll() { actions.append(.triggerFailed(trigger: w.id, error)) }
    }

    // MARK: Planning

    /// Adjusts a requested exposure and gain to the sensor, explaining each change.
    public func adjust(exposure: Duration, gain: Double, what: String) -> (StepTarget, [String]) {
        timing.adjust(exposure: exposure, gain: gain, what: what)
    }

    /// Two steps the frames' metadata cannot tell apart would get each other's frames and
    /// still report success; unless the camera names each frame's request
    /// (`ControlListSequence`), such a bracket is refused when it is planned.
    public func ambiguity(_ targets: [StepTarget]) -> String? {
        guard recent.last?.controlListSequence == nil,
              let (i, j) = StepTarget.firstAmbiguousPair(targets, lineTime: timing.lineTime) else { return nil }
        // In the terms the steps were given in: a focus bracket's are lens positions.
        var rules: [String] = []
        if targets[i].exposure != nil { rules.append("exposure within one line, \(Int(timing.lineTime.microsecondsValue.rounded())) µs") }
        if targets[i].gain != nil { rules.append("gain within \(Int(StepTarget.gainTolerance * 100))%") }
        if targets[i].lens != nil { rules.append("lens position within \(String(format2: StepTarget.lensTolerance)) dpt") }
        return "steps \(i + 1) (\(targets[i])) and \(j + 1) (\(targets[j])) cannot be told apart by the frames' metadata (\(rules.joined(separator: ", "))); make them differ by more, or give them the same value"
    }

    /// Controls for an exposure step: both manual (applied at once, no AGC filter), white
    /// balance fixed (at `whiteBalance`, or at what it is now), and a frame duration that fits
    /// the exposure exactly.
    public func exposureStep(_ target: StepTarget, whiteBalance: ColourGains? = nil) -> BracketScheduler.Step {
        let fd = timing.framePeriod(for: target.exposure!)
        var c = CameraControls.manualExposure(target.exposure!, gain: Gain(target.gain!))
        c.frameDurationLimits = fd...fd
        if limits.supported.contains(.colourGains), let g = whiteBalance ?? recent.last?.colourGains {
            c.awbEnabled = false
            c.colourGains = g
        }
        return BracketScheduler.Step(controls: c, target: target)
    }

    /// Whether requests queued now would land on frames exposed after `instant`: the newest
    /// frame, plus the requests already queued ahead of them, plus the earliest landing,
    /// less the first step's exposure, reaches past it. Planned any later, the bracket would
    /// begin frames after the instant; any earlier, its first frame could be exposed before it.
    func requestsLandAfter(_ instant: SensorTime, exposure: Duration = .zero) -> Bool {
        guard let m = recent.last, let ts = m.sensorTimestamp else { return false }
        let period = m.frameDuration ?? timing.everyFramePeriod
        return ts + period * (depth + timing.landingOffsets.lowerBound) - exposure >= instant
    }

    /// The first step's exposure, for `requestsLandAfter`: the longest a manual bracket could
    /// start with (zero for other captures, which meter or focus first).
    static func firstExposure(_ settings: PhotoSettings) -> Duration {
        if case .manualExposure(let steps)? = settings.bracket { return steps.map(\.duration).max() ?? .zero }
        return .zero
    }

    /// Starts the capture at the head of the queue.
    private mutating func activate(now: SensorTime) {
        guard !captures.isEmpty else { return }
        captures[0].lastProgress = clock
        let settings = captures[0].settings
        if settings.phaseLocked, case .manualExposure? = settings.bracket {
            captures[0].phase = .phaseLocking
            return
        }
        if settings.bracket != nil, let instant = settings.exposedAfter, !requestsLandAfter(instant, exposure: Self.firstExposure(settings)) {
            captures[0].phase = .waitingForInstant(instant)
            return
        }
        plan(now: now)
    }

    /// Plans the head capture: a single photo, metering, or a bracket.
    private mutating func plan(now: SensorTime) {
        let settings = captures[0].settings
        switch settings.bracket {
        case nil where settings.burst != nil && settings.exposedAfter != nil:
            planBurst(settings.burst!, at: settings.exposedAfter!, now: now)
        case nil where settings.zeroShutterLag && settings.exposedAfter != nil:
            planZeroShutterLag(at: settings.exposedAfter!, now: now)
        case nil:
            captures[0].phase = .single(after: lastSequence)
            captures[0].resolved.steps = [ResolvedStep(index: 0, requested: "the settings in force", planned: StepTarget())]
            actions.append(.resolved(capture: captures[0].id, captures[0].resolved))
            // A triggered sensor's frame for this instant may have come back before the
            // capture was asked for: it was kept, and is the photo (its slot's hold passes
            // from the kept frame to the photo).
            if let instant = settings.exposedAfter, let kept = retained, kept.metadata.exposed(after: instant) {
                // Kept, but begun after the latest start allowed: it is a later pulse's frame,
                // and this capture's own is gone. It fails as late; the frame stays kept for
                // the capture it belongs to.
                if let latest = settings.exposedBefore, let start = kept.metadata.earliestExposureStart, start > latest {
                    _ = failedLate(kept, now: now)
                    return
                }
                retained = nil
                captures[0].phase = .single(after: nil)
                if !judge(kept, now: now) { actions.append(.release(slot: kept.slot)) }
            }
        case .exposureBias?:
            holdFrameForFirstStep()
            captures[0].phase = .metering
        case .manualExposure?:
            holdFrameForFirstStep()
            let planned = manualSteps()
            begin(planned, now: now)
        case .lensPositions(let lenses)?:
            zeroShutterLagIgnored()
            let range = limits.lensPosition ?? 0...15
            var planned: [(ResolvedStep, BracketScheduler.Step)] = []
            for (i, l) in lenses.enumerated() {
                let v = min(max(l.value, range.lowerBound), range.upperBound)
                if v != l.value { captures[0].resolved.adjustments.append("step \(i + 1): lens \(l) adjusted to \(Dioptres(v))") }
                let target = StepTarget(lens: v)
                planned.append((ResolvedStep(index: i, requested: "\(l)", planned: target),
                                BracketScheduler.Step(controls: CameraControls(afMode: .manual, lensPosition: Dioptres(v)), target: target)))
            }
            begin(planned, now: now)
        }
    }

    /// A zero-shutter-lag photo: the held frame whose exposure covered the instant, else the
    /// held frame first exposed after it where none did (saying why), else the frames to come.
    private mutating func planZeroShutterLag(at instant: SensorTime, now: SensorTime) {
        captures[0].resolved.steps = [ResolvedStep(index: 0, requested: "the frame exposing at \(instant)", planned: StepTarget())]
        actions.append(.resolved(capture: captures[0].id, captures[0].resolved))
        // Its frame was taken while it waited its turn (or is still to come back).
        if let c = captures[0].heldStep, captures[0].heldEarly {
            captures[0].heldStep = nil
            takeSingle(c, now: now)
            return
        }
        if captures[0].awaitingHeldFrame {
            captures[0].awaitingHeldFrame = false
            captures[0].phase = .exposing(instant)
            return
        }
        switch takeHeld(at: instant, now: now) {
        case .frame(let c): takeSingle(c, now: now)
        case .wait: captures[0].phase = .exposing(instant)
        case .failed: break
        }
    }

    enum HeldChoice {
        case frame(CompletedRequest)
        /// The frame at the instant is still to come back.
        case wait
        /// Gone from the frames held: the head failed as late.
        case failed
    }

    /// The head's frame at `instant` from the frames held (covering it, else the first exposed
    /// after, saying why), recorded in its resolved settings.
    private mutating func takeHeld(at instant: SensorTime, now: SensorTime) -> HeldChoice {
        switch ring.take(exposingAt: instant, seen: recentFrames) {
        case .covering(let c):
            captures[0].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: true, fromHeldFrames: true)
            return .frame(c)
        case .after(let c, let reason):
            captures[0].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: false, fallback: reason, fromHeldFrames: true)
            return .frame(c)
        case .gone(let reason):
            fail(ShutterbugError(.late, reason), now: now)
            return .failed
        case .wait:
            return .wait
        }
    }

    /// Whether `c`, come back while the head waits for its frame at `instant`, is that frame:
    /// covering the instant, else the first exposed after (saying why none covered it).
    private mutating func isFrame(_ c: CompletedRequest, at instant: SensorTime) -> Bool {
        guard c.status == .complete else { return false }
        switch c.metadata.exposure(against: instant) {
        case .before:
            return false
        case .covering:
            captures[0].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: true, fromHeldFrames: false)
        case .after:
            let why = ExposureRing.gap(before: c.metadata, instant: instant, seen: recentFrames.filter { $0.sequence < c.metadata.sequence })
            captures[0].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: false, fallback: why, fromHeldFrames: false)
        }
        return true
    }

    /// A burst: the held frames before the instant, the frame exposing at it (or the first
    /// after), then the frames that follow, as steps in frame order. Fewer held before it than
    /// asked (just after start-up, or a window that holds fewer) means more taken after, so a
    /// burst always has its count of frames.
    private mutating func planBurst(_ b: PhotoSettings.Burst, at instant: SensorTime, now: SensorTime) {
        // Its frames taken while it waited its turn: those, then (the one at the instant still
        // to come, or those after it) the frames that follow.
        let early = captures[0].heldEarly ? captures[0].early : nil
        captures[0].early = []
        let pre = early.map { Array($0.prefix(captures[0].earlyBefore)) } ?? ring.take(before: instant, count: b.before, window: b.window, seen: recentFrames)
        let pivot = pre.count
        captures[0].resolved.pivotStep = pivot
        if pre.count < b.before {
            captures[0].resolved.adjustments.append("burst: \(pre.count) of the \(b.before) frames before the trigger were held (the camera had not streamed that long, or frames were dropped or taken); \(b.before - pre.count) more taken after it")
        }
        captures[0].resolved.steps = (0..<b.count).map { i in
            let requested = i < pivot ? "frame \(i - pivot) before the trigger at \(instant)" : i == pivot ? "the frame exposing at \(instant)" : "frame +\(i - pivot) after the trigger at \(instant)"
            return ResolvedStep(index: i, requested: requested, planned: StepTarget())
        }
        actions.append(.resolved(capture: captures[0].id, captures[0].resolved))
        captures[0].phase = .burst(instant, pivot: pivot)
        if let early {
            captures[0].awaitingHeldFrame = false
            for f in early where takeBurst(f, now: now) { return }
            return
        }
        for f in pre { _ = takeBurst(f, now: now) }
        if case .frame(let c) = takeHeld(at: instant, now: now) { _ = takeBurst(c, now: now) }
    }

    /// The head burst takes `c` as its next step; true when the burst is complete.
    private mutating func takeBurst(_ c: CompletedRequest, now: SensorTime) -> Bool {
        let i = captures[0].burstNext
        captures[0].resolved.steps[i].actual = c.metadata
        captures[0].photos[i] = (c, captures[0].resolved.steps[i])
        captures[0].burstNext += 1
        captures[0].burstNewest = c.metadata.sequence
        if captures[0].burstNext == captures[0].resolved.steps.count {
            if let z = captures[0].resolved.zeroShutterLag, !z.covered, let why = z.fallback {
                captures[0].resolved.adjustments.append("zero shutter lag: no frame's exposure covered \(z.instant) (\(why)); the first frame exposed after it is the burst's frame at the trigger")
            }
            complete(now: now)
            return true
        }
        return false
    }

    /// The head single photo takes `c` (its hold passes to the photo).
    private mutating func takeSingle(_ c: CompletedRequest, now: SensorTime) {
        if let z = captures[0].resolved.zeroShutterLag, !z.covered, let why = z.fallback {
            captures[0].resolved.adjustments.append("zero shutter lag: no frame's exposure covered \(z.instant) (\(why)); took the first frame exposed after it")
        }
        captures[0].resolved.steps[0].actual = c.metadata
        captures[0].photos[0] = (c, captures[0].resolved.steps[0])
        complete(now: now)
    }

    /// Zero shutter lag asked of a focus bracket, whose steps are frames still to come: said,
    /// and the steps are exposed after the instant as any bracket's.
    private mutating func zeroShutterLagIgnored() {
        guard captures[0].settings.zeroShutterLag else { return }
        captures[0].resolved.adjustments.append("zero shutter lag: a focus bracket's steps move the lens, so each is a frame still to come, exposed after the instant")
    }

    /// Zero shutter lag asked of an exposure bracket: the held frame that was exposing at the
    /// instant is taken now (metering would push it out of the ring), to be step 1 if it
    /// carries step 1's settings (`firstStepFromHeldFrame`).
    private mutating func holdFrameForFirstStep() {
        guard captures[0].settings.zeroShutterLag, let instant = captures[0].settings.exposedAfter else { return }
        // Taken while it waited its turn.
        if captures[0].heldEarly { return }
        captures[0].heldStep = ring.takeCovering(instant)
        captures[0].heldStepWasHeld = captures[0].heldStep != nil
        if captures[0].heldStep == nil {
            captures[0].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: false, fallback: "no frame held was exposing at the instant", fromHeldFrames: false)
        }
    }

    /// Whether `m` carries `planned`, step 1 of an exposure bracket: a manual step's exposure
    /// and gain (`StepTarget.isCarried`); an EV step's total exposure (exposure × analogue ×
    /// digital gain) within 3% of the step's, however auto exposure split it.
    private func carries(_ m: FrameMetadata, _ planned: StepTarget) -> Bool {
        if case .manualExposure? = captures[0].settings.bracket { return planned.isCarried(by: m, lineTime: timing.lineTime) }
        guard let e = planned.exposure, let g = planned.gain, let re = m.exposureTime, let rg = m.totalGain else { return false }
        let want = e.secondsValue * g, got = re.secondsValue * rg.value
        return abs(got - want) <= StepTarget.totalGainTolerance * want
    }

    /// A zero-shutter-lag exposure bracket, planned: step 1 is the held frame exposing at the
    /// instant when that frame carries step 1's settings (so the bracket begins before the
    /// edge was heard); otherwise it goes back and every step is a frame still to come, the
    /// resolved settings saying why. Returns the steps left for the scheduler.
    private mutating func firstStepFromHeldFrame(_ planned: [(ResolvedStep, BracketScheduler.Step)]) -> [(ResolvedStep, BracketScheduler.Step)] {
        guard captures[0].settings.zeroShutterLag, let instant = captures[0].settings.exposedAfter, !planned.isEmpty else { return planned }
        guard let c = captures[0].heldStep else {
            captures[0].resolved.adjustments.append("zero shutter lag: no frame held was exposing at the trigger; every step is a frame still to come, exposed after it")
            return planned
        }
        captures[0].heldStep = nil
        let m = c.metadata
        let carried = "\(m.exposureTime?.exposureDescription ?? "-") at gain \(String(format2: m.totalGain?.value ?? 0))"
        guard carries(m, planned[0].1.target) else {
            actions.append(.release(slot: c.slot))
            let why = "frame \(m.sequence), exposing at the trigger, carries \(carried), not step 1's \(planned[0].1.target)"
            captures[0].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: false, fallback: why, fromHeldFrames: false)
            captures[0].resolved.adjustments.append("zero shutter lag: \(why); every step is a frame still to come, exposed after the trigger (put the step the camera is at first, e.g. --ev 0,-2,2)")
            return planned
        }
        captures[0].resolved.zeroShutterLag = ZeroShutterLag(instant: instant, covered: true, fromHeldFrames: captures[0].heldStepWasHeld)
        captures[0].resolved.adjustments.append("zero shutter lag: step 1 is frame \(m.sequence), exposing at the trigger, which carries step 1's settings (\(carried)); \(planned.count == 2 ? "step 2 is a frame" : "steps 2...\(planned.count) are frames") still to come")
        var step = planned[0].0
        step.actual = m
        captures[0].photos[0] = (c, step)
        captures[0].stepOffset = 1
        return Array(planned.dropFirst())
    }

    /// The head's manual-exposure steps, fitted to the sensor (the adjustments recorded).
    private mutating func manualSteps() -> [(ResolvedStep, BracketScheduler.Step)] {
        guard case .manualExposure(let steps)? = captures[0].settings.bracket else { return [] }
        var planned: [(ResolvedStep, BracketScheduler.Step)] = []
        for (i, s) in steps.enumerated() {
            let (target, notes) = adjust(exposure: s.duration, gain: s.gain.value, what: "step \(i + 1)")
            captures[0].resolved.adjustments += notes
            planned.append((ResolvedStep(index: i, requested: "\(s.duration.exposureDescription) gain \(String(format2: s.gain.value))", planned: target),
                            exposureStep(target, whiteBalance: captures[0].settings.whiteBalance)))
        }
        return planned
    }

    /// The controls the next request carries for a phase-locked head capture (nil: a filler),
    /// handing over to its bracket when the lock says.
    private mutating func phaseLockControls(cookie: UInt64, queued: Int, now: SensorTime) -> CameraControls? {
        guard case .phaseLocking = captures[0].phase, let instant = captures[0].settings.exposedAfter else { return nil }
        // The request pairs with the frame after the newest, past those already in flight.
        let pairing = Int64(lastSequence ?? 0) + Int64(queued)
        if captures[0].lock == nil {
            // Planned now, not when the capture was queued: the white balance is the
            // latest, as for any bracket.
            let planned = manualSteps()
            if let reason = ambiguity(planned.map(\.1.target)) {
                fail(ShutterbugError(.invalidArgument, reason), now: now)
                return nil
            }
            captures[0].lockedPlan = planned
            captures[0].lock = PhaseLock(instant: instant, step: planned[0].1, timing: timing, depth: depth)
        }
        switch captures[0].lock!.request(cookie: cookie, pairing: pairing, newest: recent.last) {
        case .filler:
            return nil
        case .preroll(let c):
            return c
        case .handOver:
            begin(captures[0].lockedPlan, now: now, checked: true)
            return captures[0].scheduler?.controls(forRequest: cookie)
        }
    }

    private mutating func begin(_ planned: [(ResolvedStep, BracketScheduler.Step)], now: SensorTime, checked: Bool = false) {
        if !checked, let reason = ambiguity(planned.map(\.1.target)) {
            fail(ShutterbugError(.invalidArgument, reason), now: now)
            return
        }
        captures[0].resolved.steps = planned.map(\.0)
        let rest = firstStepFromHeldFrame(planned)
        if let (held, step) = captures[0].photos[0], captures[0].stepOffset > 0 {
            captures[0].resolved.steps[0] = step
            guard !rest.isEmpty else {
                // A bracket of one step, and the held frame is it.
                actions.append(.resolved(capture: captures[0].id, captures[0].resolved))
                complete(now: now)
                return
            }
            if let start = held.metadata.exposureStart {
                captures[0].exposureStartSent = true
                actions.append(.resolved(capture: captures[0].id, captures[0].resolved))
                actions.append(.exposureStarted(capture: captures[0].id, start))
            }
        }
        captures[0].scheduler = BracketScheduler(steps: rest.map(\.1), restore: restoreControls(), timing: timing, now: now, notBefore: captures[0].settings.exposedAfter,
                                                 firstStepPrerolled: captures[0].lock != nil)
        captures[0].phase = .bracketing
        if !captures[0].exposureStartSent { actions.append(.resolved(capture: captures[0].id, captures[0].resolved)) }
    }

    // MARK: Judging frames

    /// Judges a completed frame for the head capture; true when the capture keeps the frame.
    private mutating func judge(_ c: CompletedRequest, now: SensorTime) -> Bool {
        switch captures[0].phase {
        case .done:
            return false
        case .single(let after):
            captures[0].lastProgress = now
            guard c.status == .complete, after.map({ c.metadata.sequence > $0 }) ?? true else { return false }
            if let instant = captures[0].settings.exposedAfter {
                guard c.metadata.exposed(after: instant) else { return false }
            } else if autoExposureResumesAfter != nil {
                // The settings in force are auto exposure's, once it is back from the last
                // bracket (after the metering limit, the frame as it is).
                captures[0].meteredFrames += 1
                if captures[0].meteredFrames <= Self.meteringFrameLimit { return false }
            }
            if failedLate(c, now: now) { return false }
            captures[0].resolved.steps[0].actual = c.metadata
            captures[0].photos[0] = (c, captures[0].resolved.steps[0])
            complete(now: now)
            return true
        case .burst(let instant, let pivot):
            captures[0].lastProgress = now
            guard c.status == .complete, captures[0].burstNewest.map({ c.metadata.sequence > $0 }) ?? true else { return false }
            // Until the frame at the instant is taken, only it (the frames after follow it).
            if captures[0].burstNext == pivot, !isFrame(c, at: instant) { return false }
            _ = takeBurst(c, now: now)
            return true
        case .exposing(let instant):
            captures[0].lastProgress = now
            guard isFrame(c, at: instant) else { return false }
            takeSingle(c, now: now)
            return true
        case .waitingForInstant(let instant):
            captures[0].lastProgress = now
            if requestsLandAfter(instant, exposure: Self.firstExposure(captures[0].settings)) { plan(now: now) }
            return false
        case .phaseLocking:
            captures[0].lastProgress = now
            captures[0].lock?.observe(cookie: c.cookie, status: c.status, metadata: c.metadata)
            return false
        case .metering:
            captures[0].lastProgress = now
            captures[0].meteredFrames += 1
            // A zero-shutter-lag bracket whose frame at the instant was still to come back when
            // it began: kept when it comes (metering reads its metadata all the same).
            var kept = false
            if captures[0].settings.zeroShutterLag, captures[0].heldStep == nil, let instant = captures[0].settings.exposedAfter, c.status == .complete,
               c.metadata.exposure(against: instant) == .covering {
                captures[0].heldStep = c
                captures[0].resolved.zeroShutterLag = nil
                kept = true
            }
            if captures[0].meteredFrames > Self.meteringFrameLimit {
                let last = recent.last.map { "\($0.exposureTime?.exposureDescription ?? "-") at gain \(String(format2: $0.totalGain?.value ?? 0))" } ?? "-"
                fail(ShutterbugError(.timeout, "auto exposure did not settle in \(Self.meteringFrameLimit) frames (last: \(last)); an EV bracket needs the metered exposure to hold still for three frames"), now: now)
                // A frame kept just now went back with the capture's other holds.
                return kept
            }
            meter(now: now)
            return kept
        case .bracketing:
            return bracket(c, now: now)
        }
    }

    /// Auto-exposure has settled when the last three frames' total exposures agree within 1%.
    private mutating func meter(now: SensorTime) {
        guard case .exposureBias(let biases)? = captures[0].settings.bracket else { return }
        // Not from the last bracket's steps, nor from the AGC easing back from them.
        guard autoExposureResumesAfter == nil else { return }
        let frames = recentFrames
        if let from = settlesFrom, frames.suffix(3).contains(where: { $0.sequence < from }) { return }
        let totals = frames.suffix(3).compactMap { m -> Double? in
            guard let e = m.exposureTime, let g = m.totalGain else { return nil }
            return e.secondsValue * g.value
        }
        guard totals.count == 3, let lo = totals.min(), let hi = totals.max(), hi <= lo * 1.01, let base = frames.last else { return }
        let total = totals.last!
        captures[0].resolved.meteredExposure = base.exposureTime
        captures[0].resolved.meteredGain = base.totalGain?.value
        // Exposure first, up to what fits the every-frame period; then gain.
        let exposureLimit = timing.everyFramePeriod - timing.margin
        var planned: [(ResolvedStep, BracketScheduler.Step)] = []
        for (i, ev) in biases.enumerated() {
            let t = total * pow(2.0, ev)
            let minGain = timing.gainRange.lowerBound
            var e = min(Duration.seconds(exactly: t / minGain), max(exposureLimit, timing.exposureRange.lowerBound))
            var g = t / e.secondsValue
            if g > timing.gainRange.upperBound {
                // Out of gain: lengthen the exposure (and the frame) instead.
                g = timing.gainRange.upperBound
                e = .seconds(exactly: t / g)
            }
            let (target, notes) = adjust(exposure: e, gain: g, what: "step \(i + 1) (\(ev >= 0 ? "+" : "")\(ev) EV)")
            captures[0].resolved.adjustments += notes
            planned.append((ResolvedStep(index: i, requested: "\(ev >= 0 ? "+" : "")\(ev) EV", planned: target),
                            exposureStep(target, whiteBalance: captures[0].settings.whiteBalance)))
        }
        begin(planned, now: now)
    }

    private mutating func bracket(_ c: CompletedRequest, now: SensorTime) -> Bool {
        guard var s = captures[0].scheduler else { return false }
        captures[0].lock?.observe(cookie: c.cookie, status: c.status, metadata: c.metadata)
        let out = s.complete(cookie: c.cookie, requestSequence: c.requestSequence, status: c.status, metadata: c.metadata, now: now)
        captures[0].scheduler = s
        var keep = false
        for a in out {
            switch a {
            case .photo(let scheduled):
                // Steps before the scheduler's (step 1 from a held frame) come first.
                let step = scheduled + captures[0].stepOffset
                // The first step's frame decides whether the capture is on time; a late one is
                // not kept (its slot goes back through the ledger as unheld).
                if step == 0, failedLate(c, now: now) { return false }
                captures[0].resolved.steps[step].actual = c.metadata
                captures[0].photos[step] = (c, captures[0].resolved.steps[step])
                keep = true
                if !captures[0].exposureStartSent, let start = c.metadata.exposureStart {
                    captures[0].exposureStartSent = true
                    actions.append(.exposureStarted(capture: captures[0].id, start))
                }
            case .discard(let sequence, let reason):
                captures[0].resolved.discarded.append(DiscardedFrame(sequence: sequence, reason: reason.offset(by: captures[0].stepOffset).description,
                                                                     metadata: sequence == c.metadata.sequence ? c.metadata : nil))
            case .retry:
                captures[0].resolved.retries += 1
            case .finished:
                complete(now: now)
                return keep
            case .failed(_, let reason):
                fail(ShutterbugError(.timeout, reason), now: now)
                return keep
            }
        }
        return keep
    }

    /// Fails the head with `.late` when `c`, its first photo's frame, began after the latest
    /// start the settings allow. The frames held for other steps go back.
    private mutating func failedLate(_ c: CompletedRequest, now: SensorTime) -> Bool {
        let settings = captures[0].settings
        guard let latest = settings.exposedBefore, let start = c.metadata.earliestExposureStart, start > latest else { return false }
        let after = settings.exposedAfter.map { " (\((start - $0).millisecondsDescription) after the instant)" } ?? ""
        fail(ShutterbugError(.late, "the first exposure would begin at \(start)\(after), later than the latest start allowed, \(latest): not taken"), now: now)
        return true
    }

    /// Hands the head's held photos out in step order.
    private mutating func deliverHeldPhotos() {
        for key in captures[0].photos.keys.sorted() {
            let (request, step) = captures[0].photos[key]!
            actions.append(.photo(capture: captures[0].id, step: step, frame: request))
        }
        captures[0].photos.removeAll()
    }

    /// Every step is captured: exposure ended, photos in step order, finished. The next capture
    /// begins at once, while these photos are still held.
    private mutating func complete(now: SensorTime) {
        // What the bracket set goes back to what was in force, even where the restore was
        // still to go out (a focus bracket plans it after its last step).
        if captures[0].scheduler?.hasPlannedRequests == true { actions.append(.restoreBaseline) }
        noteManualExposureEnded(captures[0])
        let ordered = captures[0].photos.keys.sorted().map { captures[0].photos[$0]! }
        if let lock = captures[0].lock, let instant = captures[0].settings.exposedAfter {
            captures[0].resolved.phaseLock = lock.report(firstStart: ordered.first?.0.metadata.exposureStart, instant: instant)
        }
        let id = captures[0].id
        if !captures[0].exposureStartSent, let start = ordered.first?.0.metadata.exposureStart {
            actions.append(.exposureStarted(capture: id, start))
        }
        if let last = ordered.map(\.0.metadata).max(by: { $0.sequence < $1.sequence }), let ts = last.sensorTimestamp {
            actions.append(.exposureEnded(capture: id, ts + timing.readoutTime))
        }
        deliverHeldPhotos()
        captures[0].phase = .done
        actions.append(.finished(capture: id, captures[0].resolved))
        captures.removeFirst()
        if !captures.isEmpty { activate(now: now) }
    }

    /// Ends the head with `error`. The steps it already captured are handed out first, in step
    /// order (each frame proven to be its step's), so a bracket that fails part-way loses
    /// nothing it captured; the consumer sees them, then the error. A late capture's frames go
    /// back unseen.
    private mutating func fail(_ error: ShutterbugError, now: SensorTime) {
        if case .bracketing = captures[0].phase, error.code != .late {
            deliverHeldPhotos()
        }
        for (r, _) in captures[0].photos.values { actions.append(.release(slot: r.slot)) }
        if let h = captures[0].heldStep { actions.append(.release(slot: h.slot)) }
        for e in captures[0].early { actions.append(.release(slot: e.slot)) }
        // Requests a failed bracket (or its pre-roll) sent set the camera by hand: it goes back
        // to what was in force, whether or not its own restore had gone out.
        if captures[0].scheduler != nil || captures[0].lock != nil {
            actions.append(.restoreBaseline)
            noteManualExposureEnded(captures[0])
        }
        let id = captures.removeFirst().id
        actions.append(.failed(capture: id, error))
        if !captures.isEmpty { activate(now: now) }
    }

    /// What a bracket's last request sets: `baseline`, and for a focus bracket on a camera whose
    /// focus mode nobody set, the lens back where it was before the bracket (the Pi's default
    /// `AfMode` is manual: the position is all there is to give back).
    private func restoreControls() -> CameraControls {
        var r = baseline
        if case .lensPositions? = captures[0].settings.bracket, r.afMode == nil, r.lensPosition == nil,
           let before = recent.last?.lensPosition {
            r.afMode = .manual
            r.lensPosition = before
        }
        return r
    }

    /// A capture that set exposure and gain by hand has ended: frames until its restore lands
    /// are not auto exposure's (`autoExposureResumesAfter`).
    private mutating func noteManualExposureEnded(_ capture: Capture) {
        switch capture.settings.bracket {
        case .exposureBias?, .manualExposure?:
            guard capture.scheduler != nil || capture.lock != nil else { return }
            autoExposureResumesAfter = (lastSequence ?? 0) &+ UInt32(depth + timing.latestLanding(framePeriod: timing.minFramePeriod) + 1)
        case .lensPositions?, nil:
            return
        }
    }

    /// Auto exposure has settled when the newest three frames after `after` agree in total
    /// exposure within 1% (the rule metering uses); frames that carry no exposure or gain
    /// (a camera without those controls) have nothing to settle.
    static func settled(_ frames: [FrameMetadata], after: UInt32) -> Bool {
        guard let last = frames.last else { return false }
        if last.exposureTime == nil || last.totalGain == nil { return true }
        let totals = frames.filter { $0.sequence > after }.compactMap { m -> Double? in
            guard let e = m.exposureTime, let g = m.totalGain else { return nil }
            return e.secondsValue * g.value
        }
        guard totals.count == 3, let lo = totals.min(), let hi = totals.max() else { return false }
        return hi <= lo * 1.01
    }

    private mutating func takeRetained(exposedAfter instant: SensorTime) -> CompletedRequest? {
        guard let r = retained, r.metadata.exposed(after: instant) else { return nil }
        retained = nil
        return r
    }
}

extension CameraTiming {
    /// Adjusts a requested exposure and gain to the sensor, explaining each change.
    public func adjust(exposure: Duration, gain: Double, what: String) -> (StepTarget, [String]) {
        var notes: [String] = []
        var e = exposure, g = gain
        let er = exposureRange, gr = gainRange
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
        return (StepTarget(exposure: quantise(e), gain: g), notes)
    }
}
