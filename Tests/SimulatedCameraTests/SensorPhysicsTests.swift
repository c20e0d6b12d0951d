import ShutterbugCore
import SimulatedCamera
import Testing

/// What frames report and contain: timing, quantisation, pixels that obey exposure × gain, and
/// focus that shows in the pixels.
@Suite("Simulated sensor physics", .timeLimit(.minutes(3)))
struct SensorPhysicsTests {
    @Test("timestamps advance by each frame's duration, also when frames lengthen", arguments: SensorProfile.catalogue)
    func timestampsFollowFrameDuration(profile: SensorProfile) async throws {
        // A long exposure from request 5 stretches the frames; then back.
        let long = CameraControls(aeEnabled: false, exposureTime: .milliseconds(80), analogueGain: Gain(2), frameDurationLimits: .milliseconds(20)...(.milliseconds(200)))
        let short = CameraControls(aeEnabled: false, exposureTime: .milliseconds(5), analogueGain: Gain(2))
        let frames = try await simulatedRun(profile, frames: 30, start: short) { $0 == 5 ? long : ($0 == 15 ? short : .none) }
        var sawLong = false
        for (a, b) in zip(frames, frames.dropFirst()) {
            let gap = b.metadata.sensorTimestamp! - a.metadata.sensorTimestamp!
            #expect(b.metadata.sequence == a.metadata.sequence + 1)
            #expect(gap == b.metadata.frameDuration!, "\(profile.model) frame \(b.metadata.sequence): timestamps \(gap) apart, frame duration \(b.metadata.frameDuration!)")
            // Exposure fits inside its frame.
            #expect(b.metadata.exposureTime! <= b.metadata.frameDuration!)
            if b.metadata.frameDuration! > .milliseconds(80) { sawLong = true }
        }
        #expect(sawLong)
    }

    @Test("reported exposure is a whole number of lines, within one line of the request", arguments: SensorProfile.catalogue)
    func quantisedToLineTime(profile: SensorProfile) async throws {
        let asked = Duration.microseconds(4000)  // 1/250 s
        let frames = try await simulatedRun(profile, frames: 3, start: .manualExposure(asked, gain: Gain(2)))
        let line = profile.mode(forWidth: 640, height: 480).lineTime
        for f in frames {
            let e = f.metadata.exposureTime!
            #expect(e.nanosecondsValue % line.nanosecondsValue == 0)
            #expect(abs((e - asked).nanosecondsValue) <= line.nanosecondsValue / 2 + 1)
            // Digital gain makes up the quantisation.
            let total = e.secondsValue * f.metadata.totalGain!.value
            #expect(abs(total / (asked.secondsValue * 2) - 1) < 0.002)
        }
    }

    @Test("pixel brightness ratios follow exposure × gain")
    func brightnessFollowsExposure() async throws {
        var means: [UInt64: Double] = [:]
        let plan: (UInt64) -> CameraControls = { c in
            switch c {
            case 10: return .manualExposure(.milliseconds(8), gain: Gain(2))
            case 20: return .manualExposure(.milliseconds(4), gain: Gain(1))
            default: return .none
            }
        }
        let frames = try await simulatedRun(.imx477, frames: 30, start: .manualExposure(.milliseconds(2), gain: Gain(1)), plan: plan) { c in
            means[c.cookie] = channelStatistics(c.buffers[0]).mean
        }
        // Group frames by what their metadata says they were exposed with.
        var byExposure: [Int: [Double]] = [:]
        for f in frames {
            let key = Int((f.metadata.exposureTime!.secondsValue * f.metadata.totalGain!.value * 1e6).rounded())
            byExposure[key, default: []].append(means[f.cookie]!)
        }
        #expect(byExposure.count == 3)
        let sorted = byExposure.sorted { $0.key < $1.key }.map { (Double($0.key), $0.value.reduce(0, +) / Double($0.value.count)) }
        for (a, b) in zip(sorted, sorted.dropFirst()) {
            let expected = b.0 / a.0
            let measured = b.1 / a.1
            #expect(abs(measured / expected - 1) < 0.03, "exposure×gain ratio \(expected), pixel ratio \(measured)")
        }
    }

    @Test("bright scenes clip at full scale")
    func clipping() async throws {
        var mean = 0.0
        _ = try await simulatedRun(.imx477, frames: 2, start: .manualExposure(.milliseconds(200), gain: Gain(8)), inspect: { c in
            mean = channelStatistics(c.buffers[0]).mean
        })
        #expect(mean > 250)
    }

    @Test("the image is sharpest with the lens focused on the subject")
    func focusShowsInPixels() async throws {
        var o = SimulationOptions()
        o.subjectDistance = 0.5  // 2 dioptres
        var contrast: [Double: Double] = [:]
        for lens in [0.0, 1.0, 2.0, 3.5] {
            var last = 0.0
            // Start with the lens already there; skip the first frames' settling.
            _ = try await simulatedRun(.imx708, options: o, frames: 4, start: CameraControls(afMode: .manual, lensPosition: Dioptres(lens)), inspect: { c in
                let s = channelStatistics(c.buffers[0])
                last = s.sd / s.mean
            })
            contrast[lens] = last
        }
        #expect(contrast[2.0]! > contrast[1.0]! && contrast[2.0]! > contrast[3.5]!)
        #expect(contrast[1.0]! > contrast[0.0]!)
        #expect(contrast[2.0]! > 3 * contrast[0.0]!)
    }

    @Test("the lens slews at most 1.5 dioptres per algorithm run and reports the commanded value")
    func lensSlew() async throws {
        let start = CameraControls(afMode: .manual, lensPosition: Dioptres(0))
        let frames = try await simulatedRun(.imx708, frames: 20, start: start) { $0 == 4 ? CameraControls(lensPosition: Dioptres(12)) : .none }
        let positions = frames.map { $0.metadata.lensPosition!.value }
        for (a, b) in zip(positions, positions.dropFirst()) { #expect(abs(b - a) <= 1.5 + 1e-9) }
        // 0 to 12 takes 8 runs; the first move already shows on the frame that commanded it.
        let request = try #require(frames.firstIndex { $0.cookie == 4 })
        #expect(positions[request] == 1.5)
        #expect(positions[request + 7] == 12)
        #expect(positions[request + 6] < 12)
    }

    @Test("frame duration limits cut an exposure that does not fit, as the Pi does silently")
    func frameDurationLimitsClip() async throws {
        // Default limits end at 250 ms: a 500 ms exposure is shortened to fit.
        let frames = try await simulatedRun(.imx477, frames: 2, start: .manualExposure(.milliseconds(500), gain: Gain(1)))
        let e = frames[1].metadata.exposureTime!
        #expect(e < .milliseconds(250) && e > .milliseconds(248))
        // With limits that allow it, it is kept.
        var c = CameraControls.manualExposure(.milliseconds(500), gain: Gain(1))
        c.frameDurationLimits = .milliseconds(100)...(.milliseconds(600))
        let kept = try await simulatedRun(.imx477, frames: 2, start: c)
        #expect(abs((kept[1].metadata.exposureTime! - .milliseconds(500)).microsecondsValue) < 30)
    }
}
