/// A camera Shutterbug can drive: libcamera's request model, in Swift.
///
/// The life of a camera: `configure` the streams, `allocate` buffers and request slots once,
/// `start` with controls that apply from the first frame, `queue` request slots (each carrying
/// its own controls and a cookie), read `completions`, re-queue the slots, `stop` (every queued
/// request comes back, cancelled, before it returns), and `release`.
///
/// Implementations: `LibcameraCamera` (the real stack, through the C bridge) and
/// `SimulatedCamera` (the Raspberry Pi pipeline modelled in-process). Both pass the same
/// conformance suite.
public protocol CameraBackend: AnyObject, Sendable {
    var info: CameraInfo { get }

    /// Now, on the clock of this camera's `SensorTimestamp`s: CLOCK_MONOTONIC for a real
    /// camera. A simulated camera in virtual time answers its virtual time, which stands still
    /// while no frame comes.
    var now: SensorTime { get }

    /// The clock the camera's frames are timed on, which outlives this run of the camera (a
    /// job waits on it between slots): CLOCK_MONOTONIC for a real camera.
    var clock: any CameraClock { get }

    /// What the camera can do beyond streaming: its sensor modes, whether this process can open
    /// it again, a trigger input.
    var capabilities: CameraCapabilities { get }

    /// Whether the camera's frames have no time of their own (a simulated camera in virtual
    /// time): it then takes a frame only while `allowFrames(true)` and once the consumer has
    /// dealt with the last completion, so a seeded run repeats exactly whatever the machine's
    /// speed. A real camera streams on its own clock and answers false.
    var pacesByDemand: Bool { get }

    /// The sensor exposes a frame only when its trigger input is pulsed (the IMX296 in
    /// `trigger_mode`): no frames come between triggers, so nothing may wait for them.
    var framesOnTriggerOnly: Bool { get }

    /// Lets frames happen, or holds them (with the requests left queued), on a camera that
    /// paces by demand; a real camera ignores it.
    func allowFrames(_ allowed: Bool)

    /// Virtual time: holds back every frame that would complete after `instant` (the earliest of
    /// every holder's instants holds), and lets the frames up to it happen meanwhile, wanted or
    /// not, as they would have on a sensor's own clock. Returns once the camera's next frame
    /// would complete after `instant` and its consumer has dealt with every frame before it
    /// (or the camera stopped, or the task was cancelled): the camera's clock has reached the
    /// instant, and nothing that happens after it has happened yet. A trigger fed at its instant
    /// then meets the camera as it would in real time. `nil` lifts the holder's hold.
    /// A real camera returns at once: its clock is not ours to hold.
    func holdFrames(_ holder: UInt64, until instant: SensorTime?) async

    /// As `holdFrames`, without waiting for the camera to reach the instant: a holder that
    /// pauses the camera's clock where it is (`.zero` holds every frame to come) while work
    /// that takes no time in real time is done. `nil` lifts it. A real camera ignores it.
    func setFrameHold(_ holder: UInt64, at instant: SensorTime?)

    /// The sensor, where Shutterbug knows it (the simulated profiles, and a libcamera camera
    /// whose model is one of them); `nil` for anything else (vimc).
    var sensorProfile: SensorProfile? { get }

    /// The sensor mode the last `configure` settled on, where known.
    var configuredMode: SensorMode? { get }

    /// The sensor mode the last `configure` settled on as the camera reports it (size, depth,
    /// frame-duration and exposure limits), for users; `nil` before configuration.
    var sensorModeReport: SensorModeReport? { get }

    /// The camera's timing in the configured mode: control landing, line time, limits. The
    /// one source for them (a known sensor's profile; otherwise what the camera reports,
    /// conservatively).
    var timing: CameraTiming { get }

    /// What the camera accepts, for validating settings before they are sent.
    var controlLimits: ControlLimits { get }

    /// Configures the streams. Requests the camera cannot meet exactly are adjusted and the
    /// adjustments returned; an impossible request throws `.invalidArgument`.
    func configure(_ streams: [StreamRequest]) throws -> CameraConfiguration

    /// Allocates every stream's buffers and one reusable request per buffer index; returns the
    /// number of request slots. Called once per configuration: capture never allocates.
    func allocate() throws -> Int

    /// The buffer of `stream` in request slot `slot`.
    func buffer(stream: Int, slot: Int) -> any FrameBuffer

    /// Starts streaming. `controls` apply from the very first frame. Returns the controls the
    /// camera does not support (left out, not failed).
    @discardableResult
    func start(controls: CameraControls) throws -> ControlSet

    /// Queues request slot `slot` with `controls` and `cookie`. Returns the controls the camera
    /// does not support. Throws `.busy` if the slot is already queued.
    @discardableResult
    func queue(slot: Int, cookie: UInt64, controls: CameraControls) throws -> ControlSet

    /// Completed requests, in completion order. One consumer at a time. The sequence stays
    /// open across stop and start; it ends when the camera is released, and throws
    /// `.cameraLost` after the last request if the camera went away.
    var completions: CompletionQueue { get }

    /// The thread that pushes to `completions`, as an executor, where the camera has one the
    /// consumer may run on (libcamera: the thread that hears its completion eventfd). A
    /// `CaptureSession` runs its actor there, so a frame wakes no other thread; `nil` (the
    /// default): the session runs on the cooperative pool.
    var executor: (any CameraEventLoop)? { get }

    /// Stops streaming. Every queued request is in `completions` (cancelled if unfilled) before
    /// this returns.
    func stop() throws

    /// Stops if needed, frees buffers and gives the camera back. The handle is unusable after:
    /// every call is refused (`.invalidState`, "has been released") without reaching the camera,
    /// from any thread (a session may still queue the completions this release's stop returned).
    func release()
}

extension CameraBackend {
    public var now: SensorTime { MonotonicClock.now() }
    public var clock: any CameraClock { MonotonicCameraClock.shared }
    public var capabilities: CameraCapabilities { CameraCapabilities() }
    public var sensorProfile: SensorProfile? { SensorProfile.named(info.model) }
    public var pacesByDemand: Bool { false }
    public var framesOnTriggerOnly: Bool { false }
    public func allowFrames(_ allowed: Bool) {}
    public func holdFrames(_ holder: UInt64, until instant: SensorTime?) async {}
    public func setFrameHold(_ holder: UInt64, at instant: SensorTime?) {}
    public var executor: (any CameraEventLoop)? { nil }
}
