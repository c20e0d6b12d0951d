import CaptureScheduler
import ShutterbugCore
import Testing

/// A settings change worked out before anything is sent (pure): what its one request carries,
/// what stays in force after, the locks to wait for, and what was adjusted.
@Suite("Settings plan: a configuration's controls, baseline and locks")
struct SettingsPlanTests {
    static let timing = CameraTiming(landingOffsets: 2...3, lineTime: .microseconds(20), margin: .milliseconds(1), minFramePeriod: .milliseconds(33),
                                     ipaMinInterval: .milliseconds(33), gainRange: 1...16, exposureRange: .microseconds(100)...(.seconds(1)), readoutTime: .milliseconds(20))
    static let all = ControlLimits(supported: [.exposureTime, .analogueGain, .aeEnable, .frameDurationLimits, .colourGains, .awbEnable, .exposureValue, .lensPosition, .afMode],
                                   lensPosition: 0...10)
    static let fixedFocus = ControlLimits(supported: [.exposureTime, .analogueGain, .aeEnable, .colourGains, .awbEnable])

    @Test("a custom exposure past the sensor's range is adjusted and says so; the request and the baseline carry the same manual values, the frame fitted to the exposure")
    func customExposure() throws {
        var change = CameraSettingsChange()
        change.customExposure = (.seconds(3), Gain(40))
        let plan = try change.plan(camera: "sim:test", limits: Self.all, timing: Self.timing, baseline: CameraControls(aeEnabled: true, awbEnabled: true))
        #expect(plan.adjustments.count == 2, "\(plan.adjustments)")
        #expect(plan.adjustments.contains { $0.contains("exposure") && $0.contains("sensor range") })
        #expect(plan.adjustments.contains { $0.contains("gain") && $0.contains("16") })
        #expect(plan.controls.aeEnabled == false && plan.controls.analogueGain == Gain(16))
        #expect(plan.controls.exposureTime == plan.baseline.exposureTime && plan.baseline.aeEnabled == false)
        let e = try #require(plan.controls.exposureTime)
        #expect(e <= .seconds(1) && plan.controls.frameDurationLimits == Self.timing.framePeriod(for: e)...Self.timing.framePeriod(for: e))
        #expect(plan.baseline.awbEnabled == true, "white balance left as it was")
        #expect(plan.locks.count == 1)
    }

    @Test("focus: a normalised position maps onto the lens's range (0 the nearest, 1 infinity), one past it is clamped and said, a fixed-focus module is refused by name")
    func focus() throws {
        var change = CameraSettingsChange()
        change.lockedFocusNormalised = 1
        var plan = try change.plan(camera: "sim:test", limits: Self.all, timing: Self.timing, baseline: CameraControls())
        #expect(plan.controls.lensPosition == Dioptres(0) && plan.controls.afMode == .manual && plan.baseline.lensPosition == Dioptres(0))
        change = CameraSettingsChange()
        change.lockedFocus = Dioptres(12)
        plan = try change.plan(camera: "sim:test", limits: Self.all, timing: Self.timing, baseline: CameraControls())
        #expect(plan.controls.lensPosition == Dioptres(10) && plan.adjustments.first?.contains("range 0.00...10.00") == true, "\(plan.adjustments)")
        #expect(throws: ShutterbugError.self) { try change.plan(camera: "sim:fixed", limits: Self.fixedFocus, timing: Self.timing, baseline: CameraControls()) }
        do {
            _ = try change.plan(camera: "sim:fixed", limits: Self.fixedFocus, timing: Self.timing, baseline: CameraControls())
        } catch let e as ShutterbugError {
            #expect(e.code == .unsupported && e.message.contains("sim:fixed has no focus motor"), "\(e)")
        }
        change = CameraSettingsChange()
        change.lockedFocusNormalised = 1.5
        #expect(throws: ShutterbugError.self) { try change.plan(camera: "sim:test", limits: Self.all, timing: Self.timing, baseline: CameraControls()) }
    }

    @Test("an exposure bias outside -8...8 is refused with the range; continuous auto clears the manual values from the baseline; white balance locked, then auto again")
    func biasAutoWhiteBalance() throws {
        var change = CameraSettingsChange()
        change.exposureTargetBias = 9
        do {
            _ = try change.plan(camera: "sim:test", limits: Self.all, timing: Self.timing, baseline: CameraControls())
            Issue.record("a bias of 9 was accepted")
        } catch let e as ShutterbugError {
            #expect(e.code == .invalidArgument && e.message.contains("-8...8"), "\(e)")
        }
        let manual = CameraControls(aeEnabled: false, exposureTime: .milliseconds(10), analogueGain: Gain(2), awbEnabled: false, colourGains: ColourGains(red: 2, blue: 1.5))
        change = CameraSettingsChange()
        change.continuousAuto = true
        let auto = try change.plan(camera: "sim:test", limits: Self.all, timing: Self.timing, baseline: manual)
        #expect(auto.baseline.aeEnabled == true && auto.baseline.exposureTime == nil && auto.baseline.analogueGain == nil && auto.baseline.colourGains == nil && auto.locks.isEmpty)
        change = CameraSettingsChange()
        change.lockedWhiteBalance = ColourGains(red: 1.8, blue: 1.4)
        let wb = try change.plan(camera: "sim:test", limits: Self.all, timing: Self.timing, baseline: auto.baseline)
        #expect(wb.controls.awbEnabled == false && wb.baseline.colourGains == ColourGains(red: 1.8, blue: 1.4) && wb.locks.count == 1)
        change = CameraSettingsChange()
        change.autoWhiteBalance = true
        let back = try change.plan(camera: "sim:test", limits: Self.all, timing: Self.timing, baseline: wb.baseline)
        #expect(back.controls.awbEnabled == true && back.baseline.colourGains == nil && back.locks.isEmpty)
    }
}
