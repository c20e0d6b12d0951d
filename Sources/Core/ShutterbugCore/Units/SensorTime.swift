/// An instant on the sensor clock: CLOCK_MONOTONIC in nanoseconds, as libcamera's
/// `SensorTimestamp` and the kernel's GPIO edge timestamps report it.
public struct SensorTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the monotonic clock's epoch (boot, on Linux).
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static func < (lhs: SensorTime, rhs: SensorTime) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    public static func + (lhs: SensorTime, rhs: Duration) -> SensorTime {
        SensorTime(nanoseconds: lhs.nanoseconds + rhs.nanosecondsValue)
    }

    public static func - (lhs: SensorTime, rhs: Duration) -> SensorTime {
        SensorTime(nanoseconds: lhs.nanoseconds - rhs.nanosecondsValue)
    }

    public static func - (lhs: SensorTime, rhs: SensorTime) -> Duration {
        .nanoseconds(lhs.nanoseconds - rhs.nanoseconds)
    }

    /// Seconds with nine decimals.
    public var description: String {
        let s = nanoseconds / 1_000_000_000
        var ns = abs(nanoseconds % 1_000_000_000)
        // Nine digits, zero-padded, written right to left into a fixed buffer (no temporaries:
        // this runs once per printed frame).
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (48, 48, 48, 48, 48, 48, 48, 48, 48)
        withUnsafeMutableBytes(of: &digits) { b in
            for i in stride(from: 8, through: 0, by: -1) {
                b[i] = UInt8(48 + ns % 10)
                ns /= 10
            }
        }
        let frac = withUnsafeBytes(of: digits) { String(decoding: $0, as: UTF8.self) }
        return "\(s).\(frac)"
    }
}
