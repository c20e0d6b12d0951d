#if canImport(Glibc)
import Glibc
#endif

/// How the simulated camera behaves: the knobs of the Pi pipeline model and fault injection.
public struct SimulationOptions: Hashable, Sendable {
    /// Which of the two possible frames a request's sensor controls land on.
    public enum Landing: String, Hashable, Sendable, CaseIterable {
        /// Always max delay + 1 paired frames later.
        case early
        /// Always max delay + 2 paired frames later.
        case late
        /// Either, varying as on a real Pi: the IPA turns late at random and stays late until a
        /// frame where catching up loses nothing (see `SimulatedPipeline.schedule`).
        case random
    }

    /// How frames are paced.
    public enum Clock: String, Hashable, Sendable {
        /// Frames arrive at the sensor's pace on the monotonic clock (the CLI).
        case realTime = "real"
        /// Frames arrive as fast as the CPU allows; timestamps follow the sensor's timeline
        /// (tests, benchmarks). A request is never starved: consumer time counts as zero.
        case virtual
    }

    public var landing: Landing = .random
    /// Probability that a frame is dropped by the pipeline (a gap in sequence numbers).
    public var dropProbability: Double = 0
    /// The IPA skips its algorithms on frames closer than 90% of this (Raspberry Pi default
    /// 1/30 s), so a new exposure can start only every 2nd frame at 56 fps. Zero disables it.
    public var ipaMinInterval: Duration = .nanoseconds(33_333_333)
    public var seed: UInt64 = 1
    public var clock: Clock = .realTime
    /// Scene brightness in lux; 400 lux meters to 1/100 s at gain 1.0.
    public var sceneLux: Double = 400
    /// The scene's light over time, for timelapse ramps: lux at times since the camera
    /// started, interpolated on a log scale between points (and held past the last);
    /// `sceneLux` when nil.
    public var sceneSchedule: LuxSchedule?
    /// What the camera looks at.
    public var scene: Scene = .grating
    public enum Scene: String, Hashable, Sendable, CaseIterable {
        /// A grey sinusoidal grating whose contrast falls with defocus (focus and EV tests).
        case grating
        /// A 24-patch ColorChecker (published reference colours), lit by `illuminant`.
        case chart
    }
    /// The colour temperature of the light on the scene, in kelvin (D65 is 6504 K, a warm
    /// indoor lamp about 3000 K). The AWB finds it; the raw Bayer values follow it.
    public var illuminant: Double = 5000
    /// Illuminant temperatures accepted.
    public static let illuminantRange: ClosedRange<Double> = 2000...10000
    /// Subject distance in metres; the synthetic scene is sharp when the lens focuses there.
    public var subjectDistance: Double = 1.0
    /// Mechanical settle time of the focus motor after each move.
    public var lensSettleTime: Duration = .milliseconds(12)
    /// Most dioptres the lens moves per algorithm run (1.5 on the Pi, 2.0 with fast AF).
    public var lensMaxStep: Double = 1.5
    /// Report `rpi::ControlListSequence` (the Raspberry Pi fork's metadata naming the request
    /// whose sensor controls took effect on each frame), as a libcamera with that control
    /// does. Off by default: Debian's libcamera and upstream have no such control.
    public var reportsControlListSequence = false
    /// Frames after each start flagged as start-up frames while AE/AWB converge, as the
    /// Raspberry Pi pipeline does from libcamera 0.5.2 (six by default); 0 models the older
    /// versions, which dropped those frames instead of returning them.
    public var startupFrames = 6
    /// The board: a Pi 4 (Unicam delivers CSI-2 packed raw) or a Pi 5 (the PiSP front end
    /// delivers raw compressed, PISP_COMP1, unless uncompressed 16-bit is asked for).
    public var platform: Platform = .pi4
    public enum Platform: String, Sendable, CaseIterable { case pi4, pi5 }
    /// External-trigger mode (a sensor with `SensorProfile.externalTrigger`, as the IMX296
    /// with `trigger_mode=1`): the sensor does not free-run; each `SimulatedCamera.pulse`
    /// exposes one frame, from the pulse's start for its width plus the sensor's offset.
    public var externalTrigger = false
    /// Frames held for zero shutter lag beyond the buffers are given to the pool as recipes,
    /// rendered when first read (cheap, as the frames themselves are). Off, the pool copies
    /// their bytes, as it must a real camera's buffers (for tests of that path).
    public var snapshotCopies = true
    public var faults = Faults()

    public init() {}

    /// Faults to inject, for testing how the product copes.
    public struct Faults: Hashable, Sendable {
        /// Probability that a completed request reports a buffer error.
        public var requestErrorProbability: Double = 0
        /// At this sensor frame the pipeline goes silent for `stallDuration` (a timeout).
        public var stallAtFrame: UInt64?
        public var stallDuration: Duration = .seconds(2)
        /// At this sensor frame the camera disappears: queued requests come back cancelled and
        /// the completion sequence throws `.cameraLost`.
        public var disconnectAtFrame: UInt64?
        public init() {}
    }
}

/// Scene light over time: (seconds since start, lux) points, log-interpolated.
public struct LuxSchedule: Hashable, Sendable {
    public var points: [(seconds: Double, lux: Double)]
    /// Repeat the schedule with this period (a day), or hold the last value.
    public var period: Double?

    public init(points: [(seconds: Double, lux: Double)], period: Double? = nil) {
        self.points = points.sorted { $0.seconds < $1.seconds }
        self.period = period
    }

    /// Daylight to night and back over `period` seconds: `day` lux at 0, `night` lux at half
    /// the period, a raised-cosine in log lux between (a sunset and a sunrise).
    public static func dayNight(period: Double, day: Double = 100_000, night: Double = 0.01, steps: Int = 48) -> LuxSchedule {
        let points = (0...steps).map { i -> (Double, Double) in
            let t = period * Double(i) / Double(steps)
            let f = (1 - cos(2 * Double.pi * t / period)) / 2
            return (t, pow(10, log10(day) + (log10(night) - log10(day)) * f))
        }
        return LuxSchedule(points: points, period: period)
    }

    public func lux(at seconds: Double) -> Double {
        guard let first = points.first, let last = points.last else { return 400 }
        var t = seconds
        if let period, period > 0 { t = t.truncatingRemainder(dividingBy: period) }
        if t <= first.seconds { return first.lux }
        if t >= last.seconds { return last.lux }
        let i = points.firstIndex { $0.seconds > t }!
        let a = points[i - 1], b = points[i]
        let f = (t - a.seconds) / (b.seconds - a.seconds)
        return pow(10, log10(a.lux) + (log10(b.lux) - log10(a.lux)) * f)
    }

    public static func == (a: LuxSchedule, b: LuxSchedule) -> Bool {
        a.period == b.period && a.points.count == b.points.count && zip(a.points, b.points).allSatisfy { $0.seconds == $1.seconds && $0.lux == $1.lux }
    }

    public func hash(into h: inout Hasher) {
        h.combine(period)
        for p in points { h.combine(p.seconds); h.combine(p.lux) }
    }
}
