import ShutterbugCore
import ShutterbugPosix

#if canImport(Glibc)
import Glibc
#endif

/// A bounded pool of worker threads for encoding and writing, off the capture path.
///
/// Memory is the bound: a capture reserves the bytes of its frame copies before it starts
/// (`reserve`), which suspends while the pool is full — that wait is the back-pressure the
/// capture loop sees and reports. Jobs run on `workers` OS threads (encoding blocks in C and
/// on disk I/O, so it stays off Swift's cooperative pool); each job's bytes are released when
/// it finishes.
public final class ProcessingPool: @unchecked Sendable {
    public let workers: Int
    /// The most bytes of queued and running work.
    public let memoryLimit: Int
    private let core: Core
    private let threadsLock = ConditionLock()
    private var threads: [OSThread] = []

    /// - Parameters:
    ///   - workers: threads; default all online cores.
    ///   - memoryLimit: bytes of frame copies queued or in work at once.
    public init(workers: Int? = nil, memoryLimit: Int = 512 << 20) {
        let n = workers ?? max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        self.workers = max(1, n)
        self.memoryLimit = max(1, memoryLimit)
        let core = Core(memoryLimit: self.memoryLimit)
        self.core = core
        // The threads hold the queue, not the pool: a pool dropped at once (a writer made and
        // thrown away) shuts them down, even those not started yet.
        for index in 0..<self.workers {
            threads.append(OSThread(name: "sb-writer") { core.run(worker: index) })
        }
    }

    deinit { shutdown() }

    /// Captures waiting for room (back-pressure in progress).
    public var waitingReservations: Int { core.waitingReservations }

    /// Bytes reserved now, the most ever reserved, and jobs waiting or running.
    public var load: (reserved: Int, peak: Int, pending: Int) { core.load }

    /// Reserves `bytes` for work to come, waiting while the pool is full.
    ///
    /// A request larger than the whole limit is admitted alone (when nothing else is reserved),
    /// so an oversized capture is slow, never stuck.
    ///
    /// - Returns: how long it waited (zero when there was room).
    public func reserve(_ bytes: Int) async -> Duration { await core.reserve(bytes) }

    /// Gives back reserved bytes no job will use (a capture that failed early).
    public func unreserve(_ bytes: Int) { core.unreserve(bytes) }

    /// Queues `job`, which owns `bytes` of the reservation and gives them back when it returns.
    /// The job gets the worker's index (for per-worker scratch memory).
    public func submit(bytes: Int, _ job: @escaping @Sendable (Int) -> Void) { core.submit(bytes: bytes, job) }

    /// Runs the queued jobs, then stops the threads. Idempotent.
    public func shutdown() {
        core.close()
        let toJoin: [OSThread] = threadsLock.withLock {
            let t = threads
            threads = []
            return t
        }
        for t in toJoin { t.join() }
    }
}

/// The pool's queue and reservations, shared with its threads.
private final class Core: @unchecked Sendable {
    let memoryLimit: Int

    private let lock = ConditionLock()
    private var queue: [(bytes: Int, job: @Sendable (Int) -> Void)] = []
    private var reserved = 0
    private var waiters: [(bytes: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var closed = false
    private var busy = 0
    private var peak = 0

    init(memoryLimit: Int) { self.memoryLimit = memoryLimit }

    var waitingReservations: Int { lock.withLock { waiters.count } }

    var load: (reserved: Int, peak: Int, pending: Int) {
        lock.withLock { (reserved, peak, queue.count + busy) }
    }

    /// Reserves `bytes` for work to come, waiting while the pool is full.
    ///
    /// A request larger than the whole limit is admitted alone (when nothing else is reserved),
    /// so an oversized capture is slow, never stuck.
    ///
    /// - Returns: how long it waited (zero when there was room).
    func reserve(_ bytes: Int) async -> Duration {
        let start = MonotonicClock.now()
        let admitted: Bool = lock.withLock {
            if fits(bytes) {
                take(bytes)
                return true
            }
            return false
        }
        if admitted { return .zero }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            lock.withLock {
                if waiters.isEmpty && fits(bytes) {
                    take(bytes)
                    c.resume()
                } else {
                    waiters.append((bytes, c))
                }
            }
        }
        return MonotonicClock.now() - start
    }

    /// Gives back reserved bytes no job will use (a capture that failed early).
    func unreserve(_ bytes: Int) {
        lock.withLock { release(bytes) }
    }

    /// Queues `job`, which owns `bytes` of the reservation and gives them back when it returns.
    /// The job gets the worker's index (for per-worker scratch memory).
    func submit(bytes: Int, _ job: @escaping @Sendable (Int) -> Void) {
        lock.withLock {
            queue.append((bytes, job))
            lock.broadcast()
        }
    }

    /// No more jobs: the threads finish the queue and return.
    func close() {
        lock.withLock {
            closed = true
            lock.broadcast()
        }
    }

    private func fits(_ bytes: Int) -> Bool { reserved + bytes <= memoryLimit || reserved == 0 }

    private func take(_ bytes: Int) {
        reserved += bytes
        peak = max(peak, reserved)
    }

    /// Under the lock: frees bytes and admits waiters in order while they fit.
    private func release(_ bytes: Int) {
        reserved -= bytes
        while let first = waiters.first, fits(first.bytes) {
            waiters.removeFirst()
            take(first.bytes)
            first.continuation.resume()
        }
    }

    func run(worker: Int) {
        while true {
            let next: (bytes: Int, job: @Sendable (Int) -> Void)? = lock.withLock {
                while queue.isEmpty && !closed { lock.wait() }
                if queue.isEmpty { return nil }
                busy += 1
                return queue.removeFirst()
            }
            guard let next else { return }
            next.job(worker)
            lock.withLock {
                busy -= 1
                release(next.bytes)
            }
        }
    }
}
