import ShutterbugCore

/// What one bracket step or lock asks the sensor for, and the one rule that says whether a
/// frame carries it. Every judge of "this frame carries this setting" (bracket steps, the
/// exposure, white-balance and focus locks) asks here, with the same tolerances.
public struct StepTarget: Sendable, Hashable, CustomStringConvertible {
    /// Exposure and gain, for exposure steps.
    public var exposure: Duration?
    /// Analogue gain asked for (within the sensor's analogue range).
    public var gain: Double?
    /// Lens position, for focus steps.
    public var lens: Double?
    /// Colour gains, for a white-balance lock.
    public var colourGains: ColourGains?

    /// Analogue gain is matched within 2% (register quantisation); digital gain makes up the
    /// rest, so the total (analogue × digital) must be within 3% of the gain asked for.
    public static let gainTolerance = 0.02
    public static let totalGainTolerance = 0.03
    /// Colour gains within 0.01 (the ISP applies them exactly; metadata is rounded).
    public static let colourGainTolerance = 0.01
    /// Reported lens position within 0.01 dioptre (it is the commanded value).
    public static let lensTolerance = 0.01

    public init(exposure: Duration? = nil, gain: Double? = nil, lens: Double? = nil, colourGains: ColourGains? = nil) {
        self.exposure = exposure
        self.gain = gain
        self.lens = lens
        self.colourGains = colourGains
    }

    /// Whether a frame's metadata carries this target: exposure within one line (plus the
    /// microsecond rounding of the report), analogue gain within 2% and total gain within 3%
    /// (so a frame the AGC brightened with digital gain is not taken for a manual step), lens
    /// within 0.01 dioptre, colour gains within 0.01. For focus this is only the reported
    /// (commanded) position: `LensSettle` decides when the lens is really there.
    public func isCarried(by m: FrameMetadata, lineTime: Duration) -> Bool {
        if let e = exposure {
            guard let r = m.exposureTime else { return false }
            let tolerance = lineTime.nanosecondsValue + 1_000
            guard abs((r - e).nanosecondsValue) <= tolerance else { return false }
        }
        if let g = gain {
            guard let r = m.analogueGain, abs(r.value - g) <= Self.gainTolerance * g else { return false }
            if let d = m.digitalGain, abs(r.value * d.value - g) > Self.totalGainTolerance * g { return false }
        }
        if let l = lens {
            guard let r = m.lensPosition, abs(r.value - l) < Self.lensTolerance else { return false }
        }
        if let c = colourGains {
            guard let r = m.colourGains, abs(r.red - c.red) < Self.colourGainTolerance, abs(r.blue - c.blue) < Self.colourGainTolerance else { return false }
        }
        return true
    }

    /// Whether a frame carrying `other` would also pass as carrying this target, and the
    /// reverse: the two cannot be told apart by metadata. Identical targets are not ambiguous
    /// (either frame is right for either step); different targets this close are.
    public func isIndistinguishable(from other: StepTarget, lineTime: Duration) -> Bool {
        self != other && isCarried(by: other.asReported, lineTime: lineTime) && other.isCarried(by: asReported, lineTime: lineTime)
    }

    /// The metadata of a frame exactly on this target.
    var asReported: FrameMetadata {
        let analogue: Gain? = gain.map { Gain($0) }
        let digital: Gain? = gain == nil ? nil : Gain.unity
        let position: Dioptres? = lens.map { Dioptres($0) }
        return FrameMetadata(sequence: 0, exposureTime: exposure, analogueGain: analogue, digitalGain: digital,
                             lensPosition: position, colourGains: colourGains)
    }

    /// The first pair of steps that metadata cannot tell apart, if any.
    public static func firstAmbiguousPair(_ targets: [StepTarget], lineTime: Duration) -> (Int, Int)? {
        for i in targets.indices {
            for j in targets.indices where j > i && targets[i].isIndistinguishable(from: targets[j], lineTime: lineTime) {
                return (i, j)
            }
        }
        return nil
    }

    public var description: String {
        var parts: [String] = []
        if let exposure { parts.append(exposure.exposureDescription) }
        if let gain { parts.append("gain \(String(format2: gain))") }
        if let lens { parts.append("lens \(String(format2: lens)) dpt") }
        if let colourGains { parts.append("colour gains \(colourGains)") }
        return parts.joined(separator: ", ")
    }
}
