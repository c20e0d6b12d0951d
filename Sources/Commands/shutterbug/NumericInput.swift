import ArgumentParser
import ShutterbugCore

/// The one check every numeric option goes through: a finite number inside the option's range,
/// or a `ValidationError` (exit status 64) naming the option, the value and the accepted range.
/// Values inside the range that the sensor cannot do are adjusted later, and the adjustment
/// reported; this only keeps numbers that no camera could mean (inf, nan, 1e308) out.
enum NumericInput {
    /// - Parameters:
    ///   - lowerOpen: the lower bound itself is not accepted (`(0, 1000]`).
    static func check(_ value: Double, _ name: String, in range: ClosedRange<Double>, unit: String = "", lowerOpen: Bool = false) throws {
        let inside = value.isFinite && range.contains(value) && !(lowerOpen && value == range.lowerBound)
        guard inside else {
            let bounds = "\(show(range.lowerBound))...\(show(range.upperBound))\(unit.isEmpty ? "" : " " + unit)"
            throw ValidationError("\(name) must be a finite number in \(bounds)\(lowerOpen ? " (excluding \(show(range.lowerBound)))" : ""), not \(show(value))")
        }
    }

    /// An exposure time from the CLI (`1/250`, `4ms`, `0.5s`), inside `range`; `kind` names
    /// it in the message ("a time" for a debounce or a trigger pattern).
    static func exposure(_ text: Substring, _ name: String, in range: ClosedRange<Double> = 1e-6...3600, kind: String = "an exposure") throws -> Duration {
        let seconds: Double
        do {
            seconds = try ExposureParser.seconds(String(text))
        } catch let e as ShutterbugError {
            throw ValidationError("\(name): \(e.message)")
        }
        guard seconds.isFinite, range.contains(seconds) else {
            throw ValidationError("\(name) must be \(kind) from \(show(range.lowerBound * 1e6)) µs to \(show(range.upperBound)) s, not '\(text)' (\(show(seconds)) s)")
        }
        return .seconds(exactly: seconds)
    }

    /// Comma-separated items; an empty item is an error, not silently dropped.
    static func list(_ text: String, _ name: String, example: String, maxCount: Int = 32) throws -> [Substring] {
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
    static func numbers(_ text: String, _ name: String, in range: ClosedRange<Double>, unit: String = "", example: String, maxCount: Int = 32) throws -> [Double] {
        try list(text, name, example: example, maxCount: maxCount).map { item in
            guard let v = Double(item) else {
                throw ValidationError("\(name) must be numbers separated by commas, e.g. \(example); '\(item)' is not a number")
            }
            try check(v, "\(name) value", in: range, unit: unit)
            return v
        }
    }

    /// A `WIDTHxHEIGHT` size, each in 16...16384; `nil` for no text.
    static func size(_ text: String?, _ name: String, example: String) throws -> (Int, Int)? {
        guard let text else { return nil }
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), (16...16384).contains(w), (16...16384).contains(h) else {
            throw ValidationError("\(name) must be WIDTHxHEIGHT with each in 16...16384, e.g. \(example), not '\(text)'")
        }
        return (w, h)
    }

    /// A number as a person reads it: short, and never a trap for inf, nan or 1e308.
    static func show(_ v: Double) -> String {
        if v.isNaN { return "nan" }
        if v.isInfinite { return v < 0 ? "-inf" : "inf" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return "\(v)"
    }
}
