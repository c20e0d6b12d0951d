import CaptureScheduler
import ShutterbugCore

/// The configuration scope: exposure, white-balance and focus locks in one request, each
/// reporting the first frame that carries it (`Locks` judges; the session waits).
extension CaptureSession {
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
        /// Back to auto white balance after `lockedWhiteBalance`, exposure and focus left as
        /// they are. It eases from the locked gains, so it reports no sync point.
        public var autoWhiteBalance = false
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
    /// - Parameter waiting: false to send the settings and return at once, without sync points
    ///   (a caller that needs them in force only some frames later, as a timelapse slot's
    ///   white balance, and cannot spend the frames a wait takes).
    /// - Throws: `.unsupported` for a control the camera lacks (a lens on a fixed-focus
    ///   module); `.timeout` when a setting never shows in the frames.
    public func configure(waiting: Bool = true, _ body: (inout Configuration) -> Void) async throws -> ConfigurationResult {
        var config = Configuration()
        body(&config)
        // What stays in force outside captures, changed as the settings are (committed only
        // once every setting is accepted).
        var baseline = machine.baseline
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
            let (target, notes) = machine.adjust(exposure: e.duration, gain: e.gain.value, what: "custom exposure")
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
        if config.autoWhiteBalance, config.lockedWhiteBalance == nil {
            controls.awbEnabled = true
            baseline.awbEnabled = true
            baseline.colourGains = nil
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
        machine.baseline = baseline
        if kinds.isEmpty || !waiting {
            feeder.enqueue(controls)
            topUp()
            return result
        }
        // One request carries all of them; each fails on its own if its setting never shows
        // (60 frames) or no frame comes for 2 s or ten of the locked exposure's frames.
        let period = controls.exposureTime.map { timing.framePeriod(for: $0) } ?? timing.everyFramePeriod
        let limit = max(.seconds(2), period * 10)
        var ids: [Int] = []
        for kind in kinds {
            let id = waiters.newID()
            ids.append(id)
            locks.add(id: id, kind: kind, now: now(), timeLimit: limit)
        }
        feeder.enqueue(controls, locks: ids)
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

    func waitForLock(_ id: Int) async throws -> SyncPoint {
        try await withCheckedThrowingContinuation { c in
            if let outcome = waiters.lockOutcomes.removeValue(forKey: id) { return c.resume(with: outcome) }
            if let f = failure { return c.resume(throwing: f) }
            waiters.locks[id] = c
        }
    }

    /// Settles a lock: resumes its waiter, or keeps the outcome until the waiter arrives.
    func settle(lock id: Int, _ outcome: Result<SyncPoint, any Error>) {
        if let c = waiters.locks.removeValue(forKey: id) {
            c.resume(with: outcome)
        } else {
            waiters.lockOutcomes[id] = outcome
        }
    }

    func perform(_ outcomes: [Locks.Outcome]) {
        for o in outcomes {
            switch o {
            case .settled(let p):
                settle(lock: p.id, .success(SyncPoint(sequence: p.sequence, timestamp: p.timestamp, requestFrame: p.requestFrame)))
            case .failed(let id, let reason):
                settle(lock: id, .failure(ShutterbugError(.timeout, reason)))
            }
        }
    }
}
