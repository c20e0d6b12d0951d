import ArgumentParser
import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera

struct BenchTrigger: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trigger",
        abstract: "Shutter lag: trigger to exposure start, ours against the physical floor and the peers' policy, in one run.",
        discussion: """
            For each simulated profile, in real time on CLOCK_MONOTONIC (still stream, full \
            resolution, auto exposure): triggers at random phases of the frame clock, each \
            answered (1) as Shutterbug does, the camera streaming and the first frame exposed \
            after the trigger taken; (2) as rpicam-still does by default, the trigger noticed \
            when the next frame completes, then the camera stopped, reconfigured and started \
            again and the first settled frame taken. The floor is one frame period, the worst \
            case of a free-running sensor (mean half). The IMX296 is also run in \
            external-trigger mode, its exposure started by the pulse itself. The simulator's \
            stop and start cost nothing, where a Pi 5 with the HQ camera spends 0.2 to 0.4 s \
            in stop() alone (CAMERA-FACTS §5): the restart figures are a lower bound. Goal: \
            p99 of ours at most one frame period + 2 ms. With zero shutter lag (--zsl, the \
            session holding the newest 3 frames) the photo is the frame exposing at the \
            trigger: its lag to exposure start is at most zero, and to mid-exposure about \
            zero; the share of triggers that fell between two exposures (and took the next \
            frame) is shown.
            """)

    @Option(name: .long, help: "Triggers per profile with Shutterbug's policy (10...10000).")
    var triggers: Int = 40

    @Option(name: .long, help: "Triggers per profile with the restart policy (2...1000).")
    var restarts: Int = 8

    @Option(name: .long, help: ArgumentHelp("Profiles, comma-separated.", valueName: "sim:MODEL,..."))
    var cameras: String = SensorProfile.catalogue.map { "sim:\($0.model)" }.joined(separator: ",")

    @Option(name: .long, help: ArgumentHelp("Scene brightness (0.01...100000 lux): 400 meters to 1/100 s, 5 to exposures that fill most of each frame, where zero shutter lag covers most triggers.", valueName: "lux"))
    var sceneLux: Double = 400

    @Flag(name: .long, help: "One JSON object per row.")
    var json = false

    func validate() throws {
        guard (10...10_000).contains(triggers) else { throw ValidationError("--triggers must be in 10...10000, not \(triggers)") }
        guard (2...1000).contains(restarts) else { throw ValidationError("--restarts must be in 2...1000, not \(restarts)") }
        guard sceneLux.isFinite, (0.01...100_000).contains(sceneLux) else { throw ValidationError("--scene-lux must be in 0.01...100000, not \(sceneLux)") }
        _ = try profiles()
    }

    func profiles() throws -> [SensorProfile] {
        try cameras.split(separator: ",").map { id in
            guard id.hasPrefix("sim:"), let p = SensorProfile.named(String(id.dropFirst(4))) else {
                throw ValidationError("--cameras takes sim:MODEL ids from \(SensorProfile.catalogue.map { "sim:\($0.model)" }.joined(separator: ", ")), not '\(id)'")
            }
            return p
        }
    }

    func run() async throws {
        if !json {
            print("bench trigger: real time, still stream, scene \(String(format2: sceneLux)) lux; \(triggers) triggers per profile with ours and with zero shutter lag, \(restarts) with the restart policy")
            print("profile  sensor          period   | ours p50 / p99 / max (ms)      p99 ≤ period+2ms | restart policy p50 / p99 / max (ms) | restart/ours p50")
        }
        var zsl: [(SensorProfile, Figures, Figures)] = []
        for profile in try profiles() {
            let ours = try await streaming(profile, external: false)
            let restart = try await restarting(profile)
            report(profile, "free-running", ours, restart)
            zsl.append((profile, try await streaming(profile, external: false, zeroShutterLag: true), ours))
            if profile.externalTrigger != nil {
                let triggered = try await streaming(profile, external: true)
                report(profile, "external trigger", triggered, nil)
            }
        }
        if !json {
            print("")
            print("zero shutter lag (--zsl): lag from the trigger to the chosen frame's exposure start and mid-exposure, against exposed-after; photo in hand after the trigger")
            print("profile  period   | zsl start p50 / p99 / max (ms)  mid p50 / p99 (ms)  | exposed-after start p50 / p99 (ms)  mid p50 | in hand zsl / after p50 (ms) | covered | held: 3 frames, 500 ms (of a Pi 4's 512 MB CMA)")
        }
        for (profile, z, ours) in zsl { reportZSL(profile, z, ours) }
    }

    struct Figures {
        var lags: LagDistribution
        var period: Duration
        /// Trigger to mid-exposure (first row), and to the photo in hand.
        var mid: LagDistribution? = nil
        var inHand: LagDistribution? = nil
        /// Zero shutter lag: the share of photos whose exposure covered the trigger, and the
        /// bytes of one held frame (every stream).
        var covered: Double? = nil
        var frameBytes: Int? = nil
    }

    /// A session on a real-time simulated camera, started with the still stream.
    private func open(_ profile: SensorProfile, external: Bool, holding: HeldFrames = .none) async throws -> (CaptureSession, SimulatedCamera) {
        var o = SimulationOptions()
        o.clock = .realTime
        o.externalTrigger = external
        o.sceneLux = sceneLux
        let cam = SimulatedCamera(profile: profile, options: o)
        let session = CaptureSession(backend: cam)
        var controls: CameraControls?
        if external, let t = profile.externalTrigger {
            controls = CameraControls(aeEnabled: false, exposureTime: Self.pulseWidth + t.exposureOffset, analogueGain: Gain(1), awbEnabled: false,
                                      colourGains: profile.colour.gains(kelvin: o.illuminant))
        }
        try await session.start(stream: StreamRequest(role: .still), preparedBracketCount: 1, controls: controls, holding: holding)
        return (session, cam)
    }

    static let pulseWidth = Duration.milliseconds(5)

    /// A random phase of the frame clock: up to 1.5 frame periods from now.
    private func pause(_ period: Duration) async throws {
        try await Task.sleep(for: period * Double.random(in: 0.2...1.5))
    }

    /// Shutterbug: the camera keeps streaming; each trigger takes the first frame exposed after it.
    private func streaming(_ profile: SensorProfile, external: Bool, zeroShutterLag: Bool = false) async throws -> Figures {
        let (session, cam) = try await open(profile, external: external, holding: zeroShutterLag ? .frames(3) : .none)
        defer { cam.release() }
        var period = profile.fullResolution.minFramePeriod
        if !external {
            // Past the start-up frames, with the period auto exposure settled on.
            let first = try await photo(session.capture(PhotoSettings()))
            period = first.frameDuration ?? period
        }
        var lags: [Duration] = [], mids: [Duration] = [], inHand: [Duration] = []
        var covered = 0
        for _ in 0..<triggers {
            try await pause(period)
            let t = MonotonicClock.now()
            if external { try cam.pulse(at: t, width: Self.pulseWidth) }
            var zsl: ZeroShutterLag?
            let m = try await photo(session.capture(PhotoSettings(exposedAfter: t, zeroShutterLag: zeroShutterLag)), zeroShutterLag: &zsl)
            inHand.append(MonotonicClock.now() - t)
            lags.append(m.exposureStart! - t)
            mids.append(m.exposureStart! + m.exposureTime! / 2 - t)
            if zsl?.covered == true { covered += 1 }
            if !external { period = m.frameDuration ?? period }
        }
        let frameBytes = await session.configuration?.streams.reduce(0) { $0 + $1.frameSize }
        await session.stop()
        return Figures(lags: LagDistribution(lags)!, period: period, mid: LagDistribution(mids), inHand: LagDistribution(inHand),
                       covered: zeroShutterLag ? Double(covered) / Double(triggers) : nil, frameBytes: frameBytes)
    }

    /// rpicam-still's default: notice the trigger when a frame completes, stop, reconfigure,
    /// start, take the first settled frame.
    private func restarting(_ profile: SensorProfile) async throws -> Figures {
        var (session, cam) = try await open(profile, external: false)
        defer { cam.release() }
        let first = try await photo(session.capture(PhotoSettings()))
        var period = first.frameDuration ?? profile.fullResolution.minFramePeriod
        var lags: [Duration] = []
        for _ in 0..<restarts {
            try await pause(period)
            let t = MonotonicClock.now()
            // Polled when the next frame completes.
            let frames = await session.frames(buffering: 4)
            for await _ in frames { break }
            await session.stop()
            session = CaptureSession(backend: cam)
            try await session.start(stream: StreamRequest(role: .still), preparedBracketCount: 1)
            let m = try await photo(session.capture(PhotoSettings()))
            lags.append(m.exposureStart! - t)
            period = m.frameDuration ?? period
        }
        await session.stop()
        return Figures(lags: LagDistribution(lags)!, period: period)
    }

    private func photo(_ events: AsyncThrowingStream<CaptureEvent, any Error>) async throws -> FrameMetadata {
        var zsl: ZeroShutterLag?
        return try await photo(events, zeroShutterLag: &zsl)
    }

    private func photo(_ events: AsyncThrowingStream<CaptureEvent, any Error>, zeroShutterLag: inout ZeroShutterLag?) async throws -> FrameMetadata {
        var out: FrameMetadata?
        for try await e in events {
            if case .photo(let p) = e {
                out = p.metadata
                p.release()
            }
            if case .captureFinished(let r) = e { zeroShutterLag = r.zeroShutterLag }
        }
        guard let out else { throw ShutterbugError(.timeout, "the capture ended without a photo") }
        return out
    }

    private func ms(_ d: Duration) -> String { String(format2: d.microsecondsValue / 1000) }

    private func reportZSL(_ profile: SensorProfile, _ z: Figures, _ after: Figures) {
        if json {
            var o = JSONObject()
            o.add("profile", profile.model)
            o.add("sensor", "zero shutter lag")
            o.add("framePeriodUs", z.period.microsecondsValue)
            o.add("zslStartP50Us", z.lags.p50.microsecondsValue)
            o.add("zslStartP99Us", z.lags.p99.microsecondsValue)
            o.add("zslStartMaxUs", z.lags.max.microsecondsValue)
            o.add("zslMidP50Us", z.mid?.p50.microsecondsValue)
            o.add("zslMidP99Us", z.mid?.p99.microsecondsValue)
            o.add("afterStartP50Us", after.lags.p50.microsecondsValue)
            o.add("afterStartP99Us", after.lags.p99.microsecondsValue)
            o.add("afterMidP50Us", after.mid?.p50.microsecondsValue)
            o.add("zslInHandP50Us", z.inHand?.p50.microsecondsValue)
            o.add("afterInHandP50Us", after.inHand?.p50.microsecondsValue)
            o.add("covered", z.covered)
            o.add("heldFrameBytes", z.frameBytes)
            o.add("framesFor500ms", Int((Duration.milliseconds(500) / z.period).rounded(.up)))
            print(o.text)
            return
        }
        func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
        let zs = "\(ms(z.lags.p50)) / \(ms(z.lags.p99)) / \(ms(z.lags.max))"
        let zm = "\(z.mid.map { ms($0.p50) } ?? "-") / \(z.mid.map { ms($0.p99) } ?? "-")"
        let a = "\(ms(after.lags.p50)) / \(ms(after.lags.p99))"
        let hand = "\(z.inHand.map { ms($0.p50) } ?? "-") / \(after.inHand.map { ms($0.p50) } ?? "-")"
        let cov = z.covered.map { "\(Int(($0 * 100).rounded()))%" } ?? "-"
        let n500 = Int((Duration.milliseconds(500) / z.period).rounded(.up))
        let held = z.frameBytes.map { b in "\(MemoryBudget.megabytes(3 * b)), \(n500) frames \(MemoryBudget.megabytes(n500 * b)) (\(Int((Double(n500 * b) / Double(512 << 20) * 100).rounded()))%)" } ?? "-"
        print("\(pad(profile.model, 8)) \(pad(ms(z.period) + " ms", 8)) | \(pad(zs, 31)) \(pad(zm, 19)) | \(pad(a, 34)) \(pad(after.mid.map { ms($0.p50) } ?? "-", 7)) | \(pad(hand, 28)) | \(pad(cov, 7)) | \(held)")
    }

    private func report(_ profile: SensorProfile, _ sensor: String, _ ours: Figures, _ restart: Figures?) {
        let goal = ours.period + .milliseconds(2)
        let met = ours.lags.p99 <= goal
        if json {
            var o = JSONObject()
            o.add("profile", profile.model)
            o.add("sensor", sensor)
            o.add("framePeriodUs", ours.period.microsecondsValue)
            o.add("oursP50Us", ours.lags.p50.microsecondsValue)
            o.add("oursP99Us", ours.lags.p99.microsecondsValue)
            o.add("oursMaxUs", ours.lags.max.microsecondsValue)
            o.add("oursCount", ours.lags.count)
            o.add("goalP99Us", goal.microsecondsValue)
            o.add("goalMet", met)
            o.add("restartP50Us", restart?.lags.p50.microsecondsValue)
            o.add("restartP99Us", restart?.lags.p99.microsecondsValue)
            o.add("restartMaxUs", restart?.lags.max.microsecondsValue)
            o.add("restartOverOursP50", restart.map { $0.lags.p50 / max(ours.lags.p50, .microseconds(1)) })
            print(o.text)
            return
        }
        func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
        let r = restart.map { "\(ms($0.lags.p50)) / \(ms($0.lags.p99)) / \(ms($0.lags.max))" } ?? "-"
        let ratio = restart.map { String(format2: $0.lags.p50 / max(ours.lags.p50, .microseconds(1))) + "x" } ?? "-"
        print("\(pad(profile.model, 8)) \(pad(sensor, 16)) \(pad(ms(ours.period) + " ms", 9)) | \(pad("\(ms(ours.lags.p50)) / \(ms(ours.lags.p99)) / \(ms(ours.lags.max))", 30)) \(pad(met ? "yes" : "NO (\(ms(goal)) ms)", 16)) | \(pad(r, 36)) | \(ratio)")
    }
}
