@testable import Capture
import CaptureScheduler
import ShutterbugCore
import ShutterbugPosix
import Synchronization
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
    func copies() throws {
        var pool = HeldFramePool()
        let camera = HeapBuffer(fill: 7)
        let frame = CompletedRequest(slot: 3, cookie: 1, status: .complete, metadata: FrameMetadata(sequence: 9), buffers: [camera])
        let id = ExposureRing.poolBase
        let made = pool.copy(frame, id: id)
        try #require(made, "a buffer with no snapshot of its own is copied byte by byte").run()
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
        pool.copy(CompletedRequest(slot: 4, cookie: 2, status: .complete, metadata: FrameMetadata(sequence: 10), buffers: [HeapBuffer(fill: 1)]), id: id + 1)?.run()
        #expect(pool.allocatedBytes == allocated, "the released copy's memory is reused")
        #expect(pool.buffers(id + 1)?.first?.withUnsafeBytes { $0.first } == 1)
    }

    @Test("the bytes are copied on the copier's thread, off the session's actor: the layout is known at once, a reader of the copy waits for its bytes, each copy's done comes after its bytes, and finish waits for the copies queued")
    func copiedOffTheActor() throws {
        var pool = HeldFramePool()
        let camera = HeapBuffer(fill: 5)
        let id = ExposureRing.poolBase
        let made = pool.copy(CompletedRequest(slot: 2, cookie: 1, status: .complete, metadata: FrameMetadata(sequence: 3), buffers: [camera]), id: id)
        let copy = try #require(made)
        let buffer = try #require(pool.buffers(id)?.first)
        #expect(buffer.width == 8 && buffer.height == 4 && buffer.planes == camera.planes, "the layout before the bytes")
        // A reader (a photo of the copy, encoded on a thread of its own) asks for the bytes
        // before they are copied: it gets the frame's, not the pool's fresh (zeroed) memory.
        let asking = ConditionLock()
        let state = Mutex((asked: false, read: [UInt8]?.none))
        let reader = OSThread(name: "sb-test-read") {
            asking.withLock {
                state.withLock { $0.asked = true }
                asking.broadcast()
            }
            let bytes = buffer.withUnsafeBytes { Array($0) }
            state.withLock { $0.read = bytes }
        }
        asking.withLock { while !state.withLock({ $0.asked }) { asking.wait() } }
        let copier = PoolCopier()
        let done = Mutex<[Int]>([])
        copier.run(copy) {
            // The slot goes back only now: the bytes are in.
            let first = buffer.withUnsafeBytes { $0.first }
            done.withLock { $0.append(Int(first ?? 0)) }
        }
        reader.join()
        let want = (0..<48).map { UInt8(truncatingIfNeeded: $0 + 5) }
        #expect(state.withLock { $0.read } == want, "the reader waited for the frame's bytes")
        // Copies queued behind each other: finish returns once every one is in and done.
        // (Each its own memory: a done runs on the copier's thread, so reading a set whose next
        // fill is queued behind it would wait for ever.)
        for n in 1...3 {
            let made = pool.copy(CompletedRequest(slot: 2, cookie: UInt64(n + 1), status: .complete, metadata: FrameMetadata(sequence: UInt32(3 + n)), buffers: [HeapBuffer(fill: UInt8(10 * n))]), id: id + n)
            let c = try #require(made)
            let mine = try #require(pool.buffers(id + n)?.first)
            copier.run(c) {
                let first = mine.withUnsafeBytes { $0.first }
                done.withLock { $0.append(Int(first ?? 0)) }
            }
        }
        copier.finish()
        #expect(done.withLock { $0 } == [5, 10, 20, 30], "each copy done after its bytes, in order, all before finish returned")
        #expect(copier.pending == 0)
        // After finish a copy runs at once, on the caller's thread.
        let lateMade = pool.copy(CompletedRequest(slot: 5, cookie: 9, status: .complete, metadata: FrameMetadata(sequence: 9), buffers: [HeapBuffer(fill: 70)]), id: id + 9)
        let late = try #require(lateMade)
        copier.run(late) { done.withLock { $0.append(70) } }
        #expect(done.withLock { $0.last } == 70 && pool.buffers(id + 9)?.first?.withUnsafeBytes { $0.first } == 70)
    }
}
