import ShutterbugCore

/// When a timelapse's slots fall: a grid on wall time (slot k at `anchor + k × interval`, the
/// anchor a multiple of the interval since the epoch, so a 30 s job shoots at :00 and :30), or
/// a list of wall times (slot k at `times[k]`), waited for on CLOCK_MONOTONIC (the camera's
/// clock).
///
/// A pure state machine: the caller passes the monotonic time and the current difference
/// between the wall clock and the monotonic one (`CLOCK_REALTIME - CLOCK_MONOTONIC`), and is
/// told what to do next. The rule for wall-clock steps (NTP, a date set by hand): slots stay
/// on the wall-clock grid. A step forward passes over slots, which are recorded as skipped
/// ("the wall clock jumped"), never fired in a burst; a step back makes the wait for the next
/// slot longer, and no slot is ever taken twice. A slot whose instant is more than `tolerance`
/// past (the camera was busy, the process was stopped) is skipped with how late it was.
public struct TimelapseSchedule: Sendable, Hashable {
    public struct Plan: Sendable, Hashable {
        /// The grid's interval; for a list of times, the shortest gap between two of them (what
        /// a slot's work must fit in).
        public var interval: Duration
        /// The first slot is the first grid instant (or listed time) at or after this wall time.
        public var start: WallClockTime
        /// No slot at or after this wall time.
        public var end: WallClockTime?
        /// At most this many slots (taken or skipped).
        public var count: Int?
        /// The slots' wall times, ascending, when the job lists them instead of a grid.
        public private(set) var times: [WallClockTime]?

        public init(interval: Duration, start: WallClockTime, end: WallClockTime? = nil, count: Int? = nil) {
            self.interval = interval
            self.start = start
            self.end = end
            self.count = count
        }

        /// Slots at the listed wall times (sorted, duplicates dropped); those before `start` are
        /// not in the plan. Its `interval` is the shortest gap between two (a day for one time).
        public init(times: [WallClockTime], start: WallClockTime, end: WallClockTime? = nil, count: Int? = nil) {
            let sorted = Array(Set(times)).sorted()
            let gaps = zip(sorted.dropFirst(), sorted).map { Duration.nanoseconds($0.nanoseconds - $1.nanoseconds) }
            self.init(interval: gaps.min() ?? .seconds(86_400), start: start, end: end, count: count)
            self.times = sorted.filter { $0 >= start }
        }

        public static let intervalRange: ClosedRange<Duration> = .milliseconds(100)...(.seconds(86_400 * 7))
        /// The most slots a list of times may hold.
        public static let maxTimes = 100_000
    }

    public enum Step: Sendable, Hashable {
        /// Wait until `instant` (monotonic), then take slot `index`, planned for `wall`.
        case take(index: Int, wall: WallClockTime, instant: SensorTime)
        /// Record the slot as skipped, and ask again.
        case skip(index: Int, wall: WallClockTime, reason: String)
        /// No slot is left.
        case finished
    }

    public let plan: Plan
    /// The grid's slot 0, in wall time.
    public let anchor: WallClockTime
    /// How late a slot may be taken.
    public let tolerance: Duration

    /// How late a slot may be taken for slots `interval` apart (a list's shortest gap): half
    /// of it, at most a second. The capture enforces it at exposure start.
    public static func tolerance(interval: Duration) -> Duration { min(interval / 2, .seconds(1)) }
    /// The next slot not yet taken or skipped.
    public private(set) var next: Int
    /// A change in the wall/monotonic difference beyond this is a wall-clock step.
    public static let jumpThreshold = Duration.milliseconds(500)
    private var lastOffset: Int64?

    /// - Parameters:
    ///   - resumeAfter: the last slot a previous run of the same job decided (taken or skipped):
    ///     numbering continues after it.
    ///   - anchor: the job's slot 0 from its first run, so a resumed job keeps its grid and its
    ///     numbering (default: the first grid instant at or after `plan.start`).
    public init(_ plan: Plan, resumeAfter: Int? = nil, anchor: WallClockTime? = nil) {
        self.plan = plan
        let i = plan.interval.nanosecondsValue
        let s = plan.start.nanoseconds
        if let times = plan.times {
            // A list keeps its own numbering: slot k is the k-th listed time.
            self.anchor = times.first ?? plan.start
        } else {
            self.anchor = anchor ?? WallClockTime(nanoseconds: (s / i + (s % i == 0 ? 0 : 1)) * i)
        }
        tolerance = Self.tolerance(interval: plan.interval)
        next = resumeAfter.map { $0 + 1 } ?? 0
    }

    /// The wall time of slot `k`.
    public func wall(of k: Int) -> WallClockTime {
        if let times = plan.times, !times.isEmpty {
            if k < times.count { return times[k] }
            // Past the list (asked for by a caller looking ahead): never a slot.
            return WallClockTime(nanoseconds: times[times.count - 1].nanoseconds + Int64(k - times.count + 1) * plan.interval.nanosecondsValue)
        }
        return WallClockTime(nanoseconds: anchor.nanoseconds + Int64(k) * plan.interval.nanosecondsValue)
    }

    /// Slots the plan has in all, if it is bounded.
    public var total: Int? {
        var n = plan.count
        if let times = plan.times { n = min(n ?? times.count, times.count) }
        if let end = plan.end, let times = plan.times {
            let byEnd = times.firstIndex { $0 >= end } ?? times.count
            n = min(n ?? byEnd, byEnd)
        } else if let end = plan.end {
            let byEnd = max(0, Int((end.nanoseconds - anchor.nanoseconds + plan.interval.nanosecondsValue - 1) / plan.interval.nanosecondsValue))
            n = min(n ?? byEnd, byEnd)
        }
        return n
    }

    /// What to do now. `clock`: wall time less the camera's clock, sampled now.
    /// Call `taken(_:)` after a `.take`; a `.skip` is already counted.
    public mutating func step(now: SensorTime, offset clock: ClockOffset) -> Step {
        let offset = clock.nanoseconds
        let jumped = lastOffset.map { abs($0 - offset) > Self.jumpThreshold.nanosecondsValue } ?? false
        let jump = lastOffset.map { offset - $0 } ?? 0
        lastOffset = offset
        if let total, next >= total { return .finished }
        let wall = self.wall(of: next)
        if let end = plan.end, wall >= end { return .finished }
        let instant = wall - clock
        if now - instant > tolerance {
            let k = next
            next += 1
            let late = now - instant
            let reason = jumped && jump > 0
                ? "the wall clock jumped forward by \(Duration.nanoseconds(jump).millisecondsDescription)"
                : "late by \(late.millisecondsDescription) (the slot may be taken up to \(tolerance.millisecondsDescription) late)"
            return .skip(index: k, wall: wall, reason: reason)
        }
        return .take(index: next, wall: wall, instant: instant)
    }

    /// Slot `index` was taken (or failed, which the caller records).
    public mutating func taken(_ index: Int) {
        next = max(next, index + 1)
    }
}
