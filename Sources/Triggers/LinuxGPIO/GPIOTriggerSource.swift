import CGPIO
import ShutterbugCore
import ShutterbugPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Edges on a GPIO line as triggers: each edge's kernel timestamp (CLOCK_MONOTONIC, the clock
/// of `SensorTimestamp`) is the trigger's instant, so "the first frame exposed after the edge"
/// is exact. Events are read on a dedicated thread that sleeps in `poll` until an edge or
/// `stop()`; gaps in the kernel's `line_seqno` count edges the kernel lost.
public final class GPIOTriggerSource: TriggerSource, @unchecked Sendable {
    // `@unchecked Sendable`: fixed after init; counters behind a mutex.
    public let name: String
    public let chipPath: String
    public let offset: Int
    private let request: GPIOEdgeRequest
    /// Subtracted from each edge's kernel timestamp (see `init`).
    public let debounce: Duration
    private let wake: Int32
    private let counters = Mutex((edges: 0, kernelLost: 0, stopped: false, failure: ShutterbugError?.none))
    private let reader = TriggerReaderThread()

    /// Edges read, and edges the kernel reports it lost.
    public var edgesRead: Int { counters.withLock { $0.edges } }
    public var kernelLost: Int { counters.withLock { $0.kernelLost } }
    /// Set when the line went away under the source (its chip unregistered: gpio-sim deleted,
    /// an overlay or a USB expander removed) and the sequence ended for it.
    public var failure: ShutterbugError? { counters.withLock { $0.failure } }

    /// A line by name (the device tree's "GPIO17", or a gpio-sim label), searched on every
    /// chip, or as CHIP:OFFSET (`gpiochip0:17`, `/dev/gpiochip0:17`).
    ///
    /// - Throws: `.invalidArgument` naming the chips and lines searched.
    public static func find(_ spec: String) throws -> (chip: GPIOChip, offset: Int) {
        if let colon = spec.lastIndex(of: ":"), let offset = Int(spec[spec.index(after: colon)...]) {
            var chip = String(spec[..<colon])
            if !chip.hasPrefix("/") { chip = "/dev/" + chip }
            let c = try GPIOChip(path: chip)
            guard (0..<c.lineCount).contains(offset) else {
                throw ShutterbugError(.invalidArgument, "\(chip) has lines 0...\(c.lineCount - 1), not \(offset)")
            }
            return (c, offset)
        }
        let paths = GPIOChip.allPaths()
        for path in paths {
            guard let c = try? GPIOChip(path: path), let offset = c.line(named: spec) else { continue }
            return (c, offset)
        }
        throw ShutterbugError(.invalidArgument, paths.isEmpty
            ? "no GPIO line named '\(spec)': this machine has no GPIO chip (/dev/gpiochip*)"
            : "no GPIO line named '\(spec)' on \(paths.joined(separator: ", ")); give a line name or CHIP:OFFSET, e.g. gpiochip0:17")
    }

    /// - Parameter debounce: the kernel's debounce period. The kernel debounces in software on
    ///   every Raspberry Pi (and on gpio-sim): it timestamps an edge when the debounce timer
    ///   fires, one period after the line last changed, so each edge's instant is its
    ///   timestamp less the period (never earlier than the settled edge itself; measured on
    ///   gpio-sim by the board tier).
    public init(line spec: String, edges: GPIOEdges = .falling, bias: GPIOBias? = nil, activeLow: Bool = false, debounce: Duration? = nil) throws {
        let (chip, offset) = try Self.find(spec)
        self.debounce = debounce ?? .zero
        request = try chip.requestEdges(offset: offset, edges: edges, bias: bias, activeLow: activeLow, debounce: debounce)
        let fd = sbgpio_wakeup_fd()
        guard fd >= 0 else { throw ShutterbugError.fromErrno(fd, while: "creating the GPIO trigger's eventfd") }
        wake = fd
        chipPath = chip.path
        self.offset = offset
        name = "gpio \(spec)"
    }

    deinit {
        stop()
        close(wake)
    }

    /// Ends the trigger sequence: the reading thread wakes, reads the edges the kernel already
    /// holds, and returns. Idempotent.
    public func stop() {
        counters.withLock { $0.stopped = true }
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }

    /// The edges as triggers. One sequence per source: a second call gets an empty one.
    public func triggers() -> AsyncStream<Trigger> {
        reader.stream(stop: { [weak self] in self?.stop() }, read: { [self] in read(into: $0) })
    }

    /// `stop()`, then waits for the reading thread to end.
    public func stopAndWait() {
        stop()
        reader.join()
    }

    private func fail(_ message: String, errno code: Int32? = nil) {
        let error = code.map { ShutterbugError(.system, message, errno: $0) } ?? ShutterbugError(.system, message)
        counters.withLock { if $0.failure == nil && !$0.stopped { $0.failure = error } }
    }

    /// How long the reading thread sleeps before polling again when nothing happens (ms): how
    /// soon a removed chip is noticed.
    static let rechecks: Int32 = 1000

    private func read(into out: AsyncStream<Trigger>.Continuation) {
        var fds = [pollfd(fd: request.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        var lastSeqno: UInt32?
        var sequence: UInt64 = 0
        var events = [gpio_v2_line_event](repeating: gpio_v2_line_event(), count: 16)
        let size = MemoryLayout<gpio_v2_line_event>.stride
        var stopping = false
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            // Once stopping, only what the kernel already holds is read (a zero timeout).
            // Otherwise at most a second's sleep: the kernel reports a removed chip to a new
            // poll (hung up), but does not wake one already asleep on the line (Linux 6.1's
            // linereq_poll), so a reader that never woke would outlive its chip forever.
            let n = poll(&fds, stopping ? 1 : 2, stopping ? 0 : Self.rechecks)
            if n < 0 {
                if errno == EINTR { continue }
                break
            }
            if !stopping, fds[1].revents != 0 || counters.withLock({ $0.stopped }) {
                stopping = true
                continue
            }
            let revents = fds[0].revents
            guard revents & Int16(POLLIN) != 0 else {
                // A line whose chip is gone polls as hung up (POLLHUP | POLLERR) without
                // POLLIN, forever: the end of this source, not something to poll again.
                if revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 {
                    fail("the GPIO line \(offset) of \(chipPath) went away (its chip was removed)")
                    break
                }
                if stopping { break }
                continue
            }
            let got = events.withUnsafeMutableBytes { Glibc.read(request.fd, $0.baseAddress, $0.count) }
            guard got > 0 else {
                if got < 0, errno != EAGAIN {
                    fail("cannot read edges from line \(offset) of \(chipPath)", errno: errno)
                }
                break
            }
            for e in events.prefix(got / size) {
                // line_seqno counts every edge the kernel saw on this line; a jump is edges
                // that overflowed its buffer before we read them.
                let lost = lastSeqno.map { Int(e.line_seqno &- $0) - 1 } ?? 0
                lastSeqno = e.line_seqno
                counters.withLock {
                    $0.edges += 1
                    $0.kernelLost += max(0, lost)
                }
                sequence += 1 + UInt64(max(0, lost))
                out.yield(Trigger(instant: SensorTime(nanoseconds: Int64(e.timestamp_ns)) - debounce, source: name, sequence: sequence))
            }
        }
    }
}
