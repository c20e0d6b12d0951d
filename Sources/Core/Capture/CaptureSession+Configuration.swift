import CaptureScheduler
import ShutterbugCore

/// The configuration scope: exposure, white-balance and focus locks in one request, each
/// reporting the first frame that carries it (`Locks` judges; the session waits).
extension CaptureSession {
    /// Settings changed together in one request, like AVFoundation's
    /// `lockForConfiguration()`…`unlockForConfiguration()` (`CameraSettingsChange`).
    public typealias Configuration = CameraSettingsChange

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
        let plan = try config.plan(camera: backend.info.id, limits: backend.controlLimits, timing: timing, baseline: machine.baseline)
        let (controls, kinds) = (plan.controls, plan.locks)
        var result = ConfigurationResult()
        result.adjustments = plan.adjustments
        guard life.running else { throw life.failure ?? ShutterbugError(.invalidState, "the session is not running") }
        // What stays in force outside captures changes only once every setting was accepted.
        machine.baseline = plan.baseline
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
            locks.add(id: id, kind: kind, now: camera.now(), timeLimit: limit)
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
            if let f = life.failure { return c.resume(throwing: f) }
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
