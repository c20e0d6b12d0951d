import ShutterbugCore

/// What the AGC aims for, from the controls received so far.
struct AGCState: Sendable {
    var enabled = true
    var manualExposure: Duration?
    var manualGain: Double?
    var exposureValue: Double = 0
    var frameDurationLimits: ClosedRange<Duration>?
    /// Total exposure (seconds × gain) after the AGC's filter; nil before the first run.
    var filteredTotal: Double?
    /// The last values applied, kept when auto-exposure is switched off without new values.
    var frozen: (exposure: Duration, gain: Double)?
}

/// The focus motor: where it was told to go and when it moved.
struct LensState: Sendable {
    var afMode: AutofocusMode = .manual
    var target: Double?
    /// The commanded position, which metadata reports.
    var commanded: Double
    /// The position the lens physically held before the last move.
    var position: Double
    /// The last move: from, to, when it started, how long it takes to settle.
    var move: (from: Double, to: Double, at: SensorTime, settle: Duration)?

    init(position: Double) {
        commanded = position
        self.position = position
    }

    /// The lens position at `time`, moving linearly over the settle time after each command.
    func physicalPosition(at time: SensorTime) -> Double {
        guard let m = move else { return position }
        if time <= m.at { return m.from }
        let elapsed = time - m.at
        if elapsed >= m.settle { return m.to }
        let f = elapsed.secondsValue / m.settle.secondsValue
        return m.from + (m.to - m.from) * f
    }
}

/// The Raspberry Pi AGC's "normal" exposure profile: raise exposure first, then gain, stage by
/// stage (shutter µs / analogue gain), as `rpi/agc` divides a total exposure.
private let exposureProfile: [(shutter: Double, gain: Double)] = [
    (100e-6, 1.0), (10_000e-6, 2.0), (30_000e-6, 4.0), (60_000e-6, 6.0), (66_666e-6, 8.0),
]

extension SimulatedPipeline {
    /// The default frame duration limits of the Raspberry Pi IPA: at most 30 fps, at least 4 fps.
    static let defaultFrameDurationLimits: ClosedRange<Duration> = .nanoseconds(33_333_333)...(.milliseconds(250))

    var subjectDioptres: Double { 1.0 / max(options.subjectDistance, 0.01) }

    var lensTarget: Double? {
        guard let range = profile.lensRange else { return nil }
        switch lens.afMode {
        case .manual: return lens.target.map { min(max($0, range.lowerBound), range.upperBound) }
        case .auto, .continuous: return min(max(subjectDioptres, range.lowerBound), range.upperBound)
        }
    }

    /// Passes a request's controls to the algorithms (they act when the IPA next runs).
    mutating func apply(_ c: CameraControls) {
        // As the fork's IPA (`ipa_base.cpp`, `AgcChannel`): `AeEnable` becomes the exposure and
        // gain modes, handled before the values. Auto clears the fixed exposure and gain
        // (`enableAutoExposure`/`enableAutoGain`), so AE resumes at once with no exposure 0
        // sent; values sent in the same request are then ignored, as the IPA ignores
        // `ExposureTime` while auto exposure runs. Manual freezes what is in force.
        if let v = c.aeEnabled {
            if v {
                agc.manualExposure = nil
                agc.manualGain = nil
                agc.frozen = nil
            } else if agc.enabled, c.exposureTime == nil || c.analogueGain == nil {
                agc.frozen = (mode.lineTime * current.exposureLines, profile.gainModel.gain(forCode: current.gainCode))
            }
            agc.enabled = v
        }
        if c.aeEnabled != true {
            if let e = c.exposureTime { agc.manualExposure = e.nanosecondsValue > 0 ? e : nil }
            if let g = c.analogueGain { agc.manualGain = g.value > 0 ? g.value : nil }
        }
        if let ev = c.exposureValue { agc.exposureValue = ev }
        if let limits = c.frameDurationLimits { agc.frameDurationLimits = limits }
        if let v = c.awbEnabled { awbEnabled = v }
        if let g = c.colourGains {
            manualColourGains = g
            // libcamera's Pi IPA: setting ColourGains switches AWB off.
            awbEnabled = false
        }
        if let m = c.afMode { lens.afMode = m }
        if let p = c.lensPosition { lens.target = p.value }
    }

    /// Frame duration limits in force, clipped to what the mode can do.
    var effectiveFrameLimits: ClosedRange<Duration> {
        let limits = agc.frameDurationLimits ?? Self.defaultFrameDurationLimits
        let lower = max(limits.lowerBound, mode.minFramePeriod)
        let upper = max(limits.upperBound, lower)
        return lower...upper
    }

    /// The sensor settings the AGC asks for now. `filtered`: ease an automatic total exposure
    /// towards its target (the AGC filter) instead of jumping.
    mutating func agcSettings(filtered: Bool) -> SensorSettings {
        let limits = effectiveFrameLimits
        let maxShutter = min(limits.upperBound - mode.margin, mode.maxExposure).secondsValue
        let gainRange = profile.analogueGainRange

        var exposure: Double
        var gain: Double
        if let e = agc.manualExposure, let g = agc.manualGain {
            // Both manual: applied at once, no filter.
            exposure = e.secondsValue
            gain = g
            agc.filteredTotal = exposure * gain
        } else if !agc.enabled {
            let f = agc.frozen ?? (mode.lineTime * current.exposureLines, profile.gainModel.gain(forCode: current.gainCode))
            exposure = agc.manualExposure?.secondsValue ?? f.exposure.secondsValue
            gain = agc.manualGain ?? f.gain
            agc.filteredTotal = exposure * gain
        } else {
            let target = 0.18 * pow2(agc.exposureValue) / sceneRate
            let total: Double
            if filtered, let previous = agc.filteredTotal {
                // Fast while the start-up frames last (the Pi's AGC converges then), then the
                // usual gentle filter.
                let speed = sequence < UInt64(options.startupFrames) ? 0.6 : 0.2
                total = previous + speed * (target - previous)
            } else {
                total = target
            }
            agc.filteredTotal = total
            if let e = agc.manualExposure {
                exposure = e.secondsValue
                gain = total / exposure
            } else if let g = agc.manualGain {
                gain = g
                exposure = total / g
            } else {
                (exposure, gain) = divide(total, maxShutter: maxShutter)
                // A sensor whose least gain is above the profile's first stage (IMX708:
                // 1.12) takes the difference off the shutter instead of over-exposing.
                if gain < gainRange.lowerBound {
                    gain = gainRange.lowerBound
                    exposure = total / gain
                }
            }
        }

        // Frame length follows the exposure within the limits; a longer exposure is cut.
        exposure = min(exposure, maxShutter)
        let line = mode.lineTime.secondsValue
        // Whole lines that fit the frame; a hair of tolerance so a frame of exactly N lines
        // plus the margin is not read as N - 1 through floating-point rounding.
        let maxLinesForFrame = Int((limits.upperBound - mode.margin).secondsValue / line + 1e-6)
        let lines = min(max(Int((exposure / line).rounded()), profile.minExposureLines), max(profile.minExposureLines, maxLinesForFrame))
        let exposureQ = Double(lines) * line
        let frameSeconds = min(max(exposureQ + mode.margin.secondsValue, limits.lowerBound.secondsValue), limits.upperBound.secondsValue)
        let frameLines = Int((frameSeconds / line).rounded(.up))

        let code = profile.gainModel.code(forGain: min(max(gain, gainRange.lowerBound), gainRange.upperBound))
        let gainQ = profile.gainModel.gain(forCode: code)
        // Digital gain makes up what quantisation and the analogue maximum left out.
        let digital = max(1.0, (exposure * gain) / (exposureQ * gainQ))
        return SensorSettings(exposureLines: lines, gainCode: code, frameLengthLines: frameLines, digitalGain: digital)
    }

    /// Splits a total exposure into shutter time and gain along the exposure profile.
    func divide(_ total: Double, maxShutter: Double) -> (Double, Double) {
        var shutter = min(exposureProfile[0].shutter, maxShutter)
        var gain = exposureProfile[0].gain
        if shutter * gain >= total { return (total / gain, gain) }
        for stage in exposureProfile.dropFirst() {
            let stageShutter = min(stage.shutter, maxShutter)
            if stageShutter * gain >= total { return (total / gain, gain) }
            shutter = stageShutter
            if shutter * stage.gain >= total { return (shutter, total / shutter) }
            gain = stage.gain
        }
        return (shutter, total / shutter)
    }

    /// One algorithm run's lens move: at most `lensMaxStep` dioptres towards the target.
    mutating func stepLens(at time: SensorTime) {
        guard let target = lensTarget, target != lens.commanded else { return }
        let step = min(max(target - lens.commanded, -options.lensMaxStep), options.lensMaxStep)
        let from = lens.physicalPosition(at: time)
        lens.position = from
        lens.commanded += step
        lens.move = (from, lens.commanded, time, options.lensSettleTime)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@inline(__always) func pow2(_ x: Double) -> Double { pow(2.0, x) }
