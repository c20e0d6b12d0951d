import CaptureScheduler
import ShutterbugCore

/// One step of a capture as requested and as planned after adjustment to what the sensor can do.
public struct ResolvedStep: Sendable, Hashable {
    public var index: Int
    /// What was asked ("+2.0 EV", "1/250 s gain 2.00").
    public var requested: String
    /// What the sensor was asked for after adjustment.
    public var planned: StepTarget
    /// What the frame reports, once captured.
    public var actual: FrameMetadata?
}

/// A frame that fell inside the capture but was not used, and why.
public struct DiscardedFrame: Sendable, Hashable {
    public var sequence: UInt32
    public var reason: String
    /// Everything the frame reported, when the frame itself was seen (not a gap).
    public var metadata: FrameMetadata?
}

/// The capture's settings as resolved: per-step plans and, at the end, the frames' own values.
/// AVFoundation's `AVCaptureResolvedPhotoSettings`.
public struct ResolvedPhotoSettings: Sendable, Hashable {
    public var uniqueID: Int64
    public var steps: [ResolvedStep]
    /// Settings changed to fit the sensor, one sentence each.
    public var adjustments: [String]
    public var discarded: [DiscardedFrame] = []
    public var retries: Int = 0
    /// For EV brackets: the metered exposure the biases apply to.
    public var meteredExposure: Duration?
    public var meteredGain: Double?
    /// Phase-locked captures: how the lock went (locked on which frame, or why not).
    public var phaseLock: String?
}

/// A captured frame lent to the consumer: its buffers stay valid until `release()` (or until the
/// photo is freed, which releases it). The session keeps the pipeline fed from its other
/// buffers meanwhile; release promptly.
public final class CapturedPhoto: Sendable {
    public let step: ResolvedStep
    public let metadata: FrameMetadata
    public let buffers: [any FrameBuffer]
    private let lease: BufferLease

    init(step: ResolvedStep, metadata: FrameMetadata, buffers: [any FrameBuffer], returnSlot: @escaping @Sendable () -> Void) {
        self.step = step
        self.metadata = metadata
        self.buffers = buffers
        lease = BufferLease(returnSlot)
    }

    /// Gives the buffers back to the camera. Further reads of `buffers` see later frames.
    /// Idempotent; also done when the photo is freed.
    public func release() { lease.release() }
}

/// The phases of one capture, in AVFoundation's order.
public enum CaptureEvent: Sendable {
    /// The plan: steps adjusted to the sensor (`willBeginCapture`).
    case settingsResolved(ResolvedPhotoSettings)
    /// Exposure of the first step's first row began (`willCapturePhoto`).
    case exposureStarted(SensorTime)
    /// The last step's frame finished exposing (`didCapturePhoto`).
    case exposureEnded(SensorTime)
    /// One step's frame (`didFinishProcessingPhoto`), in step order.
    case photo(CapturedPhoto)
    /// Everything, with each step's actual values, discarded frames and retries
    /// (`didFinishCapture`).
    case captureFinished(ResolvedPhotoSettings)
}

/// Where a new setting first took effect: the first frame carrying it.
public struct SyncPoint: Sendable, Hashable {
    public var sequence: UInt32
    public var timestamp: SensorTime?
    /// The frame paired with the request that carried the setting.
    public var requestFrame: UInt32
    public var framesAfterRequest: Int { Int(sequence) - Int(requestFrame) }
}
