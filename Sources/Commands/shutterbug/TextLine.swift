import CSystemShims
import ShutterbugCore

/// A line of ASCII built in a reused byte buffer: a per-frame line costs no String, no
/// allocation and no grapheme counting (on a small board, building the line with String cost
/// more than the rest of the frame's handling).
struct TextLine {
    private(set) var bytes: [UInt8] = []
    /// A field's buffer while it is being right-aligned, reused.
    private var field: [UInt8] = []

    init(capacity: Int = 256) { if capacity > 0 { bytes.reserveCapacity(capacity) } }

    mutating func clear() { bytes.removeAll(keepingCapacity: true) }

    mutating func append(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Any text (the rare parts of a line: a status, a list of changes).
    mutating func append(_ s: String) {
        bytes.append(contentsOf: s.utf8)
    }

    /// A decimal integer.
    mutating func append(_ v: Int) {
        if v < 0 { bytes.append(UInt8(ascii: "-")) }
        var m = v.magnitude
        let start = bytes.count
        repeat {
            bytes.append(UInt8(48 + m % 10))
            m /= 10
        } while m > 0
        reverse(from: start)
    }

    /// Reverses the bytes from `start` to the end, in place (a slice's `reverse()` copied).
    private mutating func reverse(from start: Int) {
        var i = start, j = bytes.count - 1
        while i < j {
            bytes.swapAt(i, j)
            i += 1
            j -= 1
        }
    }

    /// `v` with two decimals, as `String(format2:)` writes it.
    mutating func appendFixed2(_ v: Double) {
        guard v.isFinite, abs(v) < 1e15 else {
            append(String(format2: v))
            return
        }
        let scaled = Int64((v * 100).rounded())
        if scaled < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = Int(scaled.magnitude)
        append(magnitude / 100)
        bytes.append(UInt8(ascii: "."))
        bytes.append(UInt8(48 + magnitude / 10 % 10))
        bytes.append(UInt8(48 + magnitude % 10))
    }

    /// Seconds with nine decimals, as `SensorTime.description` writes them.
    mutating func append(_ t: SensorTime) {
        let ns = t.nanoseconds
        if ns < 0, ns > -1_000_000_000 { bytes.append(UInt8(ascii: "-")) }
        append(Int(ns / 1_000_000_000))
        bytes.append(UInt8(ascii: "."))
        var frac = (ns % 1_000_000_000).magnitude
        let start = bytes.count
        for _ in 0..<9 {
            bytes.append(UInt8(48 + frac % 10))
            frac /= 10
        }
        reverse(from: start)
    }

    /// A duration as `Duration.millisecondsDescription` writes it ("33.33 ms", "1.50 s").
    mutating func appendMilliseconds(_ d: Duration) {
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
    /// column per character: UTF-8 continuation bytes are not counted).
    mutating func rightAligned(_ width: Int, _ body: (inout TextLine) -> Void) {
        var field = TextLine(capacity: 0)
        swap(&field.bytes, &self.field)  // the reused buffer, not a new one
        field.clear()
        body(&field)
        var n = 0
        for b in field.bytes where b & 0xC0 != 0x80 { n += 1 }
        for _ in n..<max(n, width) { bytes.append(UInt8(ascii: " ")) }
        bytes.append(contentsOf: field.bytes)
        swap(&field.bytes, &self.field)
    }

    /// Ends the line with a newline and writes it to standard output through C stdio, in one
    /// call (with line buffering, one write).
    mutating func write() {
        bytes.append(UInt8(ascii: "\n"))
        _ = bytes.withUnsafeBufferPointer { sbshim_stdout_write($0.baseAddress, $0.count) }
    }
}
