/// One readout mode of a sensor: its size and timing constants.
public struct SensorMode: Hashable, Sendable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    /// The shortest frame period the mode can run at (its maximum frame rate).
    public var minFramePeriod: Duration
    /// Time to read one line; exposure and frame length are whole numbers of lines.
    public var lineTime: Duration
    /// Integration margin: exposure is at most the frame length minus this.
    public var margin: Duration
    /// The longest exposure the mode allows.
    public var maxExposure: Duration
    /// Whether the mode bins or skips pixels.
    public var binned: Bool

    public init(width: Int, height: Int, minFramePeriod: Duration, lineTime: Duration, margin: Duration, maxExposure: Duration, binned: Bool) {
        self.width = width
        self.height = height
        self.minFramePeriod = minFramePeriod
        self.lineTime = lineTime
        self.margin = margin
        self.maxExposure = maxExposure
        self.binned = binned
    }

    /// The maximum frame rate.
    public var maxFrameRate: Double { 1.0 / minFramePeriod.secondsValue }

    /// Time to read the whole frame out, row 0 to the last row.
    public var readoutTime: Duration { lineTime * height }

    public var description: String {
        "\(width)x\(height) up to \(String(format2: maxFrameRate)) fps"
    }
}
