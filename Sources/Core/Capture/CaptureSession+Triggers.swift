import CaptureScheduler
import ShutterbugCore

/// Triggers: the first frame exposed after an instant (`TriggerSelect` judges).
extension CaptureSession {
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
        // A triggered sensor's frame for this instant may have come back already: it was kept.
        if let r = feeder.takeRetained(exposedAfter: instant) {
            let slot = r.slot
            return CapturedPhoto(step: ResolvedStep(index: 0, requested: "frame exposed after \(instant)", planned: StepTarget(), actual: r.metadata),
                                 metadata: r.metadata, buffers: r.buffers) { [weak self] in Task { await self?.returnSlot(slot) } }
        }
        triggers.add(id: id, exposedAfter: instant, deadline: start + timeout)
        topUp()
        startTicking()
        return try await withCheckedThrowingContinuation { c in
            triggerWaiters[id] = c
        }
    }
}
