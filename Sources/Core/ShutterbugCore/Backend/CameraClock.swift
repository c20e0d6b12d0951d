import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// CLOCK_MONOTONIC, the clock of `SensorTimestamp` and of GPIO edge events: read (never
/// waited on) here, injected everywhere else through a `CameraClock`.
public enum MonotonicClock {
    public static func now() -> SensorTime {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return SensorTime(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }
}

/// The clock a camera's frames are timed on, which outlives any one run of the camera: what a
/// job waits on between slots, and what "now" means for its deadlines and trigger instants.
///
/// A real camera's is CLOCK_MONOTONIC (`MonotonicCameraClock`). A simulated camera in virtual
/// time has a `VirtualCameraClock`: it moves as the camera's frames complete and, while no
/// camera is running, only when told to (`sleep(until:)` passes at once). One is made where
/// the command line or the service is composed and given to every camera opened for that job
/// (a reopened camera goes on from where the last one got to); nothing about it is global, so
/// two jobs or two tests in one process never move each other's time.
public protocol CameraClock: AnyObject, Sendable {
    /// Now, on the clock of the camera's `SensorTimestamp`s.
    var now: SensorTime { get }

    /// Lets time pass to `deadline` with no camera running: a real clock sleeps (in steps of
    /// at most a second, returning early once `stop()` says so or the task is cancelled), a
    /// virtual one jumps there.
    func sleep(until deadline: SensorTime, stop: @Sendable () -> Bool) async

    /// The clock moved to `t` (a frame completed at `t`); never moves it back.
    func advance(to t: SensorTime)
}

/// CLOCK_MONOTONIC: the clock of a real camera's `SensorTimestamp` and of GPIO edge events.
public final class MonotonicCameraClock: CameraClock {
    public static let shared = MonotonicCameraClock()

    public init() {}

    public var now: SensorTime { MonotonicClock.now() }

    public func sleep(until deadline: SensorTime, stop: @Sendable () -> Bool) async {
        while !stop() {
            let left = deadline - now
            guard left > .zero else { return }
            // A cancelled task's sleep throws at once: return rather than spin to the deadline.
            do { try await Task.sleep(for: min(.seconds(1), left)) } catch { return }
        }
    }

    /// A real clock moves by itself.
    public func advance(to t: SensorTime) {}
}

/// Virtual time: as far as the frames of the cameras given it have got, or as far as it was
/// told to pass, whichever is later; it starts at CLOCK_MONOTONIC and never goes back.
public final class VirtualCameraClock: CameraClock {
    private let reached: Atomic<Int64>

    public init(start: SensorTime = MonotonicClock.now()) {
        reached = Atomic(start.nanoseconds)
    }

    public var now: SensorTime { SensorTime(nanoseconds: reached.load(ordering: .acquiring)) }

    public func sleep(until deadline: SensorTime, stop: @Sendable () -> Bool) async {
        advance(to: deadline)
    }

    public func advance(to t: SensorTime) {
        reached.max(t.nanoseconds, ordering: .acquiringAndReleasing)
    }
}

/// What a camera can do beyond streaming, for the code that composes a command or a service
/// (instead of asking which implementation it holds).
public struct CameraCapabilities: Sendable {
    /// The sensor's modes as the pipeline would choose among them, where the camera lists them.
    public var sensorModes: [SensorModeReport]
    /// Whether this process can open the camera again after it failed or went away. libcamera
    /// cannot (a pipeline without hotplug keeps the camera registered, and registering it again
    /// is fatal in its camera manager): a job then exits so a new process resumes it.
    public var reopensInProcess: Bool
    /// The sensor's trigger input, where it is in external-trigger mode (the IMX296's XTR).
    public var externalTrigger: (any ExternalTriggerInput)?

    public init(sensorModes: [SensorModeReport] = [], reopensInProcess: Bool = false, externalTrigger: (any ExternalTriggerInput)? = nil) {
        self.sensorModes = sensorModes
        self.reopensInProcess = reopensInProcess
        self.externalTrigger = externalTrigger
    }
}

/// A sensor's trigger input: each pulse exposes one frame from its start, for its width plus
/// the sensor's fixed offset (the IMX296 in `trigger_mode=1`).
public protocol ExternalTriggerInput: AnyObject, Sendable {
    /// The sensor the input belongs to (its exposure range and trigger offset).
    var triggeredSensor: SensorProfile { get }
    /// Sends a pulse starting at `start`, `width` wide; false when the sensor ignored it (a
    /// pulse during readout).
    func pulse(at start: SensorTime, width: Duration) throws -> Bool
    /// Pulses the sensor ignored so far.
    var pulsesIgnored: Int { get }
    /// The colour gains a fixed white balance starts with: with no free-running frames, the
    /// AWB has nothing to converge on.
    var startColourGains: ColourGains { get }
}
