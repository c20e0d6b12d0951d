import CaptureScheduler
import ShutterbugCore

/// The session's own bookkeeping beside the machines: its life, the camera's traits, how
/// completions reach it, and who waits on what.
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

    /// The session's life: prepared (configuration and buffers), running or stopped, failed,
    /// how completions come in, and the ticker that lets the machines see time pass while
    /// something waits.
    struct Life {
        var configuration: CameraConfiguration?
        var slots = 0
        var photos = 0
        /// Frames held for zero shutter lag as copies in the pool, at most, and its bytes.
        var poolFrames = 0
        var poolBytes = 0
        var running = false
        var failure: ShutterbugError?
        var delivery = Delivery.none
        var ticker: Task<Void, Never>?
        /// Set while the machine's actions are carried out: one applier at a time, in order.
        var applying = false
    }

    /// The camera as the session uses it: its clock (its frames' timestamps are on it), its
    /// timing for a configuration, and its constant traits, read once (not per frame through
    /// the existential).
    struct CameraTraits {
        let now: @Sendable () -> SensorTime
        let timing: @Sendable (CameraConfiguration) -> CameraTiming
        let framesOnTriggerOnly: Bool
        let pacesByDemand: Bool
    }

    /// Whoever waits on the machines, by id.
    struct Waiters {
        var warmedUp: CheckedContinuation<Void, Never>?
        var captures: [Int64: AsyncThrowingStream<CaptureEvent, any Error>.Continuation] = [:]
        var locks: [Int: CheckedContinuation<SyncPoint, any Error>] = [:]
        /// A lock's outcome that came before its waiter, kept for it.
        var lockOutcomes: [Int: Result<SyncPoint, any Error>] = [:]
        var triggers: [Int: CheckedContinuation<CapturedPhoto, any Error>] = [:]
        /// Told, as it happens, of every capture that ends (finished, failed or cancelled).
        var captureEndObservers: [Int: @Sendable (Int64) -> Void] = [:]
        private var lastID = 0

        mutating func newID() -> Int {
            lastID += 1
            return lastID
        }
    }
}
