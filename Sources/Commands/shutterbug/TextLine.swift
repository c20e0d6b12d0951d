import CSystemShims
import ShutterbugCore

/// A line of ASCII built in a reused byte buffer: a per-frame line costs no String, no
/// allocation and no grapheme counting (on a small board, building the line with String cost
/// more than the rest of the frame's handling; an Array's uniqueness and capacity checks on
/// every byte, and its `removeAll(keepingCapacity:)`, were most of what was left).
struct TextLine {
    /// The bytes: `count` of them at `base`, room for `capacity`. Owned by one line; a copy of
    /// a `TextLine` shares it, so a line is used by one owner at a time (`FramePrinter`, under
    /// its lock).
    private final class Buffer: @unchecked Sendable {
        var base: UnsafeMutablePointer<UInt8>
        var count = 0
        var capacity: Int
        init(capacity: Int) {
            self.capacity = max(16, capacity)
            base = .allocate(capacity: self.capacity)
        }
        deinit { base.deallocate() }

        @inline(__always) func append(_ b: UInt8) {
            if count == capacity { grow(to: count + 1) }
            base[count] = b
            count += 1
        }

        func append(_ bytes: UnsafeRawBufferPointer) {
            if count + bytes.count > capacity { grow(to: count + bytes.count) }
            if let from = bytes.baseAddress { (base + count).update(from: from.assumingMemoryBound(to: UInt8.self), count: bytes.count) }
            count += bytes.count
        }

        private func grow(to needed: Int) {
            let bigger = UnsafeMutablePointer<UInt8>.allocate(capacity: max(needed, capacity * 2))
            bigger.update(from: base, count: count)
            base.deallocate()
            base = bigger
            capacity = max(needed, capacity * 2)
        }

        /// Reverses the bytes from `start` to the end, in place.
        func reverse(from start: Int) {
            var i = start, j = count - 1
            while i < j {
                let t = base[i]
                base[i] = base[j]
                base[j] = t
                i += 1
                j -= 1
            }
        }
    }

    private let buffer: Buffer
    /// A field's buffer while it is being right-aligned, reused.
    private let field: Buffer

    init(capacity: Int = 256) {
        buffer = Buffer(capacity: capacity)
        field = Buffer(capacity: 32)
    }

    private init(buffer: Buffer) {
        self.buffer = buffer
        field = buffer
    }

    func clear() { buffer.count = 0 }

    func append(_ s: StaticString) {
        s.withUTF8Buffer { buffer.append(UnsafeRawBufferPointer($0)) }
    }

    /// Any text (the rare parts of a line: a status, a list of changes).
    @_disfavoredOverload
    func append(_ s: String) {
        var s = s
        s.withUTF8 { buffer.append(UnsafeRawBufferPointer($0)) }
    }

    /// A decimal integer.
    func append(_ v: Int) {
        if v < 0 { buffer.append(UInt8(ascii: "-")) }
        var m = v.magnitude
        let start = buffer.count
        repeat {
            buffer.append(UInt8(48 + m % 10))
            m /= 10
        } while m > 0
        buffer.reverse(from: start)
    }

    /// `v` with two decimals, as `String(format2:)` writes it.
    func appendFixed2(_ v: Double) {
        guard v.isFinite, abs(v) < 1e15 else {
            append(String(format2: v))
            return
        }
        let scaled = Int64((v * 100).rounded())
        if scaled < 0 { buffer.append(UInt8(ascii: "-")) }
        let magnitude = Int(scaled.magnitude)
        append(magnitude / 100)
        buffer.append(UInt8(ascii: "."))
        buffer.append(UInt8(48 + magnitude / 10 % 10))
        buffer.append(UInt8(48 + magnitude % 10))
    }

    /// Seconds with nine decimals, as `SensorTime.description` writes them.
    func append(_ t: SensorTime) {
        let ns = t.nanoseconds
        if ns < 0, ns > -1_000_000_000 { buffer.append(UInt8(ascii: "-")) }
        append(Int(ns / 1_000_000_000))
        buffer.append(UInt8(ascii: "."))
        var frac = (ns % 1_000_000_000).magnitude
        let start = buffer.count
        for _ in 0..<9 {
            buffer.append(UInt8(48 + frac % 10))
            frac /= 10
        }
        buffer.reverse(from: start)
    }

    /// A duration as `Duration.millisecondsDescription` writes it ("33.33 ms", "1.50 s").
    func appendMilliseconds(_ d: Duration) {
        let s = d.secondsValue
        if s < 1 {
            appendFixed2(s * 1000)
            append(" ms")
        } else {
            appendFixed2(s)
            append(" s")
        }
    }

    /// Runs `body` on a field of its own, then appends it right-aligned in `width` columns (a
    /// column per character: UTF-8 continuation bytes are not counted). The field is not
    /// right-aligned within itself.
    func rightAligned(_ width: Int, _ body: (TextLine) -> Void) {
        // A field's line uses its own buffer as its field: aligning within it would clear what
        // it is building.
        precondition(field !== buffer, "a field is not right-aligned within itself")
        let f = TextLine(buffer: field)
        f.clear()
        body(f)
        var n = 0
        for i in 0..<field.count where field.base[i] & 0xC0 != 0x80 { n += 1 }
        for _ in n..<max(n, width) { buffer.append(UInt8(ascii: " ")) }
        buffer.append(UnsafeRawBufferPointer(start: field.base, count: field.count))
    }

    /// Ends the line with a newline and writes it to standard output through C stdio, in one
    /// call (with line buffering, one write).
    func write() {
        buffer.append(UInt8(ascii: "\n"))
        _ = sbshim_stdout_write(buffer.base, buffer.count)
    }
}
