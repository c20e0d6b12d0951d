import Synchronization
import ArgumentParser
import JobOptions
import LibcameraBackend
import ShutterbugCore
import ShutterbugPosix
import SimulatedCamera

#if canImport(Glibc)
import Glibc
#endif

/// Chooses and opens a camera: a libcamera id, or `sim:MODEL` with the simulation's knobs.
struct CameraOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Camera to use: a libcamera id from `shutterbug cameras`, or sim:MODEL for the simulated camera (sim:imx219, sim:imx477, sim:imx708, sim:imx296, sim:ov5647). Default: $SHUTTERBUG_CAMERA, else the first libcamera camera, else sim:imx477.",
        valueName: "id"))
    var camera: String?

    @Option(name: .long, help: ArgumentHelp("Simulated camera: which frame new sensor controls land on, early (max delay + 1), late (+ 2) or random, as on a real Pi.", valueName: "early|late|random"))
    var landing: String = "random"

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Simulated camera: probability (0...1) that the pipeline drops a frame.", valueName: "p"))
    var dropProbability: Double = 0

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Simulated camera: the IPA runs its algorithms at most this often (Raspberry Pi: 30 Hz); 0 turns the limit off.", valueName: "hz"))
    var ipaRate: Double = 30

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Simulated camera: random seed, for runs that replay exactly.", valueName: "n"))
    var seed: UInt64 = 1

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Simulated camera: scene brightness in lux (400 meters to 1/100 s at gain 1).", valueName: "lux"))
    var sceneLux: Double = 400

    @Option(name: .long, help: ArgumentHelp("Simulated camera: the scene's light over time, daynight:PERIOD (100,000 lux to 0.01 and back, e.g. daynight:24h) or SECONDS:LUX,... (log-interpolated).", valueName: "schedule"))
    var sceneSchedule: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Simulated camera: subject distance in metres (the scene is sharp when focused there).", valueName: "m"))
    var subjectDistance: Double = 1.0

    @Option(name: .long, help: ArgumentHelp("Simulated camera: the scene, grating (grey, for focus and exposure) or chart (a 24-patch ColorChecker with the published colours).", valueName: "grating|chart"))
    var scene: String = "grating"

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Simulated camera: the light on the scene, a colour temperature in kelvin (2000...10000) or d65 (6504 K), d50 (5003 K), warm (3000 K), tungsten (2856 K).", valueName: "K|name"))
    var illuminant: String = "5000"

    @Flag(name: .long, help: "Simulated camera: run in virtual time, as fast as the CPU allows, instead of real time.")
    var virtualTime = false

    @Flag(name: .long, help: "Simulated camera: report rpi::ControlListSequence (the request whose controls each frame carries), as the Raspberry Pi fork's newest libcamera does.")
    var controlListSequence = false

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Simulated camera: start-up frames flagged after start while AE/AWB converge, as libcamera 0.5.2 and later return them (0: an older libcamera, which drops them).", valueName: "n"))
    var startupFrames: Int = 6

    @Option(name: .long, help: ArgumentHelp("Simulated camera: the board, pi4 (CSI-2 packed raw) or pi5 (raw compressed as PISP_COMP1).", valueName: "board"))
    var platform: String = "pi4"

    @Flag(name: .long, help: "Simulated camera: external-trigger mode, as the Global Shutter camera (sim:imx296) with the driver's trigger_mode=1: no free-running frames, each trigger pulse exposes one.")
    var externalTrigger = false

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Simulated camera, fault injection: the camera disappears at this sensor frame after each start (as if unplugged).", valueName: "frame"))
    var faultDisconnectAt: UInt64?

    @Option(name: .long, help: ArgumentHelp("Simulated camera, fault injection: at this sensor frame the pipeline goes silent for SECONDS (a hung camera), e.g. 100:5.", valueName: "frame:seconds"))
    var faultStall: String?

    func validate() throws { _ = try simulationOptions() }

    /// The simulation options these flags describe.
    ///
    /// - Throws: `ValidationError` naming the accepted range.
    func simulationOptions(clock: SimulationOptions.Clock? = nil) throws -> SimulationOptions {
        var o = SimulationOptions()
        guard let l = SimulationOptions.Landing(rawValue: landing) else {
            throw ValidationError("--landing must be early, late or random, not '\(landing)'")
        }
        try NumericInput.check(dropProbability, "--drop-probability", in: 0...0.99)
        if ipaRate != 0 { try NumericInput.check(ipaRate, "--ipa-rate (0 turns the limit off)", in: 1...1000, unit: "Hz") }
        try NumericInput.check(sceneLux, "--scene-lux", in: 0.0001...200_000, unit: "lux")
        try NumericInput.check(subjectDistance, "--subject-distance", in: 0.05...100_000, unit: "m")
        o.landing = l
        o.dropProbability = dropProbability
        o.ipaMinInterval = ipaRate == 0 ? .zero : .seconds(exactly: 1 / ipaRate)
        o.seed = seed
        o.sceneLux = sceneLux
        o.subjectDistance = subjectDistance
        o.clock = clock ?? (virtualTime ? .virtual : .realTime)
        o.reportsControlListSequence = controlListSequence
        guard (0...100).contains(startupFrames) else { throw ValidationError("--startup-frames must be in 0...100, not \(startupFrames)") }
        o.startupFrames = startupFrames
        guard let p = SimulationOptions.Platform(rawValue: platform) else {
            throw ValidationError("--platform must be \(SimulationOptions.Platform.allCases.map(\.rawValue).joined(separator: " or ")), not '\(platform)'")
        }
        o.platform = p
        guard let sc = SimulationOptions.Scene(rawValue: scene) else {
            throw ValidationError("--scene must be \(SimulationOptions.Scene.allCases.map(\.rawValue).joined(separator: " or ")), not '\(scene)'")
        }
        o.scene = sc
        o.illuminant = try Self.kelvin(illuminant)
        o.externalTrigger = externalTrigger
        o.sceneSchedule = try sceneSchedule.map(Self.luxSchedule)
        if let f = faultDisconnectAt {
            guard f >= 10 else { throw ValidationError("--fault-disconnect-at must be a frame from 10 on, not \(f)") }
            o.faults.disconnectAtFrame = f
        }
        if let stall = faultStall {
            let p = stall.split(separator: ":")
            guard p.count == 2, let f = UInt64(p[0]), f >= 10, let secs = Double(p[1]), (0.1...3600).contains(secs) else {
                throw ValidationError("--fault-stall must be FRAME:SECONDS, the frame from 10 on and 0.1...3600 s, e.g. 100:5, not '\(stall)'")
            }
            o.faults.stallAtFrame = f
            o.faults.stallDuration = .seconds(exactly: secs)
        }
        return o
    }

    /// daynight:24h, or 0:100000,3600:10,7200:0.01.
    static func luxSchedule(_ text: String) throws -> LuxSchedule {
        let form = "--scene-schedule takes daynight:PERIOD (e.g. daynight:24h, daynight:600s) or SECONDS:LUX,... (e.g. 0:100000,3600:0.01)"
        if text.hasPrefix("daynight:") {
            let p = try NumericInput.period(String(text.dropFirst(9)), "--scene-schedule daynight", in: 1...(86_400 * 30))
            return .dayNight(period: p.secondsValue)
        }
        let points = try text.split(separator: ",").map { item -> (Double, Double) in
            let parts = item.split(separator: ":")
            guard parts.count == 2, let t = Double(parts[0]), let lux = Double(parts[1]), t >= 0, t.isFinite else {
                throw ValidationError("\(form), not '\(text)'")
            }
            try NumericInput.check(lux, "--scene-schedule lux", in: 0.0001...200_000, unit: "lux")
            return (t, lux)
        }
        guard !points.isEmpty else { throw ValidationError("\(form), not '\(text)'") }
        // Time only goes forward: a point at or before the one before it is a typing mistake.
        for (a, b) in zip(points, points.dropFirst()) where b.0 <= a.0 {
            throw ValidationError("--scene-schedule's times must increase: \(NumericInput.show(b.0)) s comes after \(NumericInput.show(a.0)) s in '\(text)'")
        }
        return LuxSchedule(points: points)
    }

    /// An illuminant by name or temperature.
    static func kelvin(_ text: String) throws -> Double {
        let named: [String: Double] = ["d65": 6504, "d50": 5003, "warm": 3000, "tungsten": 2856]
        if let k = named[text.lowercased()] { return k }
        let range = SimulationOptions.illuminantRange
        guard let k = Double(text.hasSuffix("K") || text.hasSuffix("k") ? String(text.dropLast()) : text) else {
            throw ValidationError("--illuminant must be a colour temperature in \(Int(range.lowerBound))...\(Int(range.upperBound)) K or one of d65, d50, warm, tungsten, not '\(text)'")
        }
        try NumericInput.check(k, "--illuminant", in: range, unit: "K")
        return k
    }

    /// Opens the chosen camera. Without a choice: the first libcamera camera, else the
    /// simulated IMX477, with a one-line notice on standard error.
    ///
    /// - Parameter virtualClock: for a simulated camera in virtual time, the job's clock, so
    ///   every camera the job opens goes on from where the last one got to.
    func open(clock: SimulationOptions.Clock? = nil, virtualClock: VirtualCameraClock? = nil) throws -> any CameraBackend {
        if let problem = MemoryBudget.environmentProblem() { notice(problem) }
        let chosen = camera ?? environment("SHUTTERBUG_CAMERA")
        if let id = chosen, id.hasPrefix("sim:") {
            return try openSimulated(model: String(id.dropFirst(4)), clock: clock, virtualClock: virtualClock)
        }
        if externalTrigger {
            throw ValidationError("--external-trigger is for the simulated camera (sim:imx296); a real Global Shutter camera is put in trigger mode by its driver (echo 1 > /sys/module/imx296/parameters/trigger_mode, as root) and then needs no option here")
        }
        let manager: LibcameraManager
        do {
            manager = try LibcameraManager.shared()
        } catch {
            if let id = chosen { throw ShutterbugError(.noSuchCamera, "cannot open '\(id)': \(error)") }
            notice("libcamera could not start (\(error)); using the simulated IMX477 (sim:imx477)")
            return try openSimulated(model: "imx477", clock: clock, virtualClock: virtualClock)
        }
        if let id = chosen { return try Self.acquire(id, manager) }
        if let first = manager.cameras.first { return try Self.acquire(first.id, manager) }
        // Once per process: a timelapse that stops and starts its camera says it once.
        if FallbackNotice.first() { notice("no camera attached; using the simulated IMX477 (sim:imx477). `shutterbug cameras` lists the others.") }
        return try openSimulated(model: "imx477", clock: clock, virtualClock: virtualClock)
    }

    /// Opens a libcamera camera; one held by another process is looked into: if a shutterbug
    /// service answers on this machine, the user is sent to it instead of fighting it.
    private static func acquire(_ id: String, _ manager: LibcameraManager) throws -> any CameraBackend {
        do {
            return try manager.open(id)
        } catch let e as ShutterbugError where e.code == .busy {
            let service = environment("SHUTTERBUG_SERVICE") ?? ServiceOptions.defaultURL
            guard ServiceProbe.answers(service) else { throw e }
            throw ShutterbugError(.busy, "\(e.message): the shutterbug service at \(service) holds it. Ask it instead (`shutterbug status`, `shutterbug capture --ev -2,0,2`), or stop it first (systemctl stop shutterbug)", errno: 16)
        }
    }

    private func openSimulated(model: String, clock: SimulationOptions.Clock?, virtualClock: VirtualCameraClock?) throws -> SimulatedCamera {
        guard let profile = SensorProfile.named(model) else {
            let known = SensorProfile.catalogue.map { "sim:\($0.model)" }.joined(separator: ", ")
            throw ShutterbugError(.noSuchCamera, "unknown simulated camera 'sim:\(model)'; choose one of \(known)")
        }
        do {
            return try SimulatedCamera(checking: profile, options: try simulationOptions(clock: clock), virtualClock: virtualClock)
        } catch let e as ShutterbugError where e.code == .invalidArgument {
            throw ValidationError("--external-trigger: \(e.message)")
        }
    }
}

func environment(_ name: String) -> String? {
    guard let v = getenv(name) else { return nil }
    let s = String(cString: v)
    return s.isEmpty ? nil : s
}

/// A line for a person, on standard error so standard output stays machine-readable.
func notice(_ message: String) {
    var line = "shutterbug: " + message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Whether the simulated-camera fallback has been announced in this process.
enum FallbackNotice {
    private static let said = Mutex(false)
    static func first() -> Bool { said.withLock { s in defer { s = true }; return !s } }
}
