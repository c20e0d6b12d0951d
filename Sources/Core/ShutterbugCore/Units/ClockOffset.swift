/// How far wall time (CLOCK_REALTIME) is ahead of the camera's clock: sensor time + offset =
/// wall time, and wall time - offset = sensor time. Taken from a frame's `FrameWallClock` where
/// the camera reports one (the same instant on both clocks), else sampled from the system.
public struct ClockOffset: Sendable, Hashable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// The offset a frame shows between its two clocks, if it carries both.
    public init?(_ m: FrameMetadata) {
        guard let wall = m.wallClock, let t = m.sensorTimestamp else { return nil }
        nanoseconds = wall.nanoseconds - t.nanoseconds
    }

    public static func + (t: SensorTime, o: ClockOffset) -> WallClockTime { WallClockTime(nanoseconds: t.nanoseconds + o.nanoseconds) }
    public static func - (w: WallClockTime, o: ClockOffset) -> SensorTime { SensorTime(nanoseconds: w.nanoseconds - o.nanoseconds) }

    public var description: String { Duration.nanoseconds(nanoseconds).preciseDescription }
}
