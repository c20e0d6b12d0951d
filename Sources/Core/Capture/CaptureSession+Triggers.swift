import CaptureScheduler
import ShutterbugCore

/// Triggers: the first frame exposed after an instant (`TriggerSelect` judges).
extension CaptureSession {
    /// The first frame whose exposure began at or after `instant` (`SensorTimestamp -
    /// ExposureTime >= instant`): what a trigger at that instant should capture.
    ///
    /// - Throws: `.timeout` when no such frame came within `timeout` on the camera's clock.
    public func captureFrame(exposedAfter instant: SensorTime, timeout: Duration = .seconds(5)) async throws -> CapturedPhoto {
        if let f = life.failure { throw f }
        guard life.running else { throw ShutterbugError(.invalidState, "the session is not running") }
        let id = waiters.newID()
        // The deadline counts from the instant or from now, whichever is later: a trigger
        // timestamped in the past still gets its whole timeout. A triggered sensor's frame for
        // this instant may have come back already: it was kept, and is the answer.
        if let kept = machine.addTrigger(id: id, exposedAfter: instant, deadline: max(instant, camera.now()) + timeout) {
            return photo(kept, step: ResolvedStep(index: 0, requested: "frame exposed after \(instant)", planned: StepTarget(), actual: kept.metadata))
        }
        // Waited on before anything else runs: a failure on the way resumes it.
        return try await withCheckedThrowingContinuation { c in
            waiters.triggers[id] = c
            topUp()
            startTicking()
        }
    }
}
