#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import ShutterbugCore

/// The one check every numeric option goes through: a finite number inside the option's range,
/// or a `ValidationError` (exit status 64) naming the option, the value and the accepted range.
/// Values inside the range that the sensor cannot do are adjusted later, and the adjustment
/// reported; this only keeps numbers that no camera could mean (inf, nan, 1e308) out.
public enum NumericInput {
    /// - Parameters:
    ///   - lowerOpen: the lower bound itself is not accepted (`(0, 1000]`).
    public static func check(_ value: Double, _ name: String, in range: ClosedRange<Double>, unit: String = "", lowerOpen: Bool = false) throws {
        let inside = value.isFinite && range.contains(value) && !(lowerOpen && value == range.lowerBound)
        guard inside else {
            let bounds = "\(show(range.lowerBound))...\(show(range.upperBound))\(unit.isEmpty ? "" : " " + unit)"
            throw ValidationError("\(name) must be a finite number in \(bounds)\(lowerOpen ? " (excluding \(show(range.lowerBound)))" : ""), not \(show(value))")
        }
    }

    /// An exposure time from the CLI (`1/250`, `4ms`, `0.5s`), inside `range`; `kind` names
    /// it in the message ("a time" for a debounce or a trigger pattern).
    public static func exposure(_ text: Substring, _ name: String, in range: ClosedRange<Double> = 1e-6...3600, kind: String = "an exposure") throws -> Duration {
        let seconds: Double
        do {
            seconds = try ExposureParser.seconds(String(text))
        } catch let e as ShutterbugError {
            // A time that is not an exposure (a window, a debounce) is not explained as one.
            guard kind == "an exposure" else { throw ValidationError("\(name) must be \(kind) from \(show(range.lowerBound * 1e6)) µs to \(show(range.upperBound)) s, written with a unit (250ms, 500us, 0.5s), not '\(text)'") }
            throw ValidationError("\(name): \(e.message)")
        }
        guard seconds.isFinite, range.contains(seconds) else {
            throw ValidationError("\(name) must be \(kind) from \(show(range.lowerBound * 1e6)) µs to \(show(range.upperBound)) s, not '\(text)' (\(show(seconds)) s)")
        }
        return .seconds(exactly: seconds)
    }

    /// Comma-separated items; an empty item is an error, not silently dropped.
    public static func list(_ text: String, _ name: String, example: String, maxCount: Int = 32) throws -> [Substring] {
        let items = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters() }
        if let empty = items.firstIndex(where: { $0.isEmpty }) {
            throw ValidationError("\(name) has an empty item at position \(empty + 1) in '\(text)'; write values separated by single commas, e.g. \(example)")
        }
        guard (1...maxCount).contains(items.count) else {
            throw ValidationError("\(name) takes 1 to \(maxCount) values, not \(items.count)")
        }
        return items
    }

    /// Comma-separated numbers, each checked like `check`.
    public static func numbers(_ text: String, _ name: String, in range: ClosedRange<Double>, unit: String = "", example: String, maxCount: Int = 32) throws -> [Double] {
        try list(text, name, example: example, maxCount: maxCount).map { item in
            guard let v = Double(item) else {
                throw ValidationError("\(name) must be numbers separated by commas, e.g. \(example); '\(item)' is not a number")
            }
            try check(v, "\(name) value", in: range, unit: unit)
            return v
        }
    }

    /// A `WIDTHxHEIGHT` size, each in 16...16384; `nil` for no text.
    public static func size(_ text: String?, _ name: String, example: String) throws -> (Int, Int)? {
        guard let text else { return nil }
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), (16...16384).contains(w), (16...16384).contains(h) else {
            throw ValidationError("\(name) must be WIDTHxHEIGHT with each in 16...16384, e.g. \(example), not '\(text)'")
        }
        return (w, h)
    }

    /// A number as a person reads it: short, and never a trap for inf, nan or 1e308.
    public static func show(_ v: Double) -> String {
        if v.isNaN { return "nan" }
        if v.isInfinite { return v < 0 ? "-inf" : "inf" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return "\(v)"
    }

    /// A period: 30s, 5m, 2h, 1d, 500ms, or seconds.
    public static func period(_ text: String, _ name: String, in range: ClosedRange<Double>) throws -> Duration {
        let t = text.lowercased()
        let units: [(String, Double)] = [("ms", 1e-3), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        var seconds: Double?
        for (suffix, scale) in units where t.hasSuffix(suffix) {
            if let v = Double(t.dropLast(suffix.count)) { seconds = v * scale }
            break
        }
        if seconds == nil { seconds = Double(t) }
        guard let s = seconds, s.isFinite, range.contains(s) else {
            throw ValidationError("\(name) must be a period from \(show(range.lowerBound)) s to \(show(range.upperBound)) s, written 30s, 5m, 2h or 1d, not '\(text)'")
        }
        return .seconds(exactly: s)
    }

    /// A wall time: 2026-12-01T08:00[:SS][Z] (local time unless it ends in Z), in ns since the epoch.
    public static func wallTime(_ text: String, _ name: String) throws -> WallClockTime {
        let utc = text.hasSuffix("Z")
        let body = utc ? String(text.dropLast()) : text
        let parts = body.split(whereSeparator: { "-T:".contains($0) }).map { Int32($0) }
        guard (5...6).contains(parts.count), parts.allSatisfy({ $0 != nil }) else {
            throw ValidationError("\(name) must be a date and time like 2026-12-01T08:00 (local) or 2026-12-01T08:00:00Z (UTC), not '\(text)'")
        }
        let v = parts.map { $0! }
        var t = tm()
        t.tm_year = v[0] - 1900
        t.tm_mon = v[1] - 1
        t.tm_mday = v[2]
        t.tm_hour = v[3]
        t.tm_min = v[4]
        t.tm_sec = v.count > 5 ? v[5] : 0
        t.tm_isdst = -1
        guard (1...12).contains(v[1]), (1...31).contains(v[2]), (0...23).contains(v[3]), (0...59).contains(v[4]), (0...60).contains(t.tm_sec) else {
            throw ValidationError("\(name): '\(text)' is not a valid date and time")
        }
        let seconds = utc ? timegm(&t) : mktime(&t)
        return WallClockTime(nanoseconds: Int64(seconds) * 1_000_000_000)
    }
}

extension Substring {
    /// Without the spaces around it.
    func trimmingCharacters() -> Substring {
        var s = self
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return s
    }
}
