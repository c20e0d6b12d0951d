#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A sensor or digital gain as a linear factor (1.0 is unity).
///
/// ISO follows the mapping Apple and Raspberry Pi use: ISO 100 is a total gain of 1.0.
public struct Gain: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The linear factor.
    public var value: Double

    /// Creates a gain from a linear factor.
    public init(_ value: Double) { self.value = value }

    /// Unity gain.
    public static let unity = Gain(1.0)

    /// Creates the gain equivalent to an ISO speed (ISO 100 = 1.0).
    public init(iso: Double) { self.value = iso / 100.0 }

    /// The ISO speed equivalent to this gain (gain 1.0 = ISO 100).
    public var iso: Double { value * 100.0 }

    /// The gain in photographic stops (EV) relative to unity.
    public var stops: Double { log2(value) }

    public static func < (lhs: Gain, rhs: Gain) -> Bool { lhs.value < rhs.value }
    public static func * (lhs: Gain, rhs: Gain) -> Gain { Gain(lhs.value * rhs.value) }

    public var description: String { String(format2: value) + "x" }
}

extension String {
    /// Formats a number with two decimals without Foundation.
    public init(format2 value: Double) {
        guard value.isFinite, abs(value) < 1e15 else {
            self = value.isNaN ? "nan" : value.isInfinite ? (value < 0 ? "-inf" : "inf") : "\(value)"
            return
        }
        let scaled = (value * 100).rounded()
        let sign = scaled < 0 ? "-" : ""
        let magnitude = abs(Int64(scaled))
        let cents = magnitude % 100
        self = "\(sign)\(magnitude / 100).\(cents < 10 ? "0" : "")\(cents)"
    }
}

extension String {
    /// Two numbers written so that a reader sees they differ: two decimals, or more where two
    /// decimals would print the same text for both ("0.996 adjusted to 1.00", not "1.00 to 1.00").
    public static func distinct(_ a: Double, _ b: Double) -> (String, String) {
        let (x, y) = (String(format2: a), String(format2: b))
        guard x == y else { return (x, y) }
        return ("\(a)", "\(b)")
    }
}
