import ShutterbugCore
import SimulatedCamera
import Testing

/// CAMERA-FACTS §2: a request's sensor controls land max delay + 1 or + 2 frames after the
/// frame paired with it, never on that frame itself.
@Suite("Control landing on the simulated Pi pipeline", .timeLimit(.minutes(3)))
struct ControlLandingTests {
    // Gains 2 and 4: every profile's range covers them (IMX708 starts at 1.12).
    static let low = CameraControls.manualExposure(.milliseconds(5), gain: Gain(2))
    static let high = CameraControls.manualExposure(.milliseconds(20), gain: Gain(4))

    @Test("an exposure change lands exactly where the profile's delays predict",
          arguments: SensorProfile.catalogue, [SimulationOptions.Landing.early, .late])
    func predictedLanding(profile: SensorProfile, landing: SimulationOptions.Landing) async throws {
        var o = SimulationOptions()
        o.landing = landing
        let changeAt: UInt64 = 6
        let frames = try await simulatedRun(profile, options: o, frames: 30, start: Self.low) { $0 == changeAt ? Self.high : .none }
        let line = profile.mode(forWidth: 640, height: 480).lineTime
        let paired = try #require(frames.frame(ofRequest: changeAt))
        // The frame paired with the request still shows the old settings.
        #expect(reports(paired, exposure: .milliseconds(5), gain: 2, line: line))
        let landed = try #require(frames.firstFrame(from: paired.sequence) { reports($0, exposure: .milliseconds(20), gain: 4, line: line) })
        let offset = Int(landed.sequence) - Int(paired.sequence)
        let expected = landing == .early ? profile.delays.landingOffsets.lowerBound : profile.delays.landingOffsets.upperBound
        #expect(offset == expected, "\(profile.model) \(landing): landed \(offset) frames after the request's frame, expected \(expected)")
        // From then on every frame carries it.
        for f in frames where f.metadata.sequence >= landed.sequence {
            #expect(reports(f.metadata, exposure: .milliseconds(20), gain: 4, line: line))
        }
    }

    @Test("in random mode both landings occur and no other", arguments: SensorProfile.catalogue)
    func randomLanding(profile: SensorProfile) async throws {
        var o = SimulationOptions()
        o.landing = .random
        o.seed = 99
        // Alternate every 8 requests so each change has settled before the next.
        let plan: (UInt64) -> CameraControls = { c in c % 8 == 4 ? ((c / 8) % 2 == 0 ? Self.high : Self.low) : .none }
        let frames = try await simulatedRun(profile, options: o, frames: 400, start: Self.low, plan: plan)
        let line = profile.mode(forWidth: 640, height: 480).lineTime
        var offsets: [Int] = []
        for c in frames where c.cookie % 8 == 4 {
            let target = (c.cookie / 8) % 2 == 0 ? (Duration.milliseconds(20), 4.0) : (Duration.milliseconds(5), 2.0)
            guard let landed = frames.firstFrame(from: c.metadata.sequence, where: { reports($0, exposure: target.0, gain: target.1, line: line) }),
                  Int(landed.sequence) < Int(c.metadata.sequence) + 8 else { continue }
            offsets.append(Int(landed.sequence) - Int(c.metadata.sequence))
        }
        #expect(offsets.count >= 40)
        #expect(Set(offsets) == Set(profile.delays.landingOffsets), "\(profile.model): offsets seen \(Set(offsets).sorted())")
    }

    @Test("controls passed to start apply from the very first frame")
    func startControls() async throws {
        let frames = try await simulatedRun(.imx219, frames: 3, start: Self.high)
        let line = SensorProfile.imx219.mode(forWidth: 640, height: 480).lineTime
        #expect(frames.allSatisfy { reports($0.metadata, exposure: .milliseconds(20), gain: 4, line: line) })
    }

    @Test("above 30 fps the IPA skips frames, so settings can change only every few frames")
    func ipaRateLimit() async throws {
        // IMX477 1332x990 at 120 fps: the IPA runs on every 4th frame.
        let mode = SensorProfile.imx477.modes[2]
        let fast = CameraControls(frameDurationLimits: mode.minFramePeriod...mode.minFramePeriod)
        let alternate: (UInt64) -> CameraControls = { c in
            var x = c % 2 == 0 ? CameraControls.manualExposure(.milliseconds(2), gain: Gain(1)) : .manualExposure(.milliseconds(4), gain: Gain(1))
            x.frameDurationLimits = fast.frameDurationLimits
            return x
        }
        let stream = StreamRequest(role: .viewfinder, width: 1332, height: 990)
        var early = SimulationOptions()
        early.landing = .early
        let limited = try await simulatedRun(.imx477, options: early, stream: stream, frames: 120, start: fast, plan: alternate)
        var o = early
        o.ipaMinInterval = .zero
        let unlimited = try await simulatedRun(.imx477, options: o, stream: stream, frames: 120, start: fast, plan: alternate)
        func changes(_ f: [CompletedRequest]) -> Int {
            zip(f, f.dropFirst()).filter { $0.metadata.exposureTime != $1.metadata.exposureTime }.count
        }
        #expect(limited.allSatisfy { $0.metadata.frameDuration! <= mode.minFramePeriod + mode.lineTime })
        #expect(changes(limited) <= 120 / 4 + 1)
        #expect(changes(unlimited) >= 100)
    }

    @Test("under auto-exposure a new target is eased in over several frames; fully manual settings jump")
    func agcFilter() async throws {
        let line = SensorProfile.imx477.mode(forWidth: 640, height: 480).lineTime
        // Auto-exposure, then +1 EV: the AGC filter moves the total exposure a fifth of the way
        // per run, so it passes through intermediate values.
        let eased = try await simulatedRun(.imx477, frames: 40) { $0 == 9 ? CameraControls(exposureValue: 1) : .none }
        // From the first settled frame (the start-up frames converge from the default).
        let totals = eased.filter { $0.status == .complete }.map { $0.metadata.exposureTime!.secondsValue * $0.metadata.totalGain!.value }
        let distinct = Set(totals.map { ($0 * 1e5).rounded() })
        #expect(distinct.count >= 5, "total exposure should ease through intermediate values, saw \(distinct.sorted())")
        #expect(abs(totals.last! / totals.first! - 2) < 0.05, "+1 EV doubles the total exposure")
        let jumped = try await simulatedRun(.imx477, frames: 20, start: .manualExposure(.milliseconds(10), gain: Gain(1))) {
            $0 == 3 ? .manualExposure(.microseconds(2500), gain: Gain(4)) : .none
        }
        let values = Set(jumped.map { ($0.metadata.analogueGain!.value * 100).rounded() })
        #expect(values.count == 2, "both manual: old value then new, nothing between")
        #expect(jumped.contains { reports($0.metadata, exposure: .microseconds(2500), gain: 4, line: line) })
    }
}
