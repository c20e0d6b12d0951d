/// What one completed frame reports about itself: the ground truth of how it was exposed.
///
/// Reported exposure is quantised to the sensor's line time, so compare it with a tolerance.
/// A field is `nil` when the camera did not report it (vimc reports almost nothing).
public struct FrameMetadata: Hashable, Sendable {
    /// The buffer's frame sequence (`FrameMetadata::sequence`). Gaps mean dropped frames.
    public var sequence: UInt32
    /// Start of readout on CLOCK_MONOTONIC (`SensorTimestamp`). Exposure of the first row began
    /// about `exposureTime` earlier.
    public var sensorTimestamp: SensorTime?
    public var exposureTime: Duration?
    public var analogueGain: Gain?
    public var digitalGain: Gain?
    public var frameDuration: Duration?
    /// The commanded lens position (not a measurement).
    public var lensPosition: Dioptres?
    public var colourGains: ColourGains?
    public var colourTemperature: Int?
    public var lux: Double?
    /// The `requestSequence` of the request whose controls took effect on this frame, where
    /// the camera says (the Raspberry Pi fork's `rpi::ControlListSequence`); `nil` elsewhere,
    /// and then only the reported values tell which settings a frame carries.
    public var controlListSequence: Int64?

    public init(
        sequence: UInt32, sensorTimestamp: SensorTime? = nil, exposureTime: Duration? = nil,
        analogueGain: Gain? = nil, digitalGain: Gain? = nil, frameDuration: Duration? = nil,
        lensPosition: Dioptres? = nil, colourGains: ColourGains? = nil,
        colourTemperature: Int? = nil, lux: Double? = nil
    ) {
        self.sequence = sequence
        self.sensorTimestamp = sensorTimestamp
        self.exposureTime = exposureTime
        self.analogueGain = analogueGain
        self.digitalGain = digitalGain
        self.frameDuration = frameDuration
        self.lensPosition = lensPosition
        self.colourGains = colourGains
        self.colourTemperature = colourTemperature
        self.lux = lux
    }

    /// When exposure of the first row began: `SensorTimestamp - ExposureTime`, the rule
    /// Picamera2 uses to find the first frame exposed after an instant.
    public var exposureStart: SensorTime? {
        guard let t = sensorTimestamp, let e = exposureTime else { return nil }
        return t - e
    }

    /// Total gain (analogue × digital), the factor pixel values scale with besides exposure.
    public var totalGain: Gain? {
        guard let a = analogueGain else { return nil }
        return a * (digitalGain ?? .unity)
    }
}
