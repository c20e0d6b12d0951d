import CSystemShims
import ShutterbugCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A serial executor on a thread of its own that also waits on one file descriptor (a camera's
/// completion eventfd) and calls a handler when it is readable.
///
/// What it is for: the thread that hears a camera's completions also runs the actor that handles
/// them. A completion then wakes one thread after libcamera's own, as `cam`'s event loop does:
/// the handler moves the completion into the `CompletionQueue`, the waiting consumer is resumed
/// onto this same executor (no wake, no other thread), and its job runs as soon as the handler
/// returns. With a drain thread feeding the cooperative pool, every frame woke two threads.
///
/// It is both an actor's serial executor and a task executor. Both are needed: a continuation
/// resumes its task on the task's executor (the global pool unless the task prefers one), and
/// only then does the task hop to its actor, so a consumer on the loop whose task does not
/// prefer it gets every completion by way of a pool thread.
///
/// Jobs run in the order they were enqueued, one at a time; enqueueing from another thread wakes
/// the loop through an eventfd only when it is waiting. The thread ends when the executor is
/// freed (an actor using it keeps it alive while it has work).
///
/// `@unchecked Sendable`: the loop's state is under its lock; the thread reads the source it
/// polls under that lock too.
public final class EventLoopExecutor: CameraEventLoop, TaskExecutor, @unchecked Sendable {
    public typealias Handler = @Sendable () -> Void

    private let loop: Loop

    /// Starts the thread.
    ///
    /// - Parameter name: the thread's name (15 bytes), as `top -H` shows it.
    public init(name: String) {
        loop = Loop(name: name)
        let box = Unmanaged.passRetained(loop).toOpaque()
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let rc = pthread_create(&thread, &attr, { arg in
            let loop = Unmanaged<Loop>.fromOpaque(arg!).takeRetainedValue()
            loop.run()
            return nil
        }, box)
        pthread_attr_destroy(&attr)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        // The thread reads the executor reference it runs jobs on from the loop: set before any
        // job can be enqueued (no one else has `self` yet).
        loop.setExecutor(UnownedSerialExecutor(ordinary: self))
    }

    deinit { loop.shutDown() }

    public func enqueue(_ job: consuming ExecutorJob) {
        loop.enqueue(.job(UnownedJob(job)))
    }

    /// Runs `work` on the loop's thread, in order with the jobs, outside any job: like the
    /// source's handler, it may act as an actor on this executor (`assumeIsolated`).
    public func execute(_ work: @escaping @Sendable () -> Void) {
        loop.enqueue(.closure(work))
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    public func checkIsolated() {
        precondition(isCurrent, "not on \(loop.name)'s thread")
    }

    /// What the loop has done so far.
    public struct Statistics: Sendable, Hashable {
        /// Jobs and `execute` closures run.
        public var jobs = 0
        /// Jobs and closures enqueued from another thread (each may have had to wake the loop).
        public var jobsFromOtherThreads = 0
        /// Times the eventfd woke the loop from its poll for a job.
        public var wakes = 0
        /// Times the source's handler ran.
        public var sourceEvents = 0
        /// Times the thread came back from waiting (for a wake, the source, or nothing: a
        /// wait that returns at once over and over is a thread spinning).
        public var waitsEnded = 0
    }

    public var statistics: Statistics { loop.statistics }

    /// Whether the calling thread is this executor's.
    public var isCurrent: Bool { loop.isCurrent }

    /// On the loop's thread and outside any job: in the source's handler or an `execute`
    /// closure. Nothing of an actor on this executor is running, so code here may act as it
    /// (`assumeIsolated`) without interleaving with one of its calls; inside a job it would.
    public var isBetweenJobs: Bool { loop.isBetweenJobs }

    /// Waits on `fd` from now on and calls `handler` on this executor's thread, between jobs,
    /// each time it is readable (the handler must make it unreadable, as reading an eventfd
    /// does). Replaces any source set before.
    public func setSource(fd: Int32, handler: @escaping Handler) {
        loop.setSource((fd, handler))
    }

    /// Stops waiting on the source. On return the handler is not running and will not run
    /// again, so the descriptor may be closed.
    public func removeSource() {
        loop.setSource(nil)
    }

    /// The state the thread and the callers share.
    private final class Loop: @unchecked Sendable {
        let name: String
        let lock = ConditionLock()
        let wakeFD: Int32
        enum Work {
            case job(UnownedJob)
            case closure(@Sendable () -> Void)
        }
        // Under `lock`:
        private var jobs: [Work] = []
        private var source: (fd: Int32, handler: Handler)?
        /// Incremented by each `setSource`; `seen` is the newest the thread has picked up,
        /// outside its poll and the handler.
        private var generation = 0
        private var seen = 0
        private var inHandler = false
        /// Callers of `setSource` waiting for the thread to pick it up: the thread wakes them
        /// only when there are any (not a broadcast per frame).
        private var sourceWaiters = 0
        /// The thread is in (or about to enter) poll and needs the eventfd to wake.
        private var polling = false
        private var woken = false
        private var stopping = false
        private var executor: UnownedSerialExecutor?
        private var thread: pthread_t?
        private var stats = Statistics()
        /// Read and written by the loop's thread only.
        private var runningJob = false

        var statistics: Statistics { lock.withLock { stats } }

        init(name: String) {
            self.name = name
            let fd = sbshim_eventfd()
            precondition(fd >= 0, "eventfd failed: \(errno)")
            wakeFD = fd
            jobs.reserveCapacity(16)
        }

        deinit { close(wakeFD) }

        /// The loop's thread (`pthread_self()`), 0 until it runs: read per frame without the lock.
        private let threadID = Atomic<UInt>(0)

        var isCurrent: Bool {
            let id = threadID.load(ordering: .acquiring)
            return id != 0 && pthread_equal(id, pthread_self()) != 0
        }

        func setExecutor(_ e: UnownedSerialExecutor) {
            lock.withLock { executor = e }
        }

        var isBetweenJobs: Bool { isCurrent && !runningJob }

        /// Whether the caller is the loop's thread; `lock` held.
        private var onLoopThread: Bool { thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }

        func enqueue(_ job: Work) {
            lock.lock()
            jobs.append(job)
            if !onLoopThread { stats.jobsFromOtherThreads += 1 }
            let wake = polling && !woken
            if wake { woken = true }
            lock.unlock()
            if wake { signal() }
        }

        func setSource(_ s: (fd: Int32, handler: Handler)?) {
            lock.lock()
            source = s
            generation += 1
            let g = generation
            let onThread = onLoopThread
            // On the thread itself the handler is not running (or is the caller) and the poll
            // set is read again before the next poll.
            if !onThread {
                if polling && !woken {
                    woken = true
                    signal()
                }
                sourceWaiters += 1
                while inHandler || seen < g { lock.wait() }
                sourceWaiters -= 1
            }
            lock.unlock()
        }

        func shutDown() {
            lock.lock()
            stopping = true
            let wake = polling && !woken
            if wake { woken = true }
            lock.unlock()
            if wake { signal() }
        }

        private func signal() {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }

        func run() {
            _ = name.withCString { sbshim_thread_name($0) }
            var batch: [Work] = []
            batch.reserveCapacity(16)
            var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0), pollfd(fd: -1, events: Int16(POLLIN), revents: 0)]
            lock.lock()
            thread = pthread_self()
            threadID.store(pthread_self(), ordering: .releasing)
            while true {
                seen = generation
                if sourceWaiters > 0 { lock.broadcast() }
                if !jobs.isEmpty {
                    swap(&batch, &jobs)
                    stats.jobs += batch.count
                    let executor = self.executor!
                    lock.unlock()
                    for work in batch {
                        switch work {
                        case .job(let job):
                            runningJob = true
                            job.runSynchronously(on: executor)
                            runningJob = false
                        case .closure(let f):
                            f()
                        }
                    }
                    batch.removeAll(keepingCapacity: true)
                    lock.lock()
                    continue
                }
                if stopping { break }
                // Nothing to run: wait for a job or the source.
                polling = true
                let polled = source
                let polledGeneration = generation
                fds[1].fd = polled?.fd ?? -1
                fds[1].revents = 0
                lock.unlock()
                fds[0].revents = 0
                let n = poll(&fds, 2, -1)
                lock.lock()
                polling = false
                stats.waitsEnded += 1
                // Drained whenever it is readable, not only when this wait was woken: a caller
                // sets `woken` and signals after it lets go of the lock, so the thread may have
                // woken for the source in between and drained nothing; the signal then lands
                // afterwards, and an eventfd left readable would return every later poll at
                // once (a thread spinning at 100% until the next wake from another thread).
                if woken || fds[0].revents != 0 {
                    var count: UInt64 = 0
                    _ = read(wakeFD, &count, 8)
                    if woken { stats.wakes += 1 }
                    woken = false
                }
                guard n > 0, fds[1].revents != 0, let handler = polled?.handler, generation == polledGeneration else { continue }
                if fds[1].revents & Int16(POLLNVAL) != 0 {
                    // Closed under us (a caller's bug): stop polling it rather than spin.
                    source = nil
                    generation += 1
                    continue
                }
                // The source is still the one polled: call it outside the lock (it may resume
                // continuations, which enqueue here).
                inHandler = true
                stats.sourceEvents += 1
                lock.unlock()
                handler()
                lock.lock()
                inHandler = false
            }
            thread = nil
            threadID.store(0, ordering: .releasing)  // a later thread may be given the same id
            lock.unlock()
        }
    }
}
