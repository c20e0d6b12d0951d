import CaptureScheduler
import ShutterbugCore

/// A captured frame lent to the consumer: its buffers stay valid until `release()` (or until the
/// photo is freed, which releases it). The session keeps the pipeline fed from its other
/// buffers meanwhile; release promptly.
public final class CapturedPhoto: Sendable {
    public let step: ResolvedStep
    public let metadata: FrameMetadata
    public let buffers: [any FrameBuffer]
    /// A copy of a frame held for zero shutter lag beyond the camera's buffers (its
    /// `buffers` are process memory, not the camera's).
    public let fromPool: Bool
    private let lease: BufferLease

    init(step: ResolvedStep, metadata: FrameMetadata, buffers: [any FrameBuffer], fromPool: Bool = false, returnSlot: @escaping @Sendable () -> Void) {
        self.step = step
        self.metadata = metadata
        self.buffers = buffers
        self.fromPool = fromPool
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
