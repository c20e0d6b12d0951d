import CameraConformance
import ShutterbugCore
import SimulatedCamera
import Testing

/// The simulated camera passes the same conformance suite as libcamera, in virtual and real time.
@Suite("Simulated camera conformance", .timeLimit(.minutes(3)))
struct SimulatedConformanceTests {
    static func suite(_ clock: SimulationOptions.Clock, profile: SensorProfile = .imx477) -> CameraConformance {
        CameraConformance(
            stream: StreamRequest(role: .viewfinder, width: 640, height: 480),
            unsupportedControl: profile.hasFocusMotor ? nil : CameraControls(afMode: .manual, lensPosition: Dioptres(2)),
            content: { c in
                // The synthetic scene: a visible grating around the metered mid-grey.
                let s = channelStatistics(c.buffers[0])
                if s.mean < 20 || s.mean > 235 { return "mean level \(s.mean) is not a metered scene" }
                if s.sd / s.mean < 0.1 { return "no grating visible (contrast \(s.sd / s.mean))" }
                return nil
            }
        ) {
            var o = SimulationOptions()
            o.clock = clock
            o.seed = 42
            return SimulatedCamera(profile: profile, options: o)
        }
    }

    @Test("configure reports what it settled on and flags adjustments", arguments: [SimulationOptions.Clock.virtual, .realTime])
    func configure(clock: SimulationOptions.Clock) throws { try Self.suite(clock).configureReportsAdjustments() }

    @Test("buffers are allocated once and readable")
    func buffers() throws { try Self.suite(.virtual).allocatesReadableBuffers() }

    @Test("captures 200 frames with request reuse, each cookie once", arguments: [SimulationOptions.Clock.virtual])
    func capture(clock: SimulationOptions.Clock) async throws { try await Self.suite(clock).capturesWithRequestReuse(frames: 200) }

    @Test("captures in real time too")
    func captureRealTime() async throws { try await Self.suite(.realTime, profile: .imx219).capturesWithRequestReuse(frames: 12) }

    @Test("stop returns every queued request before it returns", arguments: [SimulationOptions.Clock.virtual, .realTime])
    func stop(clock: SimulationOptions.Clock) async throws { try await Self.suite(clock).stopReturnsEveryRequest() }

    @Test("queue from one thread races stop from another: every request back once", arguments: [SimulationOptions.Clock.virtual, .realTime])
    func queueRacesStop(clock: SimulationOptions.Clock) async throws { try await Self.suite(clock).queueRacesStop() }

    @Test("restarts after stop")
    func restart() async throws { try await Self.suite(.virtual).restartsAfterStop() }

    @Test("rejects a slot queued twice or while stopped")
    func misuse() throws { try Self.suite(.realTime).rejectsMisuse() }

    @Test("reports unsupported controls")
    func unsupported() async throws { try await Self.suite(.virtual).reportsUnsupportedControls() }

    @Test("a released camera can be acquired again")
    func reacquire() async throws { try await Self.suite(.virtual).reacquiresAfterRelease() }

    @Test("release ends the completion sequence")
    func release() async throws { try await Self.suite(.virtual).releaseEndsTheSequence() }

    @Test("queue from another thread races release: refused, never reaching the camera given back", arguments: [SimulationOptions.Clock.virtual, .realTime])
    func queueRacesRelease(clock: SimulationOptions.Clock) async throws { try await Self.suite(clock).queueRacesRelease(rounds: 10) }
}
