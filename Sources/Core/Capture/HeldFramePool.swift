import CaptureScheduler
import ShutterbugCore

/// Copies of frames held for zero shutter lag beyond what the camera's buffers can spare
/// (`BufferPlan.ringPooled`): each held under a pool id (`ExposureRing.poolBase` up) in place
/// of its slot, so the camera gets the slot back at once. The copies' memory is allocated once
/// and reused (a set goes back to the free list when its frame is pushed out or its photo is
/// released), so a long run allocates at most the pool's frames; what it holds is bounded by
/// the ring, which the memory budget check counted (`BufferPlan.check`).
struct HeldFramePool {
    private var held: [Int: [any FrameBuffer]] = [:]
    private var free: [[PooledFrameBuffer]] = []
    /// Bytes allocated for copies, held or free.
    private(set) var allocatedBytes = 0
    /// Frames copied in since the session started.
    private(set) var copies = 0

    var count: Int { held.count }

    /// Copies `frame`'s buffers in under `id` (before its slot is queued again).
    mutating func copy(_ frame: CompletedRequest, id: Int) {
        copies += 1
        let snapshots = frame.buffers.compactMap { $0 as? any SnapshotFrameBuffer }
        if snapshots.count == frame.buffers.count {
            // Buffers that copy themselves more cheaply (the simulated camera's recipes).
            held[id] = snapshots.map { $0.snapshot() }
            return
        }
        var set = free.popLast() ?? []
        if set.count != frame.buffers.count || zip(set, frame.buffers).contains(where: { $0.capacity < $1.extent }) {
            allocatedBytes -= set.reduce(0) { $0 + $1.capacity }
            set = frame.buffers.map { PooledFrameBuffer(capacity: $0.extent) }
            allocatedBytes += set.reduce(0) { $0 + $1.capacity }
        }
        for (copy, source) in zip(set, frame.buffers) { copy.fill(from: source) }
        held[id] = set
    }

    func buffers(_ id: Int) -> [any FrameBuffer]? { held[id] }

    /// The copy under `id` is no longer held; its memory is kept for the next.
    mutating func release(_ id: Int) {
        guard let set = held.removeValue(forKey: id) else { return }
        let own = set.compactMap { $0 as? PooledFrameBuffer }
        if own.count == set.count { free.append(own) }
    }
}

/// One stream's buffer of a pooled frame: process memory, the frame's layout copied with it.
final class PooledFrameBuffer: FrameBuffer, @unchecked Sendable {
    let capacity: Int
    private let memory: UnsafeMutableRawBufferPointer
    // Written by the session's actor only while no photo holds the copy (it is filled before
    // its id is handed out, and refilled only after the photo that read it was released).
    private(set) var width = 0
    private(set) var height = 0
    private(set) var pixelFormat = PixelFormat.yuv420
    private(set) var planes: [PlaneLayout] = []
    private var length = 0
    var dmabufFD: Int32? { nil }

    init(capacity: Int) {
        self.capacity = capacity
        memory = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, capacity), alignment: 64)
    }

    deinit { memory.deallocate() }

    func fill(from source: any FrameBuffer) {
        (width, height, pixelFormat, planes) = (source.width, source.height, source.pixelFormat, source.planes)
        length = min(capacity, source.extent)
        let n = length
        source.withUnsafeBytes { bytes in
            guard n > 0, let base = bytes.baseAddress else { return }
            memory.baseAddress!.copyMemory(from: base, byteCount: min(n, bytes.count))
        }
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(memory)[0..<length]))
    }
}
