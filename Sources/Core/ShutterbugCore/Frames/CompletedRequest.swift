/// A request that came back from the camera, with its frame's metadata and buffers.
public struct CompletedRequest: Sendable {
    public enum Status: Sendable, Hashable {
        /// Captured.
        case complete
        /// Returned unfilled, by `stop` or because the camera went away.
        case cancelled
        /// Returned, but a buffer reported an error: its contents are not to be trusted.
        case error
        /// A start-up frame: captured while AE/AWB still converge after start (libcamera 0.5.2
        /// and the Raspberry Pi fork flag these `FrameStartup`; older versions drop them). Shown
        /// to monitors, never taken by a capture, lock or trigger.
        case startup
    }

    /// The request slot, to be queued again to reuse the request and its buffers.
    public var slot: Int
    /// The caller's cookie, given when the request was queued.
    public var cookie: UInt64
    public var status: Status
    public var metadata: FrameMetadata
    /// One buffer per configured stream, in configuration order; lent until `slot` is queued
    /// again.
    public var buffers: [any FrameBuffer]
    /// libcamera's `Request::sequence()`: the request's number among those queued since
    /// `start`, the number `FrameMetadata.controlListSequence` refers to. Not a frame number.
    public var requestSequence: UInt32?

    public init(slot: Int, cookie: UInt64, status: Status, metadata: FrameMetadata, buffers: [any FrameBuffer], requestSequence: UInt32? = nil) {
        self.slot = slot
        self.cookie = cookie
        self.status = status
        self.metadata = metadata
        self.buffers = buffers
        self.requestSequence = requestSequence
    }
}
