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
        let ns = abs(nanoseconds % 1_000_000_000)
        var frac = String(ns)
        while frac.count < 9 { frac = "0" + frac }
        return "\(s).\(frac)"
    }
}
