/// Where one plane sits inside a frame buffer.
public struct PlaneLayout: Hashable, Sendable {
    /// Byte offset from the start of the buffer's memory.
    public var offset: Int
    /// Length in bytes.
    public var length: Int
    /// Bytes per row.
    public var stride: Int
    public init(offset: Int, length: Int, stride: Int) {
        self.offset = offset
        self.length = length
        self.stride = stride
    }
}

/// One buffer of one stream, allocated once and reused for the life of a configuration.
///
/// A completed request lends its buffers to the consumer until the request slot is queued
/// again; reading a buffer after re-queueing it reads a frame being written.
public protocol FrameBuffer: AnyObject, Sendable {
    var width: Int { get }
    var height: Int { get }
    var pixelFormat: PixelFormat { get }
    var planes: [PlaneLayout] { get }
    /// The dmabuf fd, when the memory is one (libcamera); `nil` for process memory.
    var dmabufFD: Int32? { get }
    /// Calls `body` with the buffer's bytes (all planes, from offset 0).
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
    /// Makes sure the frame is in the memory before a device reads it through `dmabufFD`
    /// (the simulated camera renders lazily); nothing to do for a real camera's buffers.
    func prepareContents()
}

extension FrameBuffer {
    public func prepareContents() {}

    /// Bytes from the buffer's start to the end of its last plane (what a copy of the frame
    /// takes).
    public var extent: Int { planes.map { $0.offset + $0.length }.max() ?? 0 }
}

/// A buffer that can hand out a copy of the frame it carries more cheaply than by copying its
/// bytes (the simulated camera's: a recipe it renders when first read). Copies of frames held
/// for zero shutter lag beyond the camera's buffers use it where a buffer offers it.
public protocol SnapshotFrameBuffer: FrameBuffer {
    /// A buffer of its own carrying this buffer's current frame, whatever this one carries next;
    /// nil when none can be had (the bytes are then copied, as any buffer's are).
    func snapshot() -> (any FrameBuffer)?
}
