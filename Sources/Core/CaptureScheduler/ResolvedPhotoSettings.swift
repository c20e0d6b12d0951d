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

    public init(uniqueID: Int64, steps: [ResolvedStep], adjustments: [String]) {
        self.uniqueID = uniqueID
        self.steps = steps
        self.adjustments = adjustments
    }
}
