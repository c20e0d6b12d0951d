import ShutterbugCore

/// The bracket state machine: which controls each outgoing request carries, and which step (if
/// any) each completed frame is, judged by the metadata the frame reports, never by request
/// order.
///
/// Requests go out back to back: step 1 … step N, then the restore controls, then fillers that
/// repeat what is in force. A step's frame is the first frame at or after its request's paired
/// frame + the earliest landing whose metadata carries the step's target. A step that has not
/// shown by the latest landing (dropped frame, a write overtaken by a later one) is requested
/// again; it is never attributed to a frame that does not carry it.
public struct BracketScheduler: Sendable {
    public struct Step: Sendable, Hashable {
        public var controls: CameraControls
        public var target: StepTarget
        public init(controls: CameraControls, target: StepTarget) {
            self.controls = controls
            self.target = target
        }
    }

    public enum DiscardReason: Sendable, Hashable, CustomStringConvertible {
        /// The frame carries none of the pending steps' settings (still changing, or a write
        /// that was overtaken).
        case noStepMatches
        /// The frame repeats a step that was already delivered.
        case duplicate(step: Int)
        /// The request completed with an error or was cancelled.
        case requestFailed

        public var description: String {
            switch self {
            case .noStepMatches: return "carries no pending step's settings"
            case .duplicate(let s): return "repeats step \(s + 1)"
            case .requestFailed: return "request failed"
            }
        }
    }

    public enum Action: Sendable, Hashable {
        /// This frame is step `step`'s photo.
        case photo(step: Int)
        /// This frame, inside the bracket, is not used.
        case discard(sequence: UInt32, reason: DiscardReason)
        /// Step `step` did not show in time; it has been requested again.
        case retry(step: Int, attempt: Int)
        /// Every step has its photo.
        case finished
        /// A step failed too often; the bracket cannot complete.
        case failed(step: Int, reason: String)
    }

    private enum Planned: Sendable { case step(Int), restore }

    public let steps: [Step]
    public let restore: CameraControls
    public let timing: CameraTiming
    public let maxAttempts: Int

    private var plan = Ring<Planned>(capacity: 16)
    /// The step each outstanding request carries, by cookie.
    private var requested: [UInt64: Int] = [:]
    /// Per step: the frame window in which it may land (from its latest request), and its frame.
    private var window: [ClosedRange<Int64>?]
    private var delivered: [UInt32?]
    private var attempts: [Int]
    private var done = false

    public init(steps: [Step], restore: CameraControls, timing: CameraTiming, maxAttempts: Int = 4) {
        precondition(!steps.isEmpty, "a bracket has at least one step")
        self.steps = steps
        self.restore = restore
        self.timing = timing
        self.maxAttempts = maxAttempts
        window = Array(repeating: nil, count: steps.count)
        delivered = Array(repeating: nil, count: steps.count)
        attempts = Array(repeating: 1, count: steps.count)
        for i in steps.indices { plan.append(.step(i)) }
        plan.append(.restore)
    }

    public var isFinished: Bool { done }

    /// The controls for the next request going out, with its cookie. `nil`: nothing planned,
    /// send a filler that repeats what is in force.
    public mutating func controls(forRequest cookie: UInt64) -> CameraControls? {
        guard let next = plan.popFirst() else { return nil }
        switch next {
        case .step(let i):
            requested[cookie] = i
            return steps[i].controls
        case .restore:
            return restore
        }
    }

    /// Judges one completed request's frame; returns what to do about it.
    public mutating func complete(cookie: UInt64, status: CompletedRequest.Status, metadata m: FrameMetadata) -> [Action] {
        guard !done else { return [] }
        var actions: [Action] = []
        let seq = Int64(m.sequence)
        if let i = requested.removeValue(forKey: cookie) {
            // The frame paired with step i's request: its sensor controls land later.
            let period = timing.framePeriod(for: steps[i].target.exposure ?? .zero)
            let latest = Int64(timing.latestLanding(framePeriod: period))
            // Focus needs the reported position, plus one frame for the exposure after the move.
            let extra: Int64 = steps[i].target.lens != nil ? 1 + Int64(lensRuns(step: i)) : 0
            window[i] = (seq + Int64(timing.landingOffsets.lowerBound))...(seq + latest + extra)
        }
        guard status == .complete else {
            if isInsideBracket(seq) { actions.append(.discard(sequence: m.sequence, reason: .requestFailed)) }
            actions += overdue(at: seq)
            return actions
        }

        let open = steps.indices.filter { delivered[$0] == nil && (window[$0].map { seq >= $0.lowerBound } ?? false) }
        if let i = open.first(where: { carries(step: $0, m) }) {
            delivered[i] = m.sequence
            actions.append(.photo(step: i))
        } else if isInsideBracket(seq) {
            if let d = steps.indices.first(where: { delivered[$0] != nil && carries(step: $0, m) }) {
                actions.append(.discard(sequence: m.sequence, reason: .duplicate(step: d)))
            } else if !open.isEmpty {
                actions.append(.discard(sequence: m.sequence, reason: .noStepMatches))
            }
        }
        actions += overdue(at: seq)
        if delivered.allSatisfy({ $0 != nil }) {
            done = true
            actions.append(.finished)
        }
        return actions
    }

    /// Whether a frame falls between the earliest landing of the bracket and its last step.
    private func isInsideBracket(_ seq: Int64) -> Bool {
        guard let first = window.compactMap({ $0?.lowerBound }).min() else { return false }
        return seq >= first && delivered.contains(where: { $0 == nil })
    }

    /// Focus steps: a target the lens reaches in several runs.
    private func lensRuns(step i: Int) -> Int {
        guard let target = steps[i].target.lens else { return 0 }
        let previous = i > 0 ? steps[i - 1].target.lens ?? target : target
        return Int((abs(target - previous) / 1.5).rounded(.up))
    }

    private func carries(step i: Int, _ m: FrameMetadata) -> Bool {
        steps[i].target.isCarried(by: m, lineTime: timing.lineTime)
    }

    /// Steps whose window has passed without their frame: request them again.
    private mutating func overdue(at seq: Int64) -> [Action] {
        var actions: [Action] = []
        for i in steps.indices where delivered[i] == nil {
            guard let w = window[i], seq > w.upperBound, !requested.values.contains(i) else { continue }
            window[i] = nil
            attempts[i] += 1
            if attempts[i] > maxAttempts {
                done = true
                return [.failed(step: i, reason: "step \(i + 1) (\(steps[i].target)) did not appear on any frame in \(maxAttempts) attempts")]
            }
            // Retried steps go out next, followed by the restore.
            var rest: [Planned] = []
            while let p = plan.popFirst() { rest.append(p) }
            plan.append(.step(i))
            for p in rest { plan.append(p) }
            if !rest.contains(where: { if case .restore = $0 { return true } else { return false } }) { plan.append(.restore) }
            actions.append(.retry(step: i, attempt: attempts[i]))
        }
        return actions
    }
}
