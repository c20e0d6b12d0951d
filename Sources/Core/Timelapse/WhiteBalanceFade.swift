import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// White balance cross-faded from slot to slot: the camera's AWB keeps measuring between slots,
/// and each slot is taken with gains moved from the previous slot's towards the newest
/// measurement, damped and by at most `maxStep` (in stops of each gain), so a dusk, a cloud or a
/// camera restarted after an idle stop changes the colour gradually instead of in a jump. The
/// state is the gains last applied; the journal keeps it so a resumed job goes on from them.
public struct WhiteBalanceFade: Sendable, Hashable {
    /// The most either gain changes from one slot to the next, in stops (log2).
    public var maxStep: Double
    /// The fraction of the way to the measurement taken per slot, before the bound.
    public var damping: Double
    /// The gains the last slot was taken with; nil before the first.
    public private(set) var applied: ColourGains?

    public init(maxStep: Double, damping: Double = 0.5, applied: ColourGains? = nil) {
        self.maxStep = maxStep
        self.damping = damping
        self.applied = applied
    }

    /// The gains for the next slot, given what AWB measures now.
    public mutating func next(measured: ColourGains) -> ColourGains {
        guard let from = applied else {
            applied = measured
            return measured
        }
        func towards(_ a: Double, _ b: Double) -> Double {
            let step = max(-maxStep, min(maxStep, damping * log2(b / a)))
            return a * pow(2, step)
        }
        let gains = ColourGains(red: towards(from.red, measured.red), blue: towards(from.blue, measured.blue))
        applied = gains
        return gains
    }
}
