import CSystemShims
import ShutterbugCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutex with a condition variable whose timed waits run on the monotonic clock, for the
/// threads that own blocking work (the simulated sensor, the event loop executor).
///
/// `@unchecked Sendable`: the pthread objects are the synchronisation; they live at stable heap
/// addresses for the object's life.
public final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        #if os(Linux)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
        #else
        pthread_cond_init(cond, nil)
        #endif
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    public func withLock<R>(_ body: () throws -> R) rethrows -> R {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Waits for a signal; the lock must be held.
    public func wait() { pthread_cond_wait(cond, mutex) }

    /// Waits for a signal or until `deadline` on the monotonic clock; the lock must be held.
    /// Returns false when the deadline passed.
    @discardableResult
    public func wait(until deadline: SensorTime) -> Bool {
        #if os(Linux)
        var ts = timespec(tv_sec: Int(deadline.nanoseconds / 1_000_000_000), tv_nsec: Int(deadline.nanoseconds % 1_000_000_000))
        return pthread_cond_timedwait(cond, mutex, &ts) != ETIMEDOUT
        #else
        let remaining = deadline - MonotonicClock.now()
        if remaining <= .zero { return false }
        let ns = remaining.nanosecondsValue
        var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
        return pthread_cond_timedwait_relative_np(cond, mutex, &ts) != ETIMEDOUT
        #endif
    }

    public func broadcast() { pthread_cond_broadcast(cond) }
}

/// A joinable OS thread for work that blocks (a sensor's frame loop, a poll on an eventfd),
/// which must not run on Swift's cooperative pool.
public final class OSThread: @unchecked Sendable {
    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    #if os(Linux)
    private var thread = pthread_t()
    #else
    private var thread: pthread_t?
    #endif
    /// Not joined, being joined (by the first caller), joined: guarded by `joinLock`.
    private enum JoinState { case running, joining, joined }
    private var joinState = JoinState.running
    private let joinLock = ConditionLock()

    /// Starts `body` on a new thread, named `name` (at most 15 bytes show in `top -H`; without
    /// a name it takes its creator's, which would blame a Swift pool thread for its work).
    public init(name: String? = nil, _ body: @escaping @Sendable () -> Void) {
        let run: @Sendable () -> Void
        if let name {
            run = {
                _ = name.withCString { sbshim_thread_name($0) }
                body()
            }
        } else {
            run = body
        }
        let box = Unmanaged.passRetained(Box(run)).toOpaque()
        let rc = pthread_create(&thread, nil, { arg in
            let box = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    /// Waits for the thread to finish. Idempotent, and safe from several threads at once: the
    /// first caller joins, the others wait for it. (Two `pthread_join`s of one thread are
    /// undefined; with glibc the second waited forever: a service stopping its session and
    /// releasing its camera at the same moment hung in the simulated camera's `stop`.)
    public func join() {
        let mine = joinLock.withLock { () -> Bool in
            switch joinState {
            case .running:
                joinState = .joining
                return true
            case .joining, .joined:
                while joinState != .joined { joinLock.wait() }
                return false
            }
        }
        guard mine else { return }
        #if os(Linux)
        pthread_join(thread, nil)
        #else
        if let thread { pthread_join(thread, nil) }
        #endif
        joinLock.withLock {
            joinState = .joined
            joinLock.broadcast()
        }
    }
}
