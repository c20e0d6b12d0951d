import CGPIO
import ShutterbugCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension GPIOChip {
    /// Requests one line as an output, inactive to begin with.
    ///
    /// - Parameter activeLow: the line is driven low when active (an LED wired to 3.3 V).
    public func requestOutput(offset: Int, consumer: String = "shutterbug", activeLow: Bool = false) throws -> GPIOOutputLine {
        guard (0..<lineCount).contains(offset) else {
            throw ShutterbugError(.invalidArgument, "\(path) has lines 0...\(lineCount - 1), not \(offset)")
        }
        var req = gpio_v2_line_request()
        req.offsets.0 = UInt32(offset)
        req.num_lines = 1
        var flags = UInt64(GPIO_V2_LINE_FLAG_OUTPUT.rawValue)
        if activeLow { flags |= UInt64(GPIO_V2_LINE_FLAG_ACTIVE_LOW.rawValue) }
        req.config.flags = flags
        // The initial value is part of the request, so the line never glitches active.
        req.config.num_attrs = 1
        req.config.attrs.0.attr.id = UInt32(GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES.rawValue)
        req.config.attrs.0.attr.values = 0
        req.config.attrs.0.mask = 1
        withUnsafeMutableBytes(of: &req.consumer) { buf in
            buf.copyBytes(from: Array(consumer.utf8.prefix(buf.count - 1)))
        }
        let rc = sbgpio_request_lines(fd, &req)
        guard rc == 0 else { throw ShutterbugError.fromErrno(rc, while: "requesting line \(offset) of \(path) as an output") }
        return GPIOOutputLine(fd: req.fd, chipPath: path, offset: offset)
    }
}

/// A GPIO line we drive: a "busy" LED, a flash or tally line. Held active while any of its
/// holders holds it (overlapping captures), inactive when released or closed.
public final class GPIOOutputLine: Sendable {
    public let chipPath: String
    public let offset: Int
    private let fd: Int32
    private let state = Mutex((holders: 0, changes: 0))

    init(fd: Int32, chipPath: String, offset: Int) {
        self.fd = fd
        self.chipPath = chipPath
        self.offset = offset
    }

    /// A line by name or CHIP:OFFSET, as `GPIOTriggerSource.find` resolves it.
    public static func request(line spec: String, activeLow: Bool = false) throws -> GPIOOutputLine {
        let (chip, offset) = try GPIOTriggerSource.find(spec)
        return try chip.requestOutput(offset: offset, activeLow: activeLow)
    }

    deinit {
        var v = gpio_v2_line_values(bits: 0, mask: 1)
        _ = sbgpio_set_values(fd, &v)
        close(fd)
    }

    /// Drives the line active (the first holder) and counts the holder.
    public func hold() throws {
        try state.withLock { s in
            if s.holders == 0 { try set(true); s.changes += 1 }
            s.holders += 1
        }
    }

    /// Releases one holder; the line goes inactive when none is left.
    public func release() throws {
        try state.withLock { s in
            guard s.holders > 0 else { return }
            s.holders -= 1
            if s.holders == 0 { try set(false); s.changes += 1 }
        }
    }

    /// Times the line changed level, for summaries.
    public var changes: Int { state.withLock { $0.changes } }

    private func set(_ active: Bool) throws {
        var v = gpio_v2_line_values(bits: active ? 1 : 0, mask: 1)
        let rc = sbgpio_set_values(fd, &v)
        guard rc == 0 else { throw ShutterbugError.fromErrno(rc, while: "driving line \(offset) of \(chipPath)") }
    }
}
