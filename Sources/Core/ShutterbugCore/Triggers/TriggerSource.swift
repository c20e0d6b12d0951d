/// One request to capture, "exposed after this instant": a GPIO edge, a timelapse slot, a
/// signal, an API call, a simulated pattern.
public struct Trigger: Sendable, Hashable {
    /// On the camera's clock (CLOCK_MONOTONIC for libcamera and the real-time simulator; the
    /// virtual clock in virtual time): the capture's first frame begins exposing at or after it.
    public var instant: SensorTime
    /// Where it came from ("gpio GPIO17", "SIGUSR1", "simulated regular 200 ms").
    public var source: String
    /// Counts this source's triggers from 1, so a dropped one shows as a gap.
    public var sequence: UInt64

    public init(instant: SensorTime, source: String, sequence: UInt64) {
        self.instant = instant
        self.source = source
        self.sequence = sequence
    }
}

/// Something that asks for captures: an async sequence of triggers on the camera's clock. A
/// source reads on its own thread or task and never blocks the session.
public protocol TriggerSource: Sendable {
    /// A short name for messages ("gpio GPIO17").
    var name: String { get }
    /// The triggers, in order; the sequence ends when the source does.
    func triggers() -> AsyncStream<Trigger>
    /// Why the sequence ended on its own, when that was a failure (a GPIO chip that went away);
    /// `nil` while it runs, after `stop()`, and for a source that simply ran out.
    var failure: ShutterbugError? { get }
}

extension TriggerSource {
    public var failure: ShutterbugError? { nil }
}
