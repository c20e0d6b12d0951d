import ShutterbugCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The thread a trigger source blocks on (a GPIO line, a signal pipe, a terminal), started
/// once, feeding one sequence of triggers: a second `stream` call gets an empty one.
public final class TriggerReaderThread: Sendable {
    private let started = Atomic<Bool>(false)
    private let thread = Mutex<OSThread?>(nil)

    public init() {}

    /// Starts `read` on a new thread; the sequence ends when it returns. `stop` runs when the
    /// consumer goes away (not joined there: that may be on the reading thread itself).
    public func stream(stop: @escaping @Sendable () -> Void, read: @escaping @Sendable (AsyncStream<Trigger>.Continuation) -> Void) -> AsyncStream<Trigger> {
        let (stream, out) = AsyncStream<Trigger>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        guard !started.exchange(true, ordering: .relaxed) else {
            out.finish()
            return stream
        }
        let t = OSThread(name: "sb-trigger") {
            read(out)
            out.finish()
        }
        thread.withLock { $0 = t }
        out.onTermination = { _ in stop() }
        return stream
    }

    /// Waits for the reading thread to end, if it was started.
    public func join() {
        thread.withLock { $0 }?.join()
    }

    /// Sleeps in `poll` until `fd` is readable or hung up (true: read it, a read of 0 is the
    /// end) or `wake` is written or polling fails (false): the reading thread's one wait, so
    /// it never spins and can always be stopped.
    public static func waitReadable(_ fd: Int32, orWoken wake: Int32) -> Bool {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            if poll(&fds, 2, -1) < 0 {
                if errno == EINTR { continue }
                return false
            }
            if fds[1].revents != 0 { return false }
            if fds[0].revents != 0 { return true }
        }
    }
}
