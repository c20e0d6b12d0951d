/// A lens focus position in dioptres (1/metres): 0 is infinity, 2 is 50 cm.
///
/// The corresponding libcamera control is `LensPosition`.
public struct Dioptres: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Dioptres (1/metres).
    public var value: Double

    public init(_ value: Double) { self.value = value }

    /// Focus at infinity.
    public static let infinity = Dioptres(0)

    /// The focus distance in metres (`nil` at infinity).
    public var distance: Double? { value > 0 ? 1.0 / value : nil }

    /// Creates the position focused at a distance in metres.
    public init(focusedAt metres: Double) { self.value = metres > 0 ? 1.0 / metres : 0 }

    /// The position for AVFoundation's normalised lens position (0...1), mapped linearly onto
    /// `range`: 0 is the near end (largest dioptres), 1 is infinity, as AVFoundation's
    /// `lensPosition` runs from nearest to furthest.
    public init(normalised: Double, in range: ClosedRange<Double>) {
        let n = min(max(normalised, 0), 1)
        self.value = range.upperBound - n * (range.upperBound - range.lowerBound)
    }

    public static func < (lhs: Dioptres, rhs: Dioptres) -> Bool { lhs.value < rhs.value }

    public var description: String { String(format2: value) + " dpt" }
}
