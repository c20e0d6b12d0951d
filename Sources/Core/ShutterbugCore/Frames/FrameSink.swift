import Synchronization

/// A consumer of completed frames beside the photo path: a preview, a monitor, a meter.
/// libcamera's `cam` has the shape (`FrameSink::processRequest` returns whether the sink keeps
/// the request; the sink signals when it gives it back).
///
/// The session offers each completed frame to each sink on its own actor, so `process` must
/// return at once and hand any work to the sink's own thread. A sink may keep a frame (its
/// buffers stay valid) and must release it, from any thread; while a sink holds as many frames
/// as it was given buffers for, it is offered no more (those frames are counted as dropped for
/// it), so a slow sink gets fewer frames and never holds up capture.
public protocol FrameSink: AnyObject, Sendable {
    /// A short name, for statistics and messages.
    var name: String { get }

    /// A completed frame. Returns true to keep it; then `frame.release()` gives it back.
    func process(_ frame: SinkFrame) -> Bool
}

/// A completed frame lent to a sink.
public final class SinkFrame: Sendable {
    public let metadata: FrameMetadata
    public let buffers: [any FrameBuffer]
    let lease: BufferLease

    public init(metadata: FrameMetadata, buffers: [any FrameBuffer], lease: BufferLease) {
        self.metadata = metadata
        self.buffers = buffers
        self.lease = lease
    }

    /// Gives the buffers back to the camera. Idempotent; also done when the frame is freed.
    public func release() { lease.release() }
}

/// A hold on a request slot's buffers that is given back exactly once: by `release()`, or when
/// the lease is freed, whichever comes first.
public final class BufferLease: Sendable {
    private let onRelease: @Sendable () -> Void
    private let released = Atomic<Bool>(false)

    public init(_ onRelease: @escaping @Sendable () -> Void) { self.onRelease = onRelease }

    deinit { release() }

    public func release() {
        if !released.exchange(true, ordering: .acquiringAndReleasing) { onRelease() }
    }

    /// Ends the lease without giving anything back: the hold was never taken (a sink that
    /// declined the frame). A later `release()` does nothing.
    public func disarm() {
        released.store(true, ordering: .releasing)
    }
}
