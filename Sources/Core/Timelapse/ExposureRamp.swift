import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// Day-to-night exposure ramping, in software, with the camera kept running: each slot's 0 EV
/// frame is metered and the next slot's exposure moves towards the target, damped and bounded
/// in EV per slot; exposure time first up to a limit, then analogue gain. At night the target
/// can be darker (a night offset in EV, cross-faded by the light), so a night sky stays a
/// night sky. A pure value: its state is what the journal keeps, so a restart resumes it.
public struct ExposureRamp: Sendable, Hashable {
    public struct Configuration: Sendable, Hashable {
        /// The mean the 0 EV frame aims for, linear, as a fraction of full scale (0.18: a
        /// mid-grey scene's mean after the ISP's curve is about 118/255).
        public var target: Double = 0.18
        /// The largest change between two slots, in EV.
        public var maxStep: Double = 1.0 / 3.0
        /// The fraction of the metered error corrected per slot (1: all of it, bounded by
        /// `maxStep`).
        public var damping: Double = 0.5
        /// The exposure range the ramp uses: time first up to the top, then gain.
        public var exposure: ClosedRange<Duration>
        public var gain: ClosedRange<Double>
        /// The target's offset at night, in EV (negative: darker), faded in between `dayLux`
        /// and `nightLux` on a log scale.
        public var nightOffset: Double = -1
        public var dayLux: Double = 50
        public var nightLux: Double = 1
        /// Errors smaller than this are left alone (no hunting on noise).
        public var deadband: Double = 0.05

        public init(exposure: ClosedRange<Duration>, gain: ClosedRange<Double>) {
            self.exposure = exposure
            self.gain = gain
        }
    }

    /// The exposure a slot's 0 EV frame is taken with.
    public struct Settings: Sendable, Hashable {
        public var exposure: Duration
        public var gain: Double
        public init(exposure: Duration, gain: Double) {
            self.exposure = exposure
            self.gain = gain
        }
        /// Exposure × gain in seconds.
        public var total: Double { exposure.secondsValue * gain }
    }

    /// One slot's decision, logged per slot.
    public struct Decision: Sendable, Hashable {
        public var metered: Double
        public var lux: Double?
        /// How far below (negative) or above the metered frame was from the target, in EV.
        public var errorEV: Double
        /// The night offset in force (0 by day).
        public var nightOffsetEV: Double
        /// The change applied, in EV (bounded).
        public var stepEV: Double
        public var from: Settings
        public var to: Settings
        /// "day", "dusk" (between the lux thresholds) or "night".
        public var phase: String
        /// A word on why: "converging", "held (within the deadband)", "bounded at ±x EV",
        /// "at the longest exposure and the highest gain".
        public var note: String
    }

    public let configuration: Configuration
    /// The settings the next slot uses.
    public private(set) var settings: Settings

    public init(_ configuration: Configuration, settings: Settings) {
        self.configuration = configuration
        self.settings = settings
        self.settings = split(settings.total)
    }

    /// The settings for an exposure bias around the ramped base (an EV bracket keeps its
    /// spread): time first, then gain, within the limits.
    public func settings(bias: Double) -> Settings {
        split(settings.total * pow(2, bias))
    }

    /// A bracket's settings around the ramped base. Where the spread does not fit the limits
    /// (the darkest step under the shortest exposure at the lowest gain in full sun, the
    /// brightest over the longest at the highest at night), the whole bracket is shifted, by
    /// `shift` EV, so its steps stay apart; the caller reports the shift.
    public func settings(biases: [Double]) -> (steps: [Settings], shift: Double) {
        let c = configuration
        let minTotal = c.exposure.lowerBound.secondsValue * c.gain.lowerBound
        let maxTotal = c.exposure.upperBound.secondsValue * c.gain.upperBound
        guard let lo = biases.min(), let hi = biases.max() else { return ([], 0) }
        var shift = 0.0
        let low = settings.total * pow(2, lo), high = settings.total * pow(2, hi)
        if low < minTotal { shift = log2(minTotal / low) }
        if high * pow(2, shift) > maxTotal { shift = min(shift, log2(maxTotal / high)) }
        // Rounded up a hair so the floor itself is not rounded under.
        if shift > 0 { shift += 1e-6 } else if shift < 0 { shift -= 1e-6 }
        return (biases.map { split(settings.total * pow(2, $0 + shift)) }, shift)
    }

    /// Meters the slot's 0 EV frame and moves `settings` for the next slot.
    ///
    /// - Parameters:
    ///   - metered: the 0 EV frame's mean, linear, 0...1 of full scale.
    ///   - lux: the scene's light as the camera reports it (`Lux`), if it does.
    ///   - exposedWith: what that frame was really exposed with (the metadata's values).
    public mutating func update(metered: Double, lux: Double?, exposedWith: Settings) -> Decision {
        let c = configuration
        var offset = 0.0
        var phase = "day"
        if let lux, lux < c.dayLux {
            let f = lux <= c.nightLux ? 1 : log(c.dayLux / lux) / log(c.dayLux / c.nightLux)
            offset = c.nightOffset * f
            phase = f >= 1 ? "night" : "dusk"
        }
        let target = c.target * pow(2, offset)
        // A black frame says nothing about how much darker it is: treat it as 4 EV under.
        let m = max(metered, target / 16)
        let error = log2(target / m)
        var step = 0.0
        var note: String
        if abs(error) < c.deadband {
            note = "held, within ±\(c.deadband) EV"
        } else {
            step = error * c.damping
            if abs(step) > c.maxStep {
                step = step < 0 ? -c.maxStep : c.maxStep
                note = "bounded at ±\(String(format2: c.maxStep)) EV"
            } else {
                note = "converging"
            }
        }
        let from = settings
        // From what the frame was really exposed with, so quantisation does not accumulate.
        let base = exposedWith.total > 0 ? exposedWith.total : from.total
        var to = split(base * pow(2, step))
        // The exposure is whole nanoseconds: nudge it back inside the bound it was rounded out of.
        while abs(log2(to.total / base)) > c.maxStep, to.exposure > c.exposure.lowerBound, to.exposure < c.exposure.upperBound {
            to.exposure += to.total > base ? .nanoseconds(-1) : .nanoseconds(1)
        }
        let maxTotal = c.exposure.upperBound.secondsValue * c.gain.upperBound
        let minTotal = c.exposure.lowerBound.secondsValue * c.gain.lowerBound
        if to.total >= maxTotal * 0.999, step > 0 { note = "at the longest exposure and the highest gain" }
        if to.total <= minTotal * 1.001, step < 0 { note = "at the shortest exposure and the lowest gain" }
        settings = to
        return Decision(metered: metered, lux: lux, errorEV: error, nightOffsetEV: offset, stepEV: log2(to.total / max(base, 1e-12)),
                        from: from, to: to, phase: phase, note: note)
    }

    /// A total (seconds × gain) as exposure time first, up to the limit, then gain.
    private func split(_ total: Double) -> Settings {
        let c = configuration
        let lo = c.exposure.lowerBound.secondsValue, hi = c.exposure.upperBound.secondsValue
        let t = min(max(total / c.gain.lowerBound, lo), hi)
        let g = min(max(total / t, c.gain.lowerBound), c.gain.upperBound)
        return Settings(exposure: .seconds(exactly: t), gain: g)
    }

    /// Restores a ramp from its journal (the settings the next slot was to use).
    public static func resumed(_ configuration: Configuration, settings: Settings) -> ExposureRamp {
        ExposureRamp(configuration, settings: settings)
    }
}
