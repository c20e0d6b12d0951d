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
///
/// Focus steps go one at a time (the lens moves at most 1.5 dioptres per IPA run and a later
/// request's position would overwrite an earlier one's before the lens got there): step i + 1 is
/// requested once step i's frame is in, and a step's frame is the first exposed after the lens
/// settled at its position (`LensSettle`), not merely the first that reports it.
///
/// Where the camera names the request whose controls took effect on each frame (the Raspberry
/// Pi fork's `rpi::ControlListSequence`), that name identifies the step, and the metadata must
/// still agree; elsewhere the metadata alone does.
///
/// Time is an input, never read: each completion and each `tick` carries `now`, so a stall
/// (no frame at all for `stallTimeout`) fails the bracket the same way under test as on a Pi.
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
        /// The camera says the frame carries this step's request, but its metadata disagrees.
        case controlsDisagree(step: Int)
        /// The frame began exposing before the trigger's instant.
        case beforeTrigger
        /// The frame matches the step but also the frame before it, inside the step's landing
        /// window: it may still carry what was in force before, so it cannot be proven the step's.
        case unproven(step: Int)

        /// The same reason, its step counted among `offset` steps before the scheduler's (a
        /// bracket whose step 1 was a held frame).
        public func offset(by offset: Int) -> DiscardReason {
            switch self {
            case .duplicate(let s): return .duplicate(step: s + offset)
            case .controlsDisagree(let s): return .controlsDisagree(step: s + offset)
            case .unproven(let s): return .unproven(step: s + offset)
            case .noStepMatches, .requestFailed, .beforeTrigger: return self
            }
        }

        public var description: String {
            switch self {
            case .noStepMatches: return "carries no pending step's settings"
            case .duplicate(let s): return "repeats step \(s + 1) (the next step's settings landed a frame later: on the Pi a request's exposure lands on one of two frames, which varies)"
            case .requestFailed: return "request failed"
            case .controlsDisagree(let s): return "reports step \(s + 1)'s request but not its settings"
            case .beforeTrigger: return "exposed before the trigger"
            case .unproven(let s): return "matches step \(s + 1) but so did the frame before it, inside the step's landing window: it may still carry the settings in force before, so it is not taken as the step's"
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

    /// A step's request; the last step's controls once more, unregistered (`hold`); then the
    /// settings in force before (`restore`).
    private enum Planned: Sendable { case step(Int), hold, restore }

    public let steps: [Step]
    public let restore: CameraControls
    public let timing: CameraTiming
    public let maxAttempts: Int
    /// No frame at all for this long fails the bracket.
    public let stallTimeout: Duration

    private var plan = Ring<Planned>(capacity: 16)
    public let notBefore: SensorTime?
    /// Focus brackets: one step in flight at a time.
    public let sequential: Bool
    private var settle: [LensSettle?]
    /// The step each outstanding request carries, by cookie.
    private var requested: [UInt64: Int] = [:]
    /// Per step: the frame window in which it may land (from its latest request), and its frame.
    private var window: [ClosedRange<Int64>?]
    private var delivered: [UInt32?]
    private var attempts: [Int]
    private var done = false
    /// libcamera request sequence → step, for cameras that report `ControlListSequence`.
    private var stepOfRequest: [UInt32: Int] = [:]
    /// When the last frame came back.
    private var lastProgress: SensorTime
    /// The last complete frame seen: a step's frame is proven by its change from it.
    private var previousFrame: (sequence: Int64, metadata: FrameMetadata)?
    private let firstStepPrerolled: Bool
    /// The step whose request went out last (what a hold repeats).
    private var lastSent: Int?

    /// - Parameters:
    ///   - now: the time the bracket starts, on the clock later `now`s come from.
    ///   - stallTimeout: default: 2 s or ten of the bracket's longest frames, whichever is more.
    /// - Parameter notBefore: a trigger's instant: no frame whose exposure began before it is
    ///   any step's photo.
    /// - Parameter firstStepPrerolled: the frames before the bracket carry the first step's
    ///   own controls (a phase lock's pre-roll): a frame like the one before it is the first
    ///   step's all the same, and the first from the instant on is taken.
    public init(steps: [Step], restore: CameraControls, timing: CameraTiming, maxAttempts: Int = 4, now: SensorTime, stallTimeout: Duration? = nil, notBefore: SensorTime? = nil,
                firstStepPrerolled: Bool = false) {
        self.notBefore = notBefore
        self.firstStepPrerolled = firstStepPrerolled
        precondition(!steps.isEmpty, "a bracket has at least one step")
        self.steps = steps
        self.restore = restore
        self.timing = timing
        self.maxAttempts = maxAttempts
        let longest = steps.map { timing.framePeriod(for: $0.target.exposure ?? .zero) }.max() ?? timing.minFramePeriod
        self.stallTimeout = stallTimeout ?? max(.seconds(2), longest * 10)
        lastProgress = now
        window = Array(repeating: nil, count: steps.count)
        delivered = Array(repeating: nil, count: steps.count)
        attempts = Array(repeating: 1, count: steps.count)
        sequential = steps.contains { $0.target.lens != nil }
        settle = Array(repeating: nil, count: steps.count)
        if sequential {
            plan.append(.step(0))
        } else {
            for i in steps.indices { plan.append(.step(i)) }
            plan.append(.hold)
            plan.append(.restore)
        }
    }

    public var isFinished: Bool { done }

    /// Whether requests are still planned (a focus bracket's restore is planned only once its
    /// last step is in): the session sends them after the capture completes.
    public var hasPlannedRequests: Bool { !plan.isEmpty }

    /// The controls for the next request going out, with its cookie. `nil`: nothing planned,
    /// send a filler that repeats what is in force.
    public mutating func controls(forRequest cookie: UInt64) -> CameraControls? {
        guard let next = plan.popFirst() else { return nil }
        switch next {
        case .step(let i):
            requested[cookie] = i
            lastSent = i
            return steps[i].controls
        case .hold:
            // The restore lands a frame after the last step, never on the frame after it: that
            // frame repeats the step, so the step is proven (at its latest landing) even when
            // the frame before it was lost, and a restore landing early cannot take its place.
            // Not a request for the step: its window stays its own request's.
            return lastSent.map { steps[$0].controls }
        case .restore:
            return restore
        }
    }

    /// Judges one completed request's frame; returns what to do about it.
    ///
    /// - Parameters:
    ///   - requestSequence: libcamera's `Request::sequence()` of the completed request, the
    ///     number `controlListSequence` refers to (when the camera reports one).
    ///   - now: when the frame came back.
    public mutating func complete(cookie: UInt64, requestSequence: UInt32? = nil, status: CompletedRequest.Status, metadata m: FrameMetadata, now: SensorTime) -> [Action] {
        guard !done else { return [] }
        lastProgress = max(lastProgress, now)
        var actions: [Action] = []
        let seq = Int64(m.sequence)
        if let i = requested.removeValue(forKey: cookie) {
            if let r = requestSequence { stepOfRequest[r] = i }
            // The frame paired with step i's request: its sensor controls land later.
            let period = timing.framePeriod(for: steps[i].target.exposure ?? .zero)
            let latest = Int64(timing.latestLanding(framePeriod: period))
            // Focus: the lens moves once per IPA run, then settles for up to two frames.
            let skip = latest - Int64(timing.landingOffsets.upperBound)
            let extra: Int64 = steps[i].target.lens != nil ? 2 + Int64(lensRuns(step: i)) * (1 + skip) : 0
            window[i] = (seq + Int64(timing.landingOffsets.lowerBound))...(seq + latest + extra)
            if let l = steps[i].target.lens { settle[i] = LensSettle(target: l) }
        }
        guard status == .complete else {
            if isInsideBracket(seq) { actions.append(.discard(sequence: m.sequence, reason: .requestFailed)) }
            actions += overdue(at: seq)
            return actions
        }

        // A frame exposed before the trigger is no step's, whatever it carries.
        let early = notBefore.map { !m.exposed(after: $0) } ?? false
        let open = early ? [] : steps.indices.filter { delivered[$0] == nil && (window[$0].map { seq >= $0.lowerBound } ?? false) }
        // Focus steps: each open one sees every frame once, to know when its lens settled.
        var settled = Set<Int>()
        for i in open where settle[i] != nil {
            if settle[i]!.observe(m, timing: timing) { settled.insert(i) }
        }
        // A frame carries step i provably when it matches the step and either comes at or after
        // the step's latest landing (its controls are in by then, whatever the camera's delay),
        // or differs from the frame before it (the change can only be the step's request
        // landing). A frame that matches the step and the frame before it alike, inside the
        // landing window, may still carry what was in force before (the AE's exposure within a
        // line of the step's): it is no step's, and a later one is waited for.
        func proven(_ i: Int) -> Bool {
            if i == 0 && firstStepPrerolled { return true }
            guard let w = window[i], seq < w.upperBound else { return true }
            guard let p = previousFrame, p.sequence == seq - 1 else { return false }
            return !carries(step: i, p.metadata)
        }
        func matches(_ i: Int) -> Bool { steps[i].target.lens != nil ? settled.contains(i) : carries(step: i, m) && proven(i) }
        if let named = m.controlListSequence {
            // The camera names the request whose controls this frame carries.
            if let i = stepOfRequest[UInt32(truncatingIfNeeded: named)] {
                if delivered[i] == nil && matches(i) {
                    delivered[i] = m.sequence
                    actions.append(.photo(step: i))
                    planNext(after: i)
                } else if delivered[i] == nil {
                    actions.append(.discard(sequence: m.sequence, reason: .controlsDisagree(step: i)))
                } else if isInsideBracket(seq) {
                    actions.append(.discard(sequence: m.sequence, reason: .duplicate(step: i)))
                }
            } else if isInsideBracket(seq) && !open.isEmpty {
                actions.append(.discard(sequence: m.sequence, reason: .noStepMatches))
            }
        } else if early {
            if isInsideBracket(seq) { actions.append(.discard(sequence: m.sequence, reason: .beforeTrigger)) }
        } else if let i = open.first(where: matches) {
            delivered[i] = m.sequence
            actions.append(.photo(step: i))
            planNext(after: i)
        } else if isInsideBracket(seq) {
            if let u = open.first(where: { steps[$0].target.lens == nil && carries(step: $0, m) }) {
                actions.append(.discard(sequence: m.sequence, reason: .unproven(step: u)))
            } else if let d = steps.indices.first(where: { delivered[$0] != nil && carries(step: $0, m) }) {
                actions.append(.discard(sequence: m.sequence, reason: .duplicate(step: d)))
            } else if !open.isEmpty {
                actions.append(.discard(sequence: m.sequence, reason: .noStepMatches))
            }
        }
        actions += overdue(at: seq)
        previousFrame = (seq, m)
        if delivered.allSatisfy({ $0 != nil }) {
            done = true
            actions.append(.finished)
        }
        return actions
    }

    /// Focus brackets: the next step goes out once this one is in; after the last, the restore.
    private mutating func planNext(after i: Int) {
        guard sequential else { return }
        if let next = steps.indices.first(where: { delivered[$0] == nil && window[$0] == nil && !requested.values.contains($0) }) {
            plan.append(.step(next))
        } else if delivered.allSatisfy({ $0 != nil }) {
            plan.append(.restore)
        }
    }

    /// Lets time pass without a frame: fails the bracket once none has come for `stallTimeout`.
    public mutating func tick(now: SensorTime) -> [Action] {
        guard !done, now - lastProgress > stallTimeout else { return [] }
        done = true
        let i = delivered.firstIndex { $0 == nil } ?? 0
        let waited = (now - lastProgress).secondsValue
        return [.failed(step: i, reason: "no frame came back for \((waited * 10).rounded() / 10) s (limit \(stallTimeout.secondsValue) s): the camera stalled before step \(i + 1) (\(steps[i].target)) was captured")]
    }

    /// Whether a frame falls between the earliest landing of the bracket and its last step.
    private func isInsideBracket(_ seq: Int64) -> Bool {
        guard let first = window.compactMap({ $0?.lowerBound }).min() else { return false }
        return seq >= first && delivered.contains(where: { $0 == nil })
    }

    /// Focus steps: the IPA runs the lens needs to reach the target from the previous step's
    /// position (for the first step, from wherever it may be: either end of 0...15 dioptres).
    private func lensRuns(step i: Int) -> Int {
        guard let target = steps[i].target.lens else { return 0 }
        let distance = i > 0 ? abs(target - (steps[i - 1].target.lens ?? target)) : max(target, 15 - target)
        return Int((distance / 1.5).rounded(.up))
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
            if !sequential, !rest.contains(where: { if case .restore = $0 { return true } else { return false } }) {
                plan.append(.hold)
                plan.append(.restore)
            }
            actions.append(.retry(step: i, attempt: attempts[i]))
        }
        return actions
    }
}
