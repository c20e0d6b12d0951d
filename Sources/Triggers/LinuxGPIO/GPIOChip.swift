import CGPIO
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// A GPIO chip through the Linux character device (`/dev/gpiochipN`, uAPI v2).
public final class GPIOChip: @unchecked Sendable {
    // `@unchecked Sendable`: the fd is immutable after open; the kernel serialises ioctls.
    public let path: String
    public let name: String
    public let label: String
    public let lineCount: Int
    let fd: Int32

    /// Opens a chip by path.
    ///
    /// - Throws: `ShutterbugError` naming the path and the errno.
    public init(path: String) throws {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw ShutterbugError.fromErrno(-errno, while: "opening GPIO chip \(path)") }
        var info = gpiochip_info()
        let rc = sbgpio_chip_info(fd, &info)
        guard rc == 0 else {
            close(fd)
            throw ShutterbugError.fromErrno(rc, while: "reading GPIO chip info of \(path)")
        }
        self.fd = fd
        self.path = path
        name = cString(info.name)
        label = cString(info.label)
        lineCount = Int(info.lines)
    }

    deinit { close(fd) }

    /// Every chip under /dev, by path.
    public static func allPaths() -> [String] {
        guard let d = opendir("/dev") else { return [] }
        defer { closedir(d) }
        var out: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix("gpiochip") { out.append("/dev/" + name) }
        }
        return out.sorted()
    }

    /// The line offset with this name, if any.
    public func line(named wanted: String) -> Int? {
        for offset in 0..<lineCount {
            var info = gpio_v2_line_info()
            info.offset = UInt32(offset)
            if sbgpio_line_info(fd, &info) == 0, cString(info.name) == wanted { return offset }
        }
        return nil
    }

    /// Requests one line as an input with edge detection; events carry kernel timestamps on
    /// CLOCK_MONOTONIC, the clock of `SensorTimestamp`.
    ///
    /// - Parameters:
    ///   - bias: the line's pull, where the chip supports it (`nil`: as it is).
    ///   - activeLow: report the line inverted (a button to ground reads as a rising press).
    ///   - debounce: the kernel's debounce period (`GPIO_V2_LINE_ATTR_ID_DEBOUNCE`).
    public func requestEdges(offset: Int, consumer: String = "shutterbug", edges: GPIOEdges = .both, bias: GPIOBias? = nil, activeLow: Bool = false,
                             debounce: Duration? = nil) throws -> GPIOEdgeRequest {
        guard (0..<lineCount).contains(offset) else {
            throw ShutterbugError(.invalidArgument, "\(path) has lines 0...\(lineCount - 1), not \(offset)")
        }
        var req = gpio_v2_line_request()
        req.offsets.0 = UInt32(offset)
        req.num_lines = 1
        req.event_buffer_size = 64
        var flags = UInt64(GPIO_V2_LINE_FLAG_INPUT.rawValue)
        if edges.contains(.rising) { flags |= UInt64(GPIO_V2_LINE_FLAG_EDGE_RISING.rawValue) }
        if edges.contains(.falling) { flags |= UInt64(GPIO_V2_LINE_FLAG_EDGE_FALLING.rawValue) }
        switch bias {
        case .pullUp?: flags |= UInt64(GPIO_V2_LINE_FLAG_BIAS_PULL_UP.rawValue)
        case .pullDown?: flags |= UInt64(GPIO_V2_LINE_FLAG_BIAS_PULL_DOWN.rawValue)
        case .disabled?: flags |= UInt64(GPIO_V2_LINE_FLAG_BIAS_DISABLED.rawValue)
        case nil: break
        }
        if activeLow { flags |= UInt64(GPIO_V2_LINE_FLAG_ACTIVE_LOW.rawValue) }
        req.config.flags = flags
        if let debounce {
            req.config.num_attrs = 1
            req.config.attrs.0.attr.id = UInt32(GPIO_V2_LINE_ATTR_ID_DEBOUNCE.rawValue)
            req.config.attrs.0.attr.debounce_period_us = UInt32(debounce.microsecondsValue)
            req.config.attrs.0.mask = 1
        }
        withUnsafeMutableBytes(of: &req.consumer) { buf in
            let bytes = Array(consumer.utf8.prefix(buf.count - 1))
            buf.copyBytes(from: bytes)
        }
        let rc = sbgpio_request_lines(fd, &req)
        guard rc == 0 else { throw ShutterbugError.fromErrno(rc, while: "requesting line \(offset) of \(path)") }
        return GPIOEdgeRequest(fd: req.fd, offset: offset)
    }
}

/// A line's pull resistor.
public enum GPIOBias: String, Sendable, CaseIterable {
    case pullUp = "pull-up"
    case pullDown = "pull-down"
    case disabled
}

/// Which edges to report.
public struct GPIOEdges: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let rising = GPIOEdges(rawValue: 1)
    public static let falling = GPIOEdges(rawValue: 2)
    public static let both: GPIOEdges = [.rising, .falling]
}

/// One edge, timestamped by the kernel.
public struct GPIOEdgeEvent: Sendable, Hashable {
    public enum Kind: Sendable, Hashable { case rising, falling }
    public var kind: Kind
    public var timestamp: SensorTime
    public var offset: Int
    /// The kernel's per-line sequence number; gaps mean events were lost.
    public var lineSequence: UInt32
}

/// A requested line delivering edge events.
public final class GPIOEdgeRequest: @unchecked Sendable {
    // `@unchecked Sendable`: one reader at a time; the fd is immutable.
    public let fd: Int32
    public let offset: Int

    init(fd: Int32, offset: Int) {
        self.fd = fd
        self.offset = offset
    }

    deinit { close(fd) }

    /// The line's current value.
    public func value() throws -> Bool {
        var v = gpio_v2_line_values()
        v.mask = 1
        let rc = sbgpio_get_values(fd, &v)
        guard rc == 0 else { throw ShutterbugError.fromErrno(rc, while: "reading line \(offset)") }
        return v.bits & 1 == 1
    }

    /// Waits up to `timeout` for the next edge; `nil` when none came.
    public func nextEdge(timeout: Duration) throws -> GPIOEdgeEvent? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(max(0, timeout.nanosecondsValue / 1_000_000))
        let n = poll(&p, 1, ms)
        if n < 0 { throw ShutterbugError.fromErrno(-errno, while: "waiting for an edge on line \(offset)") }
        if n == 0 { return nil }
        var e = gpio_v2_line_event()
        let got = read(fd, &e, MemoryLayout<gpio_v2_line_event>.size)
        guard got == MemoryLayout<gpio_v2_line_event>.size else {
            throw ShutterbugError.fromErrno(-errno, while: "reading an edge on line \(offset)")
        }
        let kind: GPIOEdgeEvent.Kind = e.id == UInt32(GPIO_V2_LINE_EVENT_RISING_EDGE.rawValue) ? .rising : .falling
        return GPIOEdgeEvent(kind: kind, timestamp: SensorTime(nanoseconds: Int64(e.timestamp_ns)), offset: Int(e.offset), lineSequence: e.line_seqno)
    }
}

private func cString<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
}
