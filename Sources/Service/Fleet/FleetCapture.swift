import ShutterbugCore

/// Whether this node can start a frame's exposure at a wall instant a fleet capture names, and
/// at what instant on its camera's clock: the timelapse's phase lock at a wall instant received
/// over the network. Pure: the clocks, the lock's lead and the node's state are given.
public enum FleetCapturePlan {
    /// Why a node cannot take a fleet capture; each says so in its reply.
    public enum Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        /// The instant has passed, or comes before the phase lock's lead could run.
        case tooSoon(instant: WallClockTime, now: WallClockTime, lead: Duration)
        /// Further ahead than a node keeps a capture waiting.
        case tooFar(instant: WallClockTime, now: WallClockTime, limit: Duration)
        /// The camera is taking another capture or a slot then.
        case busy(String)
        /// The clock is not synchronised, or its error bound is past what the capture allows.
        case clock(ClockSync, allowed: Duration?)

        public var description: String {
            switch self {
            case .tooSoon(let at, let now, let lead):
                let ahead = Duration.nanoseconds(at.nanoseconds - now.nanoseconds)
                return at <= now
                    ? "the instant \(at) has passed (\(Duration.nanoseconds(now.nanoseconds - at.nanoseconds).millisecondsDescription) ago)"
                    : "the instant \(at) is \(ahead.millisecondsDescription) away, less than the phase lock's lead of \(lead.millisecondsDescription); ask for one at least that far ahead"
            case .tooFar(let at, let now, let limit):
                return "the instant \(at) is \(Duration.nanoseconds(at.nanoseconds - now.nanoseconds).millisecondsDescription) away, more than the \(limit.millisecondsDescription) a capture may wait"
            case .busy(let what):
                return "the camera is busy: \(what)"
            case .clock(let sync, let allowed):
                if !sync.synchronised { return "the clock is not synchronised: \(sync.note ?? sync.source.rawValue)" }
                let bound = sync.errorBoundNs.map { Duration.nanoseconds($0).preciseDescription } ?? "unknown"
                return "the clock's error bound (\(bound)) is past the \(allowed.map(\.preciseDescription) ?? "-") this capture allows"
            }
        }
    }

    /// The instant on the camera's clock at which a frame should start exposing, for a fleet
    /// capture at `instant` in wall time.
    ///
    /// - Parameters:
    ///   - now: the wall clock now.
    ///   - offset: wall time − camera time, sampled (or from the newest frame's `FrameWallClock`).
    ///   - lead: the least notice the phase lock needs (its lead frames at the first step's
    ///     period, and the time a command takes to arrive).
    ///   - limit: the furthest ahead a capture may be asked for.
    ///   - sync: the clock's synchronisation; an unsynchronised clock is refused unless
    ///     `requireSync` is false (a single node, or a test on one machine).
    ///   - maxError: refuse when chrony's error bound is larger (nil: any bound).
    ///   - busy: what the camera is doing then, if it cannot take the capture.
    public static func plan(at instant: WallClockTime, now: WallClockTime, offset: ClockOffset, lead: Duration, limit: Duration = .seconds(3600),
                            sync: ClockSync, requireSync: Bool = true, maxError: Duration? = nil, busy: String? = nil) -> Result<SensorTime, Refusal> {
        let ahead = Duration.nanoseconds(instant.nanoseconds - now.nanoseconds)
        if ahead < lead { return .failure(.tooSoon(instant: instant, now: now, lead: lead)) }
        if ahead > limit { return .failure(.tooFar(instant: instant, now: now, limit: limit)) }
        if requireSync {
            if !sync.synchronised { return .failure(.clock(sync, allowed: maxError)) }
            if let maxError, let bound = sync.errorBoundNs, bound > maxError.nanosecondsValue { return .failure(.clock(sync, allowed: maxError)) }
        }
        if let busy { return .failure(.busy(busy)) }
        return .success(instant - offset)
    }

    /// What a coordinator prints of the replies: the spread of the nodes' exposure starts in
    /// wall time (max − min), and the largest error bound a node reported, which the spread
    /// cannot show.
    public static func spread(_ starts: [WallClockTime]) -> Duration? {
        guard let lo = starts.min(), let hi = starts.max() else { return nil }
        return .nanoseconds(hi.nanoseconds - lo.nanoseconds)
    }
}
