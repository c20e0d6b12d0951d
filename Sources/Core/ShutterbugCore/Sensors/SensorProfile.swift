/// Per-frame delays of the sensor controls, in frames, as libcamera's
/// `camera_sensor_properties.cpp` lists them.
public struct ControlDelays: Hashable, Sendable {
    public var exposure: Int
    public var gain: Int
    public var vblank: Int
    public init(exposure: Int, gain: Int, vblank: Int) {
        self.exposure = exposure
        self.gain = gain
        self.vblank = vblank
    }

    /// DelayedControls staggers writes so they land together, on the slowest one's frame.
    public var max: Int { Swift.max(exposure, gain, vblank) }

    /// The two paired-frame offsets at which a request's sensor controls can first appear on
    /// the Raspberry Pi pipeline: max delay + 1 or + 2 (CAMERA-FACTS §2).
    public var landingOffsets: ClosedRange<Int> { (max + 1)...(max + 2) }
}

/// How a sensor turns a requested analogue gain into a register code, so gains are quantised
/// the way the real driver quantises them.
public enum GainModel: Hashable, Sendable {
    /// gain = base / (base - code), code in codes (IMX219: 256, IMX477/IMX708: 1024).
    case reciprocal(base: Int, codes: ClosedRange<Int>)
    /// gain = code / divisor (OV5647: code/16).
    case linear(divisor: Int, codes: ClosedRange<Int>)
    /// gain = 10^(code × step dB / 20) (IMX296: 0.1 dB steps).
    case decibel(stepTenthsOfDB: Int, codes: ClosedRange<Int>)

    public func gain(forCode code: Int) -> Double {
        switch self {
        case .reciprocal(let base, _): return Double(base) / Double(base - code)
        case .linear(let divisor, _): return Double(code) / Double(divisor)
        case .decibel(let step, _): return pow10(Double(code * step) / 200.0)
        }
    }

    public func code(forGain gain: Double) -> Int {
        let raw: Double
        let codes: ClosedRange<Int>
        switch self {
        case .reciprocal(let base, let c):
            raw = Double(base) - Double(base) / gain
            codes = c
        case .linear(let divisor, let c):
            raw = gain * Double(divisor)
            codes = c
        case .decibel(let step, let c):
            raw = 200.0 * log10Value(gain) / Double(step)
            codes = c
        }
        return Swift.min(Swift.max(Int(raw.rounded()), codes.lowerBound), codes.upperBound)
    }

    /// The gain actually applied for a requested gain.
    public func quantise(_ gain: Double) -> Double { self.gain(forCode: code(forGain: gain)) }

    public var range: ClosedRange<Double> {
        switch self {
        case .reciprocal(_, let c), .linear(_, let c), .decibel(_, let c):
            return gain(forCode: c.lowerBound)...gain(forCode: c.upperBound)
        }
    }
}

/// The order of colours in a Bayer mosaic, top-left 2x2 cell read row by row.
public enum CFAPattern: String, Hashable, Sendable {
    case rggb = "RGGB", bggr = "BGGR", grbg = "GRBG", gbrg = "GBRG"
}

/// A camera sensor as Shutterbug models it: modes, control delays, gain and lens.
public struct SensorProfile: Hashable, Sendable {
    /// libcamera's sensor model name ("imx477").
    public var model: String
    /// The product it ships in ("HQ Camera").
    public var product: String
    /// Modes, the full-resolution one first.
    public var modes: [SensorMode]
    public var delays: ControlDelays
    public var gainModel: GainModel
    /// The shortest exposure, in lines.
    public var minExposureLines: Int
    public var bitDepth: Int
    public var cfa: CFAPattern
    /// Black level in raw sensor units at `bitDepth`.
    public var blackLevel: Int
    /// The lens position range when the module has a focus motor, else `nil`.
    public var lensRange: ClosedRange<Double>?
    /// The lens position at power-on.
    public var defaultLensPosition: Double
    /// The Raspberry Pi tuning's colour calibration of this sensor.
    public var colour: ColourTuning
    /// A hardware trigger input that starts an exposure, when the sensor has one (the
    /// IMX296's XTR pin, enabled by the driver's `trigger_mode` parameter).
    public var externalTrigger: ExternalTrigger? = nil

    /// A sensor's external trigger: the exposure begins on the pulse and lasts the pulse's
    /// width plus a fixed offset (CAMERA-FACTS §5).
    public struct ExternalTrigger: Hashable, Sendable {
        /// Added to the pulse width (IMX296: 14.26 µs).
        public var exposureOffset: Duration
        /// How the driver is told (for messages).
        public var enabledBy: String
        public init(exposureOffset: Duration, enabledBy: String) {
            self.exposureOffset = exposureOffset
            self.enabledBy = enabledBy
        }
    }

    public var fullResolution: SensorMode { modes[0] }
    public var analogueGainRange: ClosedRange<Double> { gainModel.range }
    public var hasFocusMotor: Bool { lensRange != nil }

    /// The exposure range of a mode: minimum lines up to the mode's maximum.
    public func exposureRange(in mode: SensorMode) -> ClosedRange<Duration> {
        (mode.lineTime * minExposureLines)...mode.maxExposure
    }

    /// The mode the camera would pick for a size: the smallest mode at least that large,
    /// preferring unbinned on ties, else the full-resolution mode.
    public func mode(forWidth width: Int, height: Int) -> SensorMode {
        let fitting = modes.filter { $0.width >= width && $0.height >= height }
        return fitting.min { ($0.width * $0.height) < ($1.width * $1.height) } ?? fullResolution
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@inline(__always) func pow10(_ x: Double) -> Double { pow(10.0, x) }
@inline(__always) func log10Value(_ x: Double) -> Double { log10(x) }
