/// Red and blue gains applied by the ISP's white balance (green is 1.0).
///
/// The corresponding libcamera control is `ColourGains`.
public struct ColourGains: Hashable, Sendable, CustomStringConvertible {
    public var red: Double
    public var blue: Double
    public init(red: Double, blue: Double) {
        self.red = red
        self.blue = blue
    }
    public var description: String { "R \(String(format2: red)) B \(String(format2: blue))" }
}

/// The autofocus mode. The corresponding libcamera control is `AfMode`.
public enum AutofocusMode: Int32, Sendable, Hashable {
    case manual = 0
    case auto = 1
    case continuous = 2
}

/// The controls carried by one request, or passed to `start`. A `nil` field is left unchanged.
///
/// Only what the product uses: exposure, gain, white balance, frame duration and the lens.
public struct CameraControls: Hashable, Sendable {
    /// Auto-exposure on or off. With libcamera 0.5 and later this drives `ExposureTimeMode` and
    /// `AnalogueGainMode`; before, `AeEnable`.
    public var aeEnabled: Bool?
    /// A fixed exposure time. The corresponding libcamera control is `ExposureTime` (µs).
    public var exposureTime: Duration?
    /// A fixed analogue gain. The corresponding libcamera control is `AnalogueGain`.
    public var analogueGain: Gain?
    /// Auto-exposure bias in stops. The corresponding libcamera control is `ExposureValue`.
    public var exposureValue: Double?
    /// Auto white balance on or off. The corresponding libcamera control is `AwbEnable`.
    public var awbEnabled: Bool?
    /// Fixed white-balance gains. The corresponding libcamera control is `ColourGains`.
    public var colourGains: ColourGains?
    /// Frame duration limits. The corresponding libcamera control is `FrameDurationLimits` (µs).
    public var frameDurationLimits: ClosedRange<Duration>?
    /// The autofocus mode. The corresponding libcamera control is `AfMode`.
    public var afMode: AutofocusMode?
    /// A lens position, obeyed in manual AF mode. The corresponding libcamera control is
    /// `LensPosition`.
    public var lensPosition: Dioptres?

    public init(
        aeEnabled: Bool? = nil, exposureTime: Duration? = nil, analogueGain: Gain? = nil,
        exposureValue: Double? = nil, awbEnabled: Bool? = nil, colourGains: ColourGains? = nil,
        frameDurationLimits: ClosedRange<Duration>? = nil, afMode: AutofocusMode? = nil,
        lensPosition: Dioptres? = nil
    ) {
        self.aeEnabled = aeEnabled
        self.exposureTime = exposureTime
        self.analogueGain = analogueGain
        self.exposureValue = exposureValue
        self.awbEnabled = awbEnabled
        self.colourGains = colourGains
        self.frameDurationLimits = frameDurationLimits
        self.afMode = afMode
        self.lensPosition = lensPosition
    }

    /// No control set: the request repeats whatever is in force.
    public static let none = CameraControls()

    /// No control carries a value: the request repeats what is in force. From `set`, so a
    /// control added there counts here too.
    public var isEmpty: Bool { self.set.isEmpty }

    /// Which controls carry a value.
    public var set: ControlSet {
        var s: ControlSet = []
        if aeEnabled != nil { s.insert(.aeEnable) }
        if exposureTime != nil { s.insert(.exposureTime) }
        if analogueGain != nil { s.insert(.analogueGain) }
        if exposureValue != nil { s.insert(.exposureValue) }
        if awbEnabled != nil { s.insert(.awbEnable) }
        if colourGains != nil { s.insert(.colourGains) }
        if frameDurationLimits != nil { s.insert(.frameDurationLimits) }
        if afMode != nil { s.insert(.afMode) }
        if lensPosition != nil { s.insert(.lensPosition) }
        return s
    }

    /// Fully manual exposure: exposure and gain fixed, auto-exposure off. The AGC applies such
    /// settings at once; with only one fixed it eases towards them over several frames.
    public static func manualExposure(_ exposure: Duration, gain: Gain) -> CameraControls {
        CameraControls(aeEnabled: false, exposureTime: exposure, analogueGain: gain)
    }
}
