@testable import Capture
import CaptureScheduler
import ShutterbugCore
import Testing

/// The pool's copies of a camera's buffers (process memory, as a libcamera buffer would be
/// copied): the bytes and the layout are the frame's, and the memory is reused.
@Suite("Held-frame pool: copies of frames the camera's buffers cannot spare")
struct HeldFramePoolTests {
    /// A camera buffer in process memory that offers no cheaper snapshot (as libcamera's).
    final class HeapBuffer: FrameBuffer, @unchecked Sendable {
        var bytes: [UInt8]
        let width = 8, height = 4
        let pixelFormat = PixelFormat.yuv420
        let planes = [PlaneLayout(offset: 0, length: 32, stride: 8), PlaneLayout(offset: 32, length: 8, stride: 4), PlaneLayout(offset: 40, length: 8, stride: 4)]
        var dmabufFD: Int32? { nil }
        init(fill: UInt8) { bytes = (0..<64).map { UInt8(truncatingIfNeeded: Int($0) &+ Int(fill)) } }
        func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try bytes.withUnsafeBytes(body) }
    }

    @Test("a copy has the frame's bytes (to the end of its last plane) and layout, survives the camera reusing its buffer, and its memory is reused for the next copy once released")
    func copies() {
        var pool = HeldFramePool()
        let camera = HeapBuffer(fill: 7)
        let frame = CompletedRequest(slot: 3, cookie: 1, status: .complete, metadata: FrameMetadata(sequence: 9), buffers: [camera])
        let id = ExposureRing.poolBase
        pool.copy(frame, id: id)
        // The camera writes the next frame into its buffer: the copy keeps this one.
        camera.bytes = [UInt8](repeating: 0, count: 64)
        let copy = try! #require(pool.buffers(id)?.first)
        #expect(copy.planes == camera.planes && copy.width == 8 && copy.height == 4 && copy.pixelFormat == .yuv420)
        let want = (0..<48).map { UInt8(truncatingIfNeeded: $0 + 7) }
        #expect(copy.withUnsafeBytes { Array($0) } == want, "the bytes up to the last plane's end")
        let allocated = pool.allocatedBytes
        #expect(allocated == 48 && pool.count == 1 && pool.copies == 1)
        pool.release(id)
        #expect(pool.count == 0 && pool.buffers(id) == nil)
        pool.copy(CompletedRequest(slot: 4, cookie: 2, status: .complete, metadata: FrameMetadata(sequence: 10), buffers: [HeapBuffer(fill: 1)]), id: id + 1)
        #expect(pool.allocatedBytes == allocated, "the released copy's memory is reused")
        #expect(pool.buffers(id + 1)?.first?.withUnsafeBytes { $0.first } == 1)
    }
}
