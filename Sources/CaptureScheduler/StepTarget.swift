import ShutterbugCore

/// What one bracket step asks the sensor for, and how to recognise a frame that carries it.
public struct StepTarget: Sendable, Hashable, CustomStringConvertible {
    /// Exposure and gain, for exposure steps.
    public var exposure: Duration?
    public var gain: Double?
    /// Lens position, for focus steps.
    public var lens: Double?

    public init(exposure: Duration? = nil, gain: Double? = nil, lens: Double? = nil) {
        self.exposure = exposure
        self.gain = gain
        self.lens = lens
    }

    /// Whether a frame's metadata carries this target: exposure within one line (plus the
    /// microsecond rounding of the report), analogue gain within 2% (register quantisation;
    /// digital gain makes up the rest), lens within 0.01 dioptre.
    public func isCarried(by m: FrameMetadata, lineTime: Duration) -> Bool {
        if let e = exposure {
            guard let r = m.exposureTime else { return false }
            let tolerance = lineTime.nanosecondsValue + 1_000
            guard abs((r - e).nanosecondsValue) <= tolerance else { return false }
        }
        if let g = gain {
            guard let r = m.analogueGain, abs(r.value - g) <= 0.02 * g else { return false }
        }
        if let l = lens {
            guard let r = m.lensPosition, abs(r.value - l) < 0.01 else { return false }
        }
        return true
    }

    public var description: String {
        var parts: [String] = []
        if let exposure { parts.append(exposure.exposureDescription) }
        if let gain { parts.append("gain \(String(format2: gain))") }
        if let lens { parts.append("lens \(String(format2: lens)) dpt") }
        return parts.joined(separator: ", ")
    }
}
