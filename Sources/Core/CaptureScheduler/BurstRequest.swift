import ShutterbugCore

/// Pre-capture as a user asks for it: the frames before a trigger and after it, each a count
/// or a time window (`--pre 500ms --post 250ms`). A window becomes frames at a frame rate: the
/// session's buffers are sized for the mode's fastest (the most frames a window can take), and
/// each trigger's burst is counted at the rate the camera runs at when it comes (a camera
/// slowed by auto exposure in a dim scene makes fewer frames in the same window): `window /
/// period` frames, rounded up. The trigger's own frame began at or before the instant and
/// ended after it, so the frames before it, one period apart, reach back at least the window,
/// and those after it reach at least the window forward: the burst spans the time asked for,
/// not a count meant for another rate.
public struct BurstRequest: Sendable, Hashable, CustomStringConvertible {
    /// A side of the burst: a count of frames, or a time window.
    public enum Span: Sendable, Hashable, CustomStringConvertible {
        case frames(Int)
        case window(Duration)

        /// The frames this span takes at one frame per `period` (a window: the frames that start
        /// within it, rounded up).
        public func frames(period: Duration) -> Int {
            switch self {
            case .frames(let n): return n
            case .window(let w):
                guard period > .zero else { return 1 }
                return Int((w / period).rounded(.up))
            }
        }

        public var window: Duration? {
            if case .window(let w) = self { return w }
            return nil
        }

        public var description: String {
            switch self {
            case .frames(let n): return "\(n) frame\(n == 1 ? "" : "s")"
            case .window(let w): return w.millisecondsDescription
            }
        }
    }

    public var before: Span
    public var after: Span

    public init(before: Span, after: Span) {
        self.before = before
        self.after = after
    }

    /// Frames held beyond those before the trigger, so that the frame at a trigger heard up to
    /// two frames late is still held when the burst asks for it.
    public static let heldMargin = 2

    /// The frames the session holds for this burst: those before, and `heldMargin` more.
    public var held: HeldFrames {
        switch before {
        case .frames(let n): return HeldFrames(frames: n + Self.heldMargin)
        case .window(let w): return HeldFrames(window: w, margin: Self.heldMargin)
        }
    }

    /// Whether a side is a window, which only the mode's frame rate turns into frames.
    public var hasWindow: Bool { before.window != nil || after.window != nil }

    /// The largest burst: counted at the mode's fastest frame period, as the buffers are sized.
    public func largest(fastest: Duration) -> PhotoSettings.Burst {
        PhotoSettings.Burst(before: before.frames(period: fastest), after: after.frames(period: fastest))
    }

    /// A trigger's burst when the camera makes a frame every `period`: each window counted at
    /// that rate, never more than the largest (the buffers held for it), at least one frame a
    /// side that asked for any.
    public func burst(period: Duration, fastest: Duration) -> PhotoSettings.Burst {
        let most = largest(fastest: fastest)
        let rate = max(period, fastest)
        func count(_ s: Span, _ cap: Int) -> Int {
            switch s {
            case .frames(let n): return n
            case .window: return min(cap, max(1, s.frames(period: rate)))
            }
        }
        return PhotoSettings.Burst(before: count(before, most.before), after: count(after, most.after))
    }

    /// Refuses a burst whose largest form (at the mode's fastest `period`) does not fit the 32
    /// photos a session holds at once or the 32 frames it may hold, naming the frames.
    public func check(fastest period: Duration) throws {
        let b = largest(fastest: period)
        let at = hasWindow ? " at this mode's fastest frame period, \(period.millisecondsDescription)" : ""
        guard b.count <= 32 else {
            throw ShutterbugError(.invalidArgument, "pre-capture of \(before) before and \(after) after takes \(b.count) frames (\(b.before) before, the trigger's, \(b.after) after)\(at); at most 32 are held at once: ask for shorter windows or fewer frames")
        }
        let h = held.count(period: period)
        guard BufferPlan.ringRange.contains(h) else {
            throw ShutterbugError(.invalidArgument, "pre-capture of \(before) before holds \(h) frames\(at); at most \(BufferPlan.ringRange.upperBound) are held: ask for a shorter window or fewer frames")
        }
    }

    public var description: String { "\(before) before, \(after) after" }
}
