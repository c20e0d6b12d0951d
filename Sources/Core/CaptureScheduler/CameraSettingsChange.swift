import ShutterbugCore

/// Settings changed together in one request, like AVFoundation's
/// `lockForConfiguration()`…`unlockForConfiguration()` (`CaptureSession.configure`).
public struct CameraSettingsChange: Sendable {
    /// Fixed exposure and gain (ISO 100 = gain 1.0: `Gain(iso: 400)` is 4.0).
    public var customExposure: (duration: Duration, gain: Gain)?
    /// Auto-exposure target bias in stops (AVFoundation's `exposureTargetBias`). The AGC
    /// eases towards it over several frames, so it reports no sync point.
    public var exposureTargetBias: Double?
    /// Focus locked at a lens position.
    public var lockedFocus: Dioptres?
    /// Focus locked at AVFoundation's normalised lens position: 0 is the nearest the lens
    /// focuses (the top of its dioptre range), 1 is infinity (0 dioptres), linear between.
    public var lockedFocusNormalised: Double?
    /// White balance locked at colour gains.
    public var lockedWhiteBalance: ColourGains?
    /// Back to continuous auto exposure, white balance and focus.
    public var continuousAuto = false
    /// Back to auto white balance after `lockedWhiteBalance`, exposure and focus left as
    /// they are. It eases from the locked gains, so it reports no sync point.
    public var autoWhiteBalance = false
    public init() {}
}

/// What a settings change asks of the camera, worked out before anything is sent (pure): the
/// controls for its one request, the controls in force outside captures afterwards, the locks
/// to wait for, and the settings adjusted to the sensor.
public struct SettingsPlan: Sendable {
    public var controls = CameraControls()
    public var baseline: CameraControls
    public var locks: [Locks.Kind] = []
    public var adjustments: [String] = []
}

extension CameraSettingsChange {
    /// The plan for this change on a camera with `limits` and `timing`, from `baseline`.
    ///
    /// - Throws: `.unsupported` for a control the camera lacks (a lens on a fixed-focus
    ///   module), `.invalidArgument` for a value outside its range (with the range).
    public func plan(camera: String, limits: ControlLimits, timing: CameraTiming, baseline current: CameraControls) throws -> SettingsPlan {
        var lockedFocus = self.lockedFocus
        var baseline = current
        var controls = CameraControls()
        var adjustments: [String] = []
        var kinds: [Locks.Kind] = []
        let supported = limits.supported
        if continuousAuto {
            controls = CameraControls(aeEnabled: true, exposureTime: .zero, analogueGain: Gain(0), awbEnabled: true, afMode: supported.contains(.afMode) ? .continuous : nil)
            baseline.aeEnabled = true
            baseline.exposureTime = nil
            baseline.analogueGain = nil
            baseline.awbEnabled = true
            baseline.colourGains = nil
            // What a bracket restores is this mode too, and auto exposure gets back the frame
            // durations a custom exposure had fixed (the session's own at start).
            if supported.contains(.afMode) {
                baseline.afMode = .continuous
                baseline.lensPosition = nil
            }
            if supported.contains(.frameDurationLimits) {
                controls.frameDurationLimits = timing.autoFrameDurationLimits
                baseline.frameDurationLimits = timing.autoFrameDurationLimits
            }
        }
        if let e = customExposure {
            guard supported.isSuperset(of: [.exposureTime, .analogueGain]) else {
                throw ShutterbugError(.unsupported, "\(camera) does not support manual exposure (no ExposureTime/AnalogueGain controls)")
            }
            let (target, notes) = timing.adjust(exposure: e.duration, gain: e.gain.value, what: "custom exposure")
            adjustments += notes
            let fd = timing.framePeriod(for: target.exposure!)
            controls.aeEnabled = false
            controls.exposureTime = target.exposure
            controls.analogueGain = Gain(target.gain!)
            controls.frameDurationLimits = fd...fd
            baseline.aeEnabled = false
            baseline.exposureTime = target.exposure
            baseline.analogueGain = Gain(target.gain!)
            baseline.frameDurationLimits = fd...fd
            kinds.append(.exposure(target))
        }
        if let bias = exposureTargetBias {
            guard supported.contains(.exposureValue) else {
                throw ShutterbugError(.unsupported, "\(camera) does not support an exposure bias (no ExposureValue control)")
            }
            guard (-8...8).contains(bias) else {
                throw ShutterbugError(.invalidArgument, "exposure target bias must be in -8...8 stops, not \(bias)")
            }
            controls.exposureValue = bias
            baseline.exposureValue = bias
        }
        if let n = lockedFocusNormalised, lockedFocus == nil {
            guard (0...1).contains(n) else {
                throw ShutterbugError(.invalidArgument, "a normalised lens position must be in 0...1, not \(n)")
            }
            lockedFocus = Dioptres(normalised: n, in: limits.lensPosition ?? 0...15)
        }
        if let l = lockedFocus {
            guard supported.contains(.lensPosition), let range = limits.lensPosition ?? (supported.contains(.lensPosition) ? 0...15 : nil) else {
                throw ShutterbugError(.unsupported, "\(camera) has no focus motor; lens positions need a camera with one, such as sim:imx708 (Camera Module 3)")
            }
            let clamped = min(max(l.value, range.lowerBound), range.upperBound)
            if clamped != l.value { adjustments.append("lens position \(l) adjusted to \(Dioptres(clamped)) (range \(String(format2: range.lowerBound))...\(String(format2: range.upperBound)))") }
            controls.afMode = .manual
            controls.lensPosition = Dioptres(clamped)
            baseline.afMode = .manual
            baseline.lensPosition = Dioptres(clamped)
            kinds.append(.focus(clamped))
        }
        if autoWhiteBalance, lockedWhiteBalance == nil {
            controls.awbEnabled = true
            baseline.awbEnabled = true
            baseline.colourGains = nil
        }
        if let g = lockedWhiteBalance {
            guard supported.contains(.colourGains) else {
                throw ShutterbugError(.unsupported, "\(camera) does not support fixed white balance (no ColourGains control)")
            }
            controls.awbEnabled = false
            controls.colourGains = g
            baseline.awbEnabled = false
            baseline.colourGains = g
            kinds.append(.whiteBalance(g))
        }
        return SettingsPlan(controls: controls, baseline: baseline, locks: kinds, adjustments: adjustments)
    }
}
