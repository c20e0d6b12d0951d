import CaptureScheduler
import ShutterbugCore

/// One capture in progress: its plan, the photos held for it, and its event stream.
final class ActiveCapture {
    enum Phase {
        /// Waiting for auto-exposure to settle before an EV bracket is converted.
        case metering
        case bracketing
        /// A single photo: the first frame after this one.
        case single(after: UInt32?)
        /// A bracket exposed after a trigger waits until its requests would land after it.
        case waitingForInstant(SensorTime)
        /// A phase-locked bracket: pre-roll frames planned so its first step starts at the
        /// instant; the bracket takes over when the lock says.
        case phaseLocking
        case done
    }

    let settings: PhotoSettings
    let continuation: AsyncThrowingStream<CaptureEvent, any Error>.Continuation
    var phase: Phase = .metering
    var scheduler: BracketScheduler?
    /// Phase-locked brackets: the lock (from when its pre-roll starts) and the steps planned then.
    var lock: PhaseLock?
    var lockedPlan: [(ResolvedStep, BracketScheduler.Step)] = []
    var resolved: ResolvedPhotoSettings
    /// Photos by step, held until every step is captured (AVFoundation delivers them after
    /// "exposure ended").
    var photos: [Int: (CompletedRequest, ResolvedStep)] = [:]
    var heldSlots: [Int] { photos.values.map(\.0.slot) }
    var exposureStartSent = false
    /// Metering and single photos: when a frame last came, and how many were metered, so a
    /// stalled camera or an AGC that never settles fails the capture instead of hanging it.
    var lastProgress: SensorTime?
    var meteredFrames = 0
    /// Frames the AGC gets to settle before an EV bracket gives up.
    static let meteringFrameLimit = 90

    init(settings: PhotoSettings, continuation: AsyncThrowingStream<CaptureEvent, any Error>.Continuation) {
        self.settings = settings
        self.continuation = continuation
        resolved = ResolvedPhotoSettings(uniqueID: settings.uniqueID, steps: [], adjustments: [])
    }

    func finish(throwing error: ShutterbugError) {
        phase = .done
        continuation.finish(throwing: error)
    }
}

extension CaptureSession {
    /// Starts the capture at the head of the queue.
    func activate() {
        guard let capture = captures.first else { return }
        defer { topUp() }
        capture.lastProgress = now()
        startTicking()
        if capture.settings.phaseLocked, case .manualExposure? = capture.settings.bracket {
            capture.phase = .phaseLocking
            return
        }
        if capture.settings.bracket != nil, let instant = capture.settings.exposedAfter, !requestsLandAfter(instant, exposure: firstExposure(capture)) {
            capture.phase = .waitingForInstant(instant)
            return
        }
        plan(capture)
    }

    /// Whether requests queued now would land on frames exposed after `instant`: the newest
    /// frame, plus the requests already queued ahead of them, plus the earliest landing,
    /// less the first step's exposure, reaches past it. Planned any later, the bracket would
    /// begin frames after the instant; any earlier, its first frame could be exposed before it.
    func requestsLandAfter(_ instant: SensorTime, exposure: Duration = .zero) -> Bool {
        guard let m = recentMetadata.last, let ts = m.sensorTimestamp else { return false }
        let period = m.frameDuration ?? timing.everyFramePeriod
        return ts + period * (Self.pipelineDepth + timing.landingOffsets.lowerBound) - exposure >= instant
    }

    /// The first step's exposure, for `requestsLandAfter`: the longest a manual bracket could
    /// start with (zero for other captures, which meter or focus first).
    func firstExposure(_ capture: ActiveCapture) -> Duration {
        if case .manualExposure(let steps)? = capture.settings.bracket { return steps.map(\.duration).max() ?? .zero }
        return .zero
    }

    /// Plans the capture at the head of the queue: a single photo, metering, or a bracket.
    private func plan(_ capture: ActiveCapture) {
        switch capture.settings.bracket {
        case nil:
            capture.phase = .single(after: lastSequenceSeen)
            capture.resolved.steps = [ResolvedStep(index: 0, requested: "the settings in force", planned: StepTarget())]
            capture.continuation.yield(.settingsResolved(capture.resolved))
            // A triggered sensor's frame for this instant may have come back before the
            // capture was asked for: it was kept, and is the photo.
            if let instant = capture.settings.exposedAfter, let r = feeder.takeRetained(exposedAfter: instant) {
                capture.phase = .single(after: nil)
                // Its slot's hold passes from the session to the photo.
                if !judge(r, for: capture) { returnSlot(r.slot) }
            }
        case .exposureBias?:
            capture.phase = .metering
        case .manualExposure?:
            begin(capture, manualSteps(capture))
        case .lensPositions(let lenses)?:
            let range = backend.controlLimits.lensPosition ?? 0...15
            let planned = lenses.enumerated().map { i, l -> (ResolvedStep, BracketScheduler.Step) in
                let v = min(max(l.value, range.lowerBound), range.upperBound)
                if v != l.value { capture.resolved.adjustments.append("step \(i + 1): lens \(l) adjusted to \(Dioptres(v))") }
                let target = StepTarget(lens: v)
                return (ResolvedStep(index: i, requested: "\(l)", planned: target), BracketScheduler.Step(controls: CameraControls(afMode: .manual, lensPosition: Dioptres(v)), target: target))
            }
            begin(capture, planned)
        }
    }

    /// A manual-exposure bracket's steps, fitted to the sensor (the adjustments recorded).
    func manualSteps(_ capture: ActiveCapture) -> [(ResolvedStep, BracketScheduler.Step)] {
        guard case .manualExposure(let steps)? = capture.settings.bracket else { return [] }
        return steps.enumerated().map { i, s -> (ResolvedStep, BracketScheduler.Step) in
            let (target, notes) = adjust(exposure: s.duration, gain: s.gain.value, what: "step \(i + 1)")
            capture.resolved.adjustments += notes
            return (ResolvedStep(index: i, requested: "\(s.duration.exposureDescription) gain \(String(format2: s.gain.value))", planned: target),
                    exposureStep(target, whiteBalance: capture.settings.whiteBalance))
        }
    }

    /// The controls the next request carries for a phase-locked capture at the head of the
    /// queue (nil: a filler), handing over to its bracket when the lock says.
    func phaseLockControls(_ capture: ActiveCapture, cookie: UInt64) -> CameraControls? {
        guard case .phaseLocking = capture.phase, let instant = capture.settings.exposedAfter else { return nil }
        // The request pairs with the frame after the newest, past those already in flight.
        let pairing = Int64(lastSequence ?? 0) + Int64(feeder.ledger.queuedCount)
        if capture.lock == nil {
            // Planned now, not when the capture was queued: the white balance is the
            // latest, as for any bracket.
            let planned = manualSteps(capture)
            if let reason = ambiguity(planned.map(\.1.target)) {
                fail(capture, ShutterbugError(.invalidArgument, reason))
                return nil
            }
            capture.lockedPlan = planned
            capture.lock = PhaseLock(instant: instant, step: planned[0].1, timing: timing, depth: Self.pipelineDepth)
        }
        switch capture.lock!.request(cookie: cookie, pairing: pairing, newest: recentMetadata.last) {
        case .filler:
            return nil
        case .preroll(let c):
            return c
        case .handOver:
            begin(capture, capture.lockedPlan, checked: true)
            return capture.scheduler?.controls(forRequest: cookie)
        }
    }

    /// Controls for an exposure step: both manual (applied at once, no AGC filter), white
    /// balance fixed (at `whiteBalance`, or at what it is now), and a frame duration that fits
    /// the exposure exactly.
    func exposureStep(_ target: StepTarget, whiteBalance: ColourGains? = nil) -> BracketScheduler.Step {
        let fd = timing.framePeriod(for: target.exposure!)
        var c = CameraControls.manualExposure(target.exposure!, gain: Gain(target.gain!))
        c.frameDurationLimits = fd...fd
        if backend.controlLimits.supported.contains(.colourGains), let g = whiteBalance ?? recentMetadata.last?.colourGains {
            c.awbEnabled = false
            c.colourGains = g
        }
        return BracketScheduler.Step(controls: c, target: target)
    }

    private func begin(_ capture: ActiveCapture, _ planned: [(ResolvedStep, BracketScheduler.Step)], checked: Bool = false) {
        if !checked, let reason = ambiguity(planned.map(\.1.target)) {
            fail(capture, ShutterbugError(.invalidArgument, reason))
            return
        }
        capture.resolved.steps = planned.map(\.0)
        capture.scheduler = BracketScheduler(steps: planned.map(\.1), restore: baselineControls, timing: timing, now: progressTime(), notBefore: capture.settings.exposedAfter,
                                             firstStepPrerolled: capture.lock != nil)
        capture.phase = .bracketing
        capture.continuation.yield(.settingsResolved(capture.resolved))
        startTicking()
    }

    /// Judges a completed frame for the capture at the head of the queue; true when the
    /// capture keeps the frame's buffers.
    func judge(_ c: CompletedRequest, for capture: ActiveCapture) -> Bool {
        switch capture.phase {
        case .done:
            return false
        case .single(let after):
            capture.lastProgress = progressTime()
            guard c.status == .complete, after.map({ c.metadata.sequence > $0 }) ?? true else { return false }
            if let instant = capture.settings.exposedAfter {
                guard c.metadata.exposed(after: instant) else { return false }
            }
            if failedLate(c, capture) { return false }
            capture.resolved.steps[0].actual = c.metadata
            capture.photos[0] = (c, capture.resolved.steps[0])
            complete(capture)
            return true
        case .waitingForInstant(let instant):
            capture.lastProgress = progressTime()
            if requestsLandAfter(instant, exposure: firstExposure(capture)) { plan(capture) }
            return false
        case .phaseLocking:
            capture.lastProgress = progressTime()
            capture.lock?.observe(cookie: c.cookie, status: c.status, metadata: c.metadata)
            return false
        case .metering:
            capture.lastProgress = progressTime()
            capture.meteredFrames += 1
            if capture.meteredFrames > ActiveCapture.meteringFrameLimit {
                let last = recentMetadata.last.map { "\($0.exposureTime?.exposureDescription ?? "-") at gain \(String(format2: $0.totalGain?.value ?? 0))" } ?? "-"
                fail(capture, ShutterbugError(.timeout, "auto exposure did not settle in \(ActiveCapture.meteringFrameLimit) frames (last: \(last)); an EV bracket needs the metered exposure to hold still for three frames"))
                return false
            }
            meter(capture)
            return false
        case .bracketing:
            return bracket(c, capture)
        }
    }

    /// Auto-exposure has settled when the last three frames' total exposures agree within 1%.
    private func meter(_ capture: ActiveCapture) {
        guard case .exposureBias(let biases)? = capture.settings.bracket else { return }
        let totals = recentMetadata.suffix(3).compactMap { m -> Double? in
            guard let e = m.exposureTime, let g = m.totalGain else { return nil }
            return e.secondsValue * g.value
        }
        guard totals.count == 3, let lo = totals.min(), let hi = totals.max(), hi <= lo * 1.01, let base = recentMetadata.last else { return }
        let total = totals.last!
        capture.resolved.meteredExposure = base.exposureTime
        capture.resolved.meteredGain = base.totalGain?.value
        // Exposure first, up to what fits the every-frame period; then gain.
        let exposureLimit = timing.everyFramePeriod - timing.margin
        // A loop, not a map: the capture is changed on the way (Swift 6.2 refuses that inside a
        // closure on the actor).
        var planned: [(ResolvedStep, BracketScheduler.Step)] = []
        for (i, ev) in biases.enumerated() {
            let t = total * pow2(ev)
            let minGain = timing.gainRange.lowerBound
            var e = min(Duration.seconds(exactly: t / minGain), max(exposureLimit, timing.exposureRange.lowerBound))
            var g = t / e.secondsValue
            if g > timing.gainRange.upperBound {
                // Out of gain: lengthen the exposure (and the frame) instead.
                g = timing.gainRange.upperBound
                e = .seconds(exactly: t / g)
            }
            let (target, notes) = adjust(exposure: e, gain: g, what: "step \(i + 1) (\(ev >= 0 ? "+" : "")\(ev) EV)")
            capture.resolved.adjustments += notes
            planned.append((ResolvedStep(index: i, requested: "\(ev >= 0 ? "+" : "")\(ev) EV", planned: target), exposureStep(target, whiteBalance: capture.settings.whiteBalance)))
        }
        begin(capture, planned)
    }

    private func bracket(_ c: CompletedRequest, _ capture: ActiveCapture) -> Bool {
        guard var s = capture.scheduler else { return false }
        capture.lock?.observe(cookie: c.cookie, status: c.status, metadata: c.metadata)
        let actions = s.complete(cookie: c.cookie, requestSequence: c.requestSequence, status: c.status, metadata: c.metadata, now: progressTime())
        capture.scheduler = s
        var keep = false
        for a in actions {
            switch a {
            case .photo(let step):
                // The first step's frame decides whether the capture is on time; a late one is
                // not kept (its slot goes back through the ledger as unheld).
                if step == 0, failedLate(c, capture) { return false }
                capture.resolved.steps[step].actual = c.metadata
                capture.photos[step] = (c, capture.resolved.steps[step])
                keep = true
                if !capture.exposureStartSent, let start = c.metadata.exposureStart {
                    capture.exposureStartSent = true
                    capture.continuation.yield(.exposureStarted(start))
                }
            case .discard(let sequence, let reason):
                capture.resolved.discarded.append(DiscardedFrame(sequence: sequence, reason: reason.description,
                                                                 metadata: sequence == c.metadata.sequence ? c.metadata : nil))
            case .retry:
                capture.resolved.retries += 1
            case .finished:
                complete(capture)
            case .failed(_, let reason):
                abandon(capture, reason: reason)
            }
        }
        return keep
    }

    /// Two steps the frames' metadata cannot tell apart would get each other's frames and
    /// still report success; unless the camera names each frame's request
    /// (`ControlListSequence`), such a bracket is refused when it is planned.
    func ambiguity(_ targets: [StepTarget]) -> String? {
        guard recentMetadata.last?.controlListSequence == nil,
              let (i, j) = StepTarget.firstAmbiguousPair(targets, lineTime: timing.lineTime) else { return nil }
        return "steps \(i + 1) (\(targets[i])) and \(j + 1) (\(targets[j])) cannot be told apart by the frames' metadata (exposure within one line, \(Int(timing.lineTime.microsecondsValue.rounded())) µs, gain within \(Int(StepTarget.gainTolerance * 100))%); make them differ by more, or give them the same value"
    }

    /// The bracket cannot complete: its held buffers go back, the next capture starts.
    private func abandon(_ capture: ActiveCapture, reason: String) {
        fail(capture, ShutterbugError(.timeout, reason))
    }

    /// Ends `capture` with `error`. The steps it already captured are handed out first, in step
    /// order (each frame proven to be its step's), so a bracket that fails part-way loses
    /// nothing it captured; the consumer sees them, then the error.
    private func fail(_ capture: ActiveCapture, _ error: ShutterbugError) {
        if case .bracketing = capture.phase, error.code != .late {
            deliverHeldPhotos(capture)
        }
        for slot in capture.heldSlots { returnSlot(slot) }
        capture.photos.removeAll()
        if let i = captures.firstIndex(where: { $0 === capture }) { captures.remove(at: i) }
        capture.finish(throwing: error)
        if !captures.isEmpty { activate() }
    }

    /// Lets the head capture see time pass (a stall produces no frames to judge): a bracket's
    /// scheduler decides for itself; metering and a single photo fail after 2 s (or ten of the
    /// current frames) without a frame.
    func tickCaptures(now t: SensorTime) {
        guard let capture = captures.first else { return }
        switch capture.phase {
        case .bracketing:
            guard var s = capture.scheduler else { return }
            let actions = s.tick(now: t)
            capture.scheduler = s
            for case .failed(_, let reason) in actions { abandon(capture, reason: reason) }
        case .metering, .single, .waitingForInstant, .phaseLocking:
            let period = recentMetadata.last?.frameDuration ?? timing.everyFramePeriod
            let limit = max(.seconds(2), period * 10)
            guard let last = capture.lastProgress, t - last > limit else { return }
            let what = if case .metering = capture.phase { "metering for the EV bracket" } else { "the photo" }
            fail(capture, ShutterbugError(.timeout, "\(what) timed out: no frame came back for \(((t - last).secondsValue * 10).rounded() / 10) s (limit \(limit.secondsValue) s); the camera stalled"))
        case .done:
            return
        }
    }

    /// Fails `capture` with `.late` when `c`, its first photo's frame, began after the latest
    /// start the settings allow. The frames held for other steps go back.
    private func failedLate(_ c: CompletedRequest, _ capture: ActiveCapture) -> Bool {
        guard let latest = capture.settings.exposedBefore, let start = c.metadata.earliestExposureStart, start > latest else { return false }
        let after = capture.settings.exposedAfter.map { " (\((start - $0).millisecondsDescription) after the instant)" } ?? ""
        fail(capture, ShutterbugError(.late, "the first exposure would begin at \(start)\(after), later than the latest start allowed, \(latest): not taken"))
        return true
    }

    /// Hands the held photos to the consumer in step order; each one's slot goes back when the
    /// consumer releases it.
    private func deliverHeldPhotos(_ capture: ActiveCapture) {
        for key in capture.photos.keys.sorted() {
            let (request, step) = capture.photos[key]!
            let slot = request.slot
            capture.continuation.yield(.photo(CapturedPhoto(step: step, metadata: request.metadata, buffers: request.buffers) { [weak self] in
                Task { await self?.returnSlot(slot) }
            }))
        }
        capture.photos.removeAll()
    }

    /// Every step is captured: exposure ended, photos in step order, finished. The next capture
    /// may begin at once, while these photos are still held.
    private func complete(_ capture: ActiveCapture) {
        // What the bracket set goes back to what was in force, even where the restore was
        // still to go out (a focus bracket plans it after its last step).
        if capture.scheduler?.hasPlannedRequests == true { restoreBaseline() }
        let ordered = capture.photos.keys.sorted().map { capture.photos[$0]! }
        if let lock = capture.lock, let instant = capture.settings.exposedAfter {
            let start = ordered.first?.0.metadata.exposureStart
            capture.resolved.phaseLock = lock.report(firstStart: start, instant: instant)
        }
        if !capture.exposureStartSent, let start = ordered.first?.0.metadata.exposureStart {
            capture.continuation.yield(.exposureStarted(start))
        }
        if let last = ordered.map(\.0.metadata).max(by: { $0.sequence < $1.sequence }), let ts = last.sensorTimestamp {
            capture.continuation.yield(.exposureEnded(ts + timing.readoutTime))
        }
        deliverHeldPhotos(capture)
        capture.phase = .done
        capture.continuation.yield(.captureFinished(capture.resolved))
        capture.continuation.finish()
        captures.removeFirst()
        if !captures.isEmpty { activate() }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@inline(__always) func pow2(_ x: Double) -> Double { pow(2.0, x) }
