import ShutterbugCore

/// When the lens is really at a target, from the frames (CAMERA-FACTS §4): the reported
/// position is the commanded one and already shows on the frame that commanded the move, which
/// was exposed before it; the lens gets there after that frame's readout (when the IPA ran)
/// plus the motor's settle time. The first frame whose exposure begins after that carries the
/// position. The focus lock and focus bracket steps both judge by this.
public struct LensSettle: Sendable, Hashable {
    public let target: Double
    /// When the lens will have settled, once a frame first reported the target.
    private var settlesAt: SensorTime?

    public init(target: Double) { self.target = target }

    /// Feeds one completed frame; true when this frame was exposed with the lens settled at
    /// the target.
    public mutating func observe(_ m: FrameMetadata, timing: CameraTiming) -> Bool {
        guard StepTarget(lens: target).isCarried(by: m, lineTime: timing.lineTime), let ts = m.sensorTimestamp else {
            settlesAt = nil
            return false
        }
        guard let settles = settlesAt else {
            // The move was commanded when this frame went through the IPA: after its readout.
            settlesAt = ts + timing.readoutTime + .milliseconds(5) + timing.lensSettleTime
            return false
        }
        guard let start = m.exposureStart else { return false }
        return start >= settles
    }
}
