import CaptureScheduler
import ShutterbugCore
import ShutterbugPosix

/// Copies of frames held for zero shutter lag beyond what the camera's buffers can spare
/// (`BufferPlan.ringPooled`): each held under a pool id (`ExposureRing.poolBase` up) in place
/// of its slot, so the camera gets the slot back once the bytes are in. The copies' memory is
/// allocated once and reused (a set goes back to the free list when its frame is pushed out or
/// its photo is released), so a long run allocates at most the pool's frames; what it holds is
/// bounded by the ring, which the memory budget check counted (`BufferPlan.check`).
///
/// The bytes are copied off the session's actor (`PoolCopy.run`, on the `PoolCopier`'s
/// thread): a 12 MP frame is some 10 ms of memcpy on a Pi 4, which on libcamera would hold the
/// camera's own thread. A copy's layout is known at once; a reader of its bytes waits for them.
struct HeldFramePool {
    private var held: [Int: [any FrameBuffer]] = [:]
    private var free: [[PooledFrameBuffer]] = []
    /// Bytes allocated for copies, held or free.
    private(set) var allocatedBytes = 0
    /// Frames copied in since the session started.
    private(set) var copies = 0

    var count: Int { held.count }

    /// Holds `frame`'s buffers under `id`. Returns the copy still to make (its bytes), which
    /// must run before the frame's slot is queued again; nil when the buffers copied
    /// themselves more cheaply at once (the simulated camera's recipes).
    mutating func copy(_ frame: CompletedRequest, id: Int) -> PoolCopy? {
        copies += 1
        let snapshots = frame.buffers.compactMap { ($0 as? any SnapshotFrameBuffer)?.snapshot() }
        if snapshots.count == frame.buffers.count {
            held[id] = snapshots
            return nil
        }
        var set = free.popLast() ?? []
        if set.count != frame.buffers.count || zip(set, frame.buffers).contains(where: { $0.capacity < $1.extent }) {
            // A set still being filled that is dropped here lives on in its copy until done.
            allocatedBytes -= set.reduce(0) { $0 + $1.capacity }
            set = frame.buffers.map { PooledFrameBuffer(capacity: $0.extent) }
            allocatedBytes += set.reduce(0) { $0 + $1.capacity }
        }
        let lengths = zip(set, frame.buffers).map { copy, source in copy.begin(from: source) }
        held[id] = set
        return PoolCopy(copies: set, sources: frame.buffers, lengths: lengths)
    }

    func buffers(_ id: Int) -> [any FrameBuffer]? { held[id] }

    /// The copy under `id` is no longer held; its memory is kept for the next (a fill still
    /// running finishes first: copies run in order, and a reader waits for every fill begun).
    mutating func release(_ id: Int) {
        guard let set = held.removeValue(forKey: id) else { return }
        let own = set.compactMap { $0 as? PooledFrameBuffer }
        if own.count == set.count { free.append(own) }
    }
}

/// The bytes of one frame's copy, to move into the pool's memory off the session's actor.
struct PoolCopy: Sendable {
    /// `sources` are the camera's buffers, whose slot stays held until `run` has returned.
    let copies: [PooledFrameBuffer]
    let sources: [any FrameBuffer]
    let lengths: [Int]

    func run() {
        for i in copies.indices { copies[i].fill(from: sources[i], length: lengths[i]) }
    }
}

/// One stream's buffer of a pooled frame: process memory, the frame's layout copied with it.
final class PooledFrameBuffer: FrameBuffer, @unchecked Sendable {
    let capacity: Int
    private let memory: UnsafeMutableRawBufferPointer
    // The layout is written by the session's actor only while no photo holds the copy (in
    // `begin`, before its id is handed out, and again only after the photo that read it was
    // released); the bytes by the copier, counted by `filling` under `state`.
    private(set) var width = 0
    private(set) var height = 0
    private(set) var pixelFormat = PixelFormat.yuv420
    private(set) var planes: [PlaneLayout] = []
    private var length = 0
    /// Fills begun and not finished; a reader waits for none.
    private var filling = 0
    private let state = ConditionLock()
    var dmabufFD: Int32? { nil }

    init(capacity: Int) {
        self.capacity = capacity
        memory = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, capacity), alignment: 64)
        memory.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit { memory.deallocate() }

    /// Takes `source`'s layout for the bytes still to come; returns how many will.
    func begin(from source: any FrameBuffer) -> Int {
        (width, height, pixelFormat, planes) = (source.width, source.height, source.pixelFormat, source.planes)
        let n = min(capacity, source.extent)
        state.withLock {
            filling += 1
            length = n
        }
        return n
    }

    /// Copies `length` bytes of `source` in (on any thread), and lets readers in.
    func fill(from source: any FrameBuffer, length n: Int) {
        source.withUnsafeBytes { bytes in
            guard n > 0, let base = bytes.baseAddress else { return }
            memory.baseAddress!.copyMemory(from: base, byteCount: min(n, bytes.count))
        }
        state.withLock {
            filling -= 1
            state.broadcast()
        }
    }

    /// The bytes once every fill begun is done (a photo read while its copy is made waits
    /// for it: some milliseconds).
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let n = state.withLock {
            while filling > 0 { state.wait() }
            return length
        }
        return try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(memory)[0..<n]))
    }
}

/// Runs pool copies one after another on a thread of its own, started with the first; each
/// copy's `done` is called once its bytes are in. `finish` waits for those queued.
final class PoolCopier: @unchecked Sendable {
    private let lock = ConditionLock()
    // Guarded by `lock`.
    private var queue: [(PoolCopy, @Sendable () -> Void)] = []
    private var running = false
    private var thread: OSThread?
    private var ended = false

    /// Queues `copy`; `done` runs on the copier's thread after it. After `finish`, the copy
    /// runs at once on the caller's thread.
    func run(_ copy: PoolCopy, done: @escaping @Sendable () -> Void) {
        let now = lock.withLock { () -> Bool in
            if ended { return true }
            queue.append((copy, done))
            if thread == nil { thread = OSThread(name: "sb-pool-copy") { [self] in loop() } }
            lock.broadcast()
            return false
        }
        if now {
            copy.run()
            done()
        }
    }

    /// Copies queued or running.
    var pending: Int { lock.withLock { queue.count + (running ? 1 : 0) } }

    private func loop() {
        while true {
            let next = lock.withLock { () -> (PoolCopy, @Sendable () -> Void)? in
                while queue.isEmpty && !ended { lock.wait() }
                guard !queue.isEmpty else { return nil }
                running = true
                return queue.removeFirst()
            }
            guard let (copy, done) = next else { return }
            copy.run()
            lock.withLock {
                running = false
                lock.broadcast()
            }
            done()
        }
    }

    /// Waits for the copies queued (the camera's buffers they read are still mapped), then
    /// ends the thread.
    func finish() {
        let t = lock.withLock { () -> OSThread? in
            ended = true
            lock.broadcast()
            return thread
        }
        t?.join()
    }
}
