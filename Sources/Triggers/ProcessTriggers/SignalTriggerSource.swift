import CSystemShims
import ShutterbugCore
import ShutterbugPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A signal as a trigger (`kill -USR1 PID`, what rpicam-still's `--signal` users know). The
/// handler itself reads CLOCK_MONOTONIC when the signal is delivered and passes it through a
/// pipe to a reading thread, so the instant is the delivery's, whichever thread took it. As
/// POSIX has it, a standard signal sent again before the first is delivered merges with it.
public final class SignalTriggerSource: TriggerSource, @unchecked Sendable {
    // `@unchecked Sendable`: fds fixed at init; the thread is the only reader.
    public let signal: Int32
    public let name: String
    private let readEnd: Int32
    private var wake: [Int32] = [0, 0]
    private let reader = TriggerReaderThread()

    /// - Throws: when the handler or the pipes cannot be set up.
    public init(signal: Int32 = SIGUSR1, name: String = "SIGUSR1") throws {
        self.signal = signal
        self.name = name
        guard pipe(&wake) == 0 else { throw ShutterbugError.fromErrno(-errno, while: "creating the signal trigger's pipe") }
        let fd = sbshim_signal_pipe(signal)
        guard fd >= 0 else {
            close(wake[0])
            close(wake[1])
            throw ShutterbugError.fromErrno(fd, while: "handling \(name)")
        }
        readEnd = fd
    }

    deinit {
        stop()
        reader.join()
        sbshim_signal_default(signal)
        close(readEnd)
        close(wake[0])
        close(wake[1])
    }

    public func triggers() -> AsyncStream<Trigger> {
        reader.stream(stop: { [weak self] in self?.stop() }, read: { [self] in read(into: $0) })
    }

    /// Ends the sequence (the signal stays handled until the source goes). Idempotent.
    public func stop() {
        var b: UInt8 = 1
        _ = write(wake[1], &b, 1)
    }

    private func read(into out: AsyncStream<Trigger>.Continuation) {
        var sequence: UInt64 = 0
        var stamps = [Int64](repeating: 0, count: 64)
        while TriggerReaderThread.waitReadable(readEnd, orWoken: wake[0]) {
            let n = stamps.withUnsafeMutableBytes { Glibc.read(readEnd, $0.baseAddress, $0.count) }
            guard n > 0 else {
                if n < 0, errno == EINTR { continue }
                return
            }
            for ns in stamps.prefix(n / 8) {
                sequence += 1
                out.yield(Trigger(instant: SensorTime(nanoseconds: ns), source: name, sequence: sequence))
            }
        }
    }
}
