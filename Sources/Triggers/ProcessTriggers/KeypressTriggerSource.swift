import ShutterbugCore
import ShutterbugPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Enter on a terminal (or a line on standard input) as a trigger. Read on its own thread,
/// which sleeps in poll until input or `stop()`; the instant is when the line is read. End of
/// input ends the sequence.
public final class KeypressTriggerSource: TriggerSource, @unchecked Sendable {
    // `@unchecked Sendable`: fds fixed at init; the thread is the only reader.
    public let name = "keypress"
    private let input: Int32
    private let wake: Int32
    private let reader = TriggerReaderThread()

    /// - Throws: when the wake-up pipe cannot be made.
    public init(input: Int32 = 0) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ShutterbugError.fromErrno(-errno, while: "creating the keypress trigger's pipe") }
        self.input = input
        wake = fds[1]
        readEnd = fds[0]
    }

    private let readEnd: Int32

    deinit {
        stop()
        reader.join()
        close(wake)
        close(readEnd)
    }

    public func triggers() -> AsyncStream<Trigger> {
        reader.stream(stop: { [weak self] in self?.stop() }, read: { [self] in read(into: $0) })
    }

    /// Ends the sequence. Idempotent.
    public func stop() {
        var b: UInt8 = 1
        _ = write(wake, &b, 1)
    }

    private func read(into out: AsyncStream<Trigger>.Continuation) {
        var sequence: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: 256)
        while TriggerReaderThread.waitReadable(input, orWoken: readEnd) {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(input, $0.baseAddress, $0.count) }
            guard n > 0 else { return }  // end of input
            let now = MonotonicClock.now()
            for byte in buffer.prefix(n) where byte == UInt8(ascii: "\n") {
                sequence += 1
                out.yield(Trigger(instant: now, source: name, sequence: sequence))
            }
        }
    }
}
