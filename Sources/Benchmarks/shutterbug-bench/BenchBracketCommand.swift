import ArgumentParser
import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera

struct BenchBracket: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bracket",
        abstract: "Bracket speed against the physical floor, and against the peers' policy, in one run.",
        discussion: """
            For each profile, bracket size and drop setting, one manual bracket (exposures \
            0.5 ms × 2^i, full-resolution mode) is captured twice on the \
            simulated camera in virtual time (late landing, and random landing as on a real Pi): by Shutterbug's scheduler, and by the policy \
            peers use (change the settings, discard frames until the metadata matches, next \
            step). Printed: sensor frames from the first step to the last (goal N), and sensor \
            time from the capture call to the last step's frame over the floor: the pipeline \
            fill (requests in flight + earliest landing) plus Σ max(frame period, exposure + \
            margin) (goal ≤ 1.1).
            """)

    @Option(name: .long, help: "Seeds per configuration (figures are averaged).")
    var runs: Int = 5

    @Flag(name: .long, help: "One JSON object per row.")
    var json = false

    func validate() throws {
        guard (1...100).contains(runs) else { throw ValidationError("--runs must be in 1...100, not \(runs)") }
    }

    struct Outcome { var frames: Double; var ratio: Double }

    func run() async throws {
        if !json {
            print("bench bracket: \(runs) seeds each, virtual time; drops on = 5%")
            print("profile landing N  drops | scheduler: frames  time/floor | discard-until-match: frames  time/floor | speed-up")
        }
        for profile in [SensorProfile.imx219, .imx477, .imx708] {
            for landing in [SimulationOptions.Landing.late, .random] {
            for n in [3, 5, 9] {
                for drops in [0.0, 0.05] {
                    var ours = Outcome(frames: 0, ratio: 0), peer = Outcome(frames: 0, ratio: 0)
                    for seed in 0..<runs {
                        let a = try await scheduler(profile, landing: landing, n: n, drops: drops, seed: UInt64(seed + 1))
                        let b = try await discardUntilMatch(profile, landing: landing, n: n, drops: drops, seed: UInt64(seed + 1))
                        ours.frames += a.frames / Double(runs); ours.ratio += a.ratio / Double(runs)
                        peer.frames += b.frames / Double(runs); peer.ratio += b.ratio / Double(runs)
                    }
                    if json {
                        var o = JSONObject()
                        o.add("profile", profile.model); o.add("landing", landing.rawValue); o.add("n", n); o.add("drops", drops)
                        o.add("schedulerFrames", ours.frames); o.add("schedulerTimeOverFloor", ours.ratio)
                        o.add("peerFrames", peer.frames); o.add("peerTimeOverFloor", peer.ratio)
                        print(o.text)
                    } else {
                        print("\(profile.model)  \(landing.rawValue)\(landing == .late ? "  " : "") \(n)  \(drops > 0 ? "on " : "off") |        \(fmt(ours.frames, 5))       \(String(format2: ours.ratio)) |                  \(fmt(peer.frames, 5))       \(String(format2: peer.ratio)) |   \(String(format2: peer.ratio / ours.ratio))x")
                    }
                }
            }
            }
        }
    }

    private func fmt(_ v: Double, _ w: Int) -> String {
        let s = String(format2: v)
        return s.count >= w ? s : String(repeating: " ", count: w - s.count) + s
    }

    static func exposures(_ n: Int) -> [Duration] { (0..<n).map { .microseconds(500 << $0) } }

    private func camera(_ profile: SensorProfile, landing: SimulationOptions.Landing, drops: Double, seed: UInt64) -> SimulatedCamera {
        var o = SimulationOptions()
        o.clock = .virtual
        o.landing = landing
        o.dropProbability = drops
        o.seed = seed
        return SimulatedCamera(profile: profile, options: o)
    }

    /// The floor from `t0`'s frame to the last step: the fill (the requests already in flight
    /// pair first, then the earliest landing) at the running period, then each step's frame.
    private func floor(_ timing: CameraTiming, running: Duration, exposures: [Duration]) -> Duration {
        let fill = running * (CaptureSession.pipelineDepth + timing.landingOffsets.lowerBound)
        return exposures.reduce(fill) { $0 + timing.framePeriod(for: $1) }
    }

    private func scheduler(_ profile: SensorProfile, landing: SimulationOptions.Landing, n: Int, drops: Double, seed: UInt64) async throws -> Outcome {
        let cam = camera(profile, landing: landing, drops: drops, seed: seed)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        try await session.start(stream: StreamRequest(role: .still), preparedBracketCount: n)
        // Let the stream run in, then capture.
        _ = try await session.capture(PhotoSettings()).reduce(into: 0) { _, e in if case .photo(let p) = e { p.release() } }
        let start = await session.latestFrame!
        let gain = profile.analogueGainRange.lowerBound
        let exposures = Self.exposures(n)
        var seqs: [UInt32] = [], last: SensorTime?
        for try await e in await session.capture(PhotoSettings(bracket: .manualExposure(exposures.map { ($0, Gain(gain)) }))) {
            if case .photo(let p) = e {
                seqs.append(p.metadata.sequence)
                last = max(last ?? p.metadata.sensorTimestamp!, p.metadata.sensorTimestamp!)
                p.release()
            }
        }
        await session.stop()
        let timing = await session.timing
        let measured = last! - start.sensorTimestamp!
        let ratio = measured.secondsValue / floor(timing, running: start.frameDuration!, exposures: exposures).secondsValue
        return Outcome(frames: Double(seqs.max()! - seqs.min()! + 1), ratio: ratio)
    }

    /// The peers' policy: one step at a time, discarding frames until one reports the step.
    private func discardUntilMatch(_ profile: SensorProfile, landing: SimulationOptions.Landing, n: Int, drops: Double, seed: UInt64) async throws -> Outcome {
        let cam = camera(profile, landing: landing, drops: drops, seed: seed)
        defer { cam.release() }
        let config = try cam.configure([StreamRequest(role: .still, bufferCount: CaptureSession.pipelineDepth)])
        _ = config
        let timing = cam.timing
        let slots = try cam.allocate()
        try cam.start(controls: CameraControls(frameDurationLimits: timing.everyFramePeriod...(.milliseconds(250))))
        for s in 0..<slots { try cam.queue(slot: s, cookie: UInt64(s), controls: .none) }
        var cookie = UInt64(slots)
        // Run in as the scheduler does.
        var latest: FrameMetadata?
        for _ in 0..<8 {
            let c = try await cam.completions.next()!
            latest = c.metadata
            try cam.queue(slot: c.slot, cookie: cookie, controls: .none); cookie += 1
        }
        let start = latest!
        let gain = timing.gainRange.lowerBound
        let exposures = Self.exposures(n)
        var step = 0, sent = false
        var seqs: [UInt32] = [], last: SensorTime?
        func target(_ i: Int) -> StepTarget {
            StepTarget(exposure: timing.quantise(exposures[i]), gain: profile.gainModel.quantise(gain))
        }
        while step < n {
            let c = try await cam.completions.next()!
            if sent, c.status == .complete, target(step).isCarried(by: c.metadata, lineTime: timing.lineTime) {
                seqs.append(c.metadata.sequence)
                last = c.metadata.sensorTimestamp
                step += 1
                sent = false
            }
            var controls = CameraControls.none
            if !sent, step < n {
                let t = target(step)
                let fd = timing.framePeriod(for: t.exposure!)
                controls = .manualExposure(t.exposure!, gain: Gain(t.gain!))
                controls.frameDurationLimits = fd...fd
                sent = true
            }
            try cam.queue(slot: c.slot, cookie: cookie, controls: controls); cookie += 1
        }
        try cam.stop()
        let measured = last! - start.sensorTimestamp!
        let ratio = measured.secondsValue / floor(timing, running: start.frameDuration!, exposures: exposures).secondsValue
        return Outcome(frames: Double(seqs.max()! - seqs.min()! + 1), ratio: ratio)
    }
}
