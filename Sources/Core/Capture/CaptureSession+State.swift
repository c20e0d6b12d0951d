import CaptureScheduler
import ShutterbugCore

/// The session's own bookkeeping beside the machines: how completions reach it, who waits on
/// what, and what the frames have shown.
extension CaptureSession {
    /// How completions reach the session.
    enum Delivery {
        case none
        /// A task of the session's awaits them (a camera without an event loop).
        case pump(Task<Void, Never>)
        /// The camera's loop hands each over between its jobs.
        case direct
        /// Stopped: a session runs once.
        case ended
    }

    /// Whoever waits on the machines, by id.
    struct Waiters {
        var warmedUp: CheckedContinuation<Void, Never>?
        var captures: [Int64: AsyncThrowingStream<CaptureEvent, any Error>.Continuation] = [:]
        var locks: [Int: CheckedContinuation<SyncPoint, any Error>] = [:]
        /// A lock's outcome that came before its waiter, kept for it.
        var lockOutcomes: [Int: Result<SyncPoint, any Error>] = [:]
        var triggers: [Int: CheckedContinuation<CapturedPhoto, any Error>] = [:]
        private var lastID = 0

        mutating func newID() -> Int {
            lastID += 1
            return lastID
        }
    }

    /// What the frames have shown: the counts, and the camera's time as they bring it.
    struct FramesSeen {
        var statistics = FrameStatistics()
        /// The newest non-cancelled frame's sequence, for the dropped-frame count.
        var lastCounted: UInt32?
        /// The newest frame's `SensorTimestamp`: a gap after it on the camera's clock is judged.
        var lastFrameTime: SensorTime?
        /// While a frame of a camera that paces by demand is handled, its own time on the
        /// camera's clock: what the machines count progress by. (In virtual time the camera's
        /// clock may already be far past the frame: the simulated sensor runs ahead, over a
        /// stall too.)
        var frameTime: SensorTime?

        mutating func count(_ c: CompletedRequest) {
            switch c.status {
            case .complete: statistics.frames += 1
            case .startup: statistics.startup += 1
            case .error: statistics.errors += 1
            case .cancelled: return
            }
            let s = c.metadata.sequence
            if let last = lastCounted, s > last &+ 1, s &- last < 1 << 20 { statistics.dropped += Int(s &- last &- 1) }
            lastCounted = s
        }
    }
}
