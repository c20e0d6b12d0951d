import ShutterbugCore

/// One step of a capture as requested and as planned after adjustment to what the sensor can do.
public struct ResolvedStep: Sendable, Hashable {
    public var index: Int
    /// What was asked ("+2.0 EV", "1/250 s gain 2.00").
    public var requested: String
    /// What the sensor was asked for after adjustment.
    public var planned: StepTarget
    /// What the frame reports, once captured.
    public var actual: FrameMetadata?

    public init(index: Int, requested: String, planned: StepTarget, actual: FrameMetadata? = nil) {
        self.index = index
        self.requested = requested
        self.planned = planned
        self.actual = actual
    }
}

/// A frame that fell inside the capture but was not used, and why.
public struct DiscardedFrame: Sendable, Hashable {
    public var sequence: UInt32
    public var reason: String
    /// Everything the frame reported, when the frame itself was seen (not a gap).
    public var metadata: FrameMetadata?

    public init(sequence: UInt32, reason: String, metadata: FrameMetadata? = nil) {
        self.sequence = sequence
        self.reason = reason
        self.metadata = metadata
    }
}

/// The capture's settings as resolved: per-step plans and, at the end, the frames' own values.
/// AVFoundation's `AVCaptureResolvedPhotoSettings`.
public struct ResolvedPhotoSettings: Sendable, Hashable {
    public var uniqueID: Int64
    public var steps: [ResolvedStep]
    /// Settings changed to fit the sensor, one sentence each.
    public var adjustments: [String]
    public var discarded: [DiscardedFrame] = []
    public var retries: Int = 0
    /// For EV brackets: the metered exposure the biases apply to.
    public var meteredExposure: Duration?
    public var meteredGain: Double?
    /// Phase-locked captures: how the lock went (locked on which frame, or why not).
    public var phaseLock: String?
    /// Zero-shutter-lag captures: which frame was taken for the instant, and how.
    public var zeroShutterLag: ZeroShutterLag?
    /// A burst's step (0-based) that is the frame at the instant; the steps before it are
    /// frames from before.
    public var pivotStep: Int?

    public init(uniqueID: Int64, steps: [ResolvedStep], adjustments: [String]) {
        self.uniqueID = uniqueID
        self.steps = steps
        self.adjustments = adjustments
    }
}

/// How a zero-shutter-lag capture's frame was chosen for its instant.
public struct ZeroShutterLag: Sendable, Hashable {
    /// The instant asked for, on the camera's clock.
    public var instant: SensorTime
    /// The frame's exposure covered the instant; else the first frame exposed after it was
    /// taken, `fallback` saying why none covered it.
    public var covered: Bool
    public var fallback: String?
    /// Taken from the frames already held (it had come back before the capture was asked
    /// for), not waited for.
    public var fromHeldFrames: Bool

    public init(instant: SensorTime, covered: Bool, fallback: String? = nil, fromHeldFrames: Bool) {
        self.instant = instant
        self.covered = covered
        self.fallback = fallback
        self.fromHeldFrames = fromHeldFrames
    }
}
