import ShutterbugCore

/// What a session has seen since it started, for metrics.
public struct FrameStatistics: Sendable, Hashable {
    /// Frames completed and usable.
    public var frames = 0
    /// Start-up frames (AE/AWB converging after start).
    public var startup = 0
    /// Frames returned with an error.
    public var errors = 0
    /// Frames the sensor made that never came back: gaps in the sequence numbers.
    public var dropped = 0
    public init() {}
}

/// What the frames have shown a session: the counts, and the camera's time as they bring it.
/// Pure: frames in, the counts and the time to judge out.
public struct FrameTally: Sendable {
    public private(set) var statistics = FrameStatistics()
    /// The newest non-cancelled frame's sequence, for the dropped-frame count.
    var lastCounted: UInt32?
    /// The newest frame's `SensorTimestamp`: a gap after it on the camera's clock is judged.
    var lastFrameTime: SensorTime?
    /// While a frame of a camera that paces by demand is handled, its own time on the camera's
    /// clock: what the machines count progress by. (In virtual time the camera's clock may
    /// already be far past the frame: the simulated sensor runs ahead, over a stall too.)
    public private(set) var frameTime: SensorTime?

    /// Shorter gaps between frames than this are not judged as they come (every wait's limit
    /// is longer): one comparison per frame.
    public static let gapWorthJudging = Duration.seconds(1)

    public init() {}

    /// Counts `c` (a cancelled request is no frame) and the frames dropped before it, since the
    /// sensor started streaming.
    public mutating func count(_ c: CompletedRequest) {
        switch c.status {
        case .complete: statistics.frames += 1
        case .startup: statistics.startup += 1
        case .error: statistics.errors += 1
        case .cancelled: return
        }
        let s = c.metadata.sequence
        if let last = lastCounted {
            if s > last &+ 1, s &- last < 1 << 20 { statistics.dropped += Int(s &- last &- 1) }
        } else if s < 1 << 20 {
            // The sensor counts from 0 when it starts streaming (V4L2's sequence): the frames
            // before the first one seen were dropped too (a start-up frame included).
            statistics.dropped += Int(s)
        }
        lastCounted = s
    }

    /// A frame of a camera that paces its frames by demand (whose clock jumps over a stall, so
    /// no tick sees the stall pass) begins to be handled: progress is now counted by its time.
    /// Returns its time when it came after a gap worth judging, so the machines judge the gap
    /// before they take the frame.
    public mutating func arrived(_ c: CompletedRequest) -> SensorTime? {
        guard let ts = c.metadata.sensorTimestamp, c.status != .cancelled else { return nil }
        defer { (lastFrameTime, frameTime) = (ts, ts) }
        guard let previous = lastFrameTime, ts - previous > Self.gapWorthJudging else { return nil }
        return ts
    }

    /// The frame being handled is done with.
    public mutating func handled() { frameTime = nil }

    /// Streaming stopped: the next frame after a restart is no gap.
    public mutating func stopped() { lastFrameTime = nil }
}
