import ShutterbugCore

/// Phase locking: plans the frames before an instant so that one frame's exposure begins at
/// it, within a line time, although a request's sensor controls land one frame early or late
/// at random (CAMERA-FACTS §2).
///
/// A free-running sensor's first frame exposed after an instant begins anywhere up to a frame
/// period after it. Here the frames before the instant (the pre-roll) repeat the first step's
/// own controls, so they all last the same period F. Once a pre-roll frame k is seen, the
/// exposure starts ahead are known: s(k + n) = s(k) + n·F. One request stretches one frame by
/// δ = (instant - s(k)) mod F, which moves every later start onto the instant's phase. The
/// frames on either side of the stretched one last F as well, so however its request lands,
/// early or late, it moves by a whole period and the phase stays. The bracket then takes over
/// on the request whose earliest landing is the frame m that starts at the instant: m carries
/// the first step's controls already (the pre-roll's), so it is the first step's photo, and
/// the next steps follow on the next frames.
///
/// If the pre-roll starts too late for this, the lock says so (`note`) and hands over as an
/// unlocked capture would: the first frame exposed after the instant.
///
/// Whether a request's controls land early or late is a state of the pipeline, not a coin per
/// request: a write queued behind a late one is late too, and the pipeline catches up only
/// where that hides nothing (a write repeating the one before it, or a frame without an IPA
/// run). A pre-roll that repeated the first step's controls let it wander at random, and the
/// bracket's second step then landed a frame late about half the time, leaving a repeat of
/// the first step between them. So no two pre-roll requests in a row carry the same controls:
/// they cycle through exposures a few lines from the first step's at its frame period (the
/// `variants`; the frames' timing is the same), the phase cannot slip back behind the lock's
/// back, and each pre-roll frame's exposure names the request that landed on it. The landing
/// offset so observed decides which request carries the first step, so the bracket's steps
/// follow the target frame on consecutive frames however the requests land.
///
/// Time is an input: each request carries its expected pairing and each frame its metadata.
public struct PhaseLock: Sendable {
    public enum Request: Sendable, Equatable {
        /// Not yet: the request repeats what is in force.
        case filler
        /// A pre-roll request with these controls.
        case preroll(CameraControls)
        /// The bracket takes over from this request on.
        case handOver
    }

    public let instant: SensorTime
    /// The first step: the pre-roll repeats its controls.
    public let step: BracketScheduler.Step
    public let timing: CameraTiming
    /// Requests in flight ahead of a new one (the session's pipeline depth).
    public let depth: Int

    private enum State: Sendable {
        /// Fillers until the instant is near enough.
        case waiting
        /// Pre-roll requests out; no pre-roll frame seen yet.
        case prerolling
        /// The phase is off: the next request stretches one frame by `stretch`, so that frame
        /// `target` starts at the instant.
        case correcting(target: Int64, stretch: Duration)
        /// Pre-roll until the hand-over to the bracket. Frames from `settledFrom` on carry no
        /// stretch request's controls any more: the phase they show is final, and if it is
        /// off (a stretch landed on two frames), it is corrected again while there is time.
        case locked(target: Int64, settledFrom: Int64)
        /// Too late to lock: hand over once requests land on frames exposed after the instant.
        case unlocked
        case handedOver
    }

    private var state: State = .waiting
    /// The pre-roll's frame duration, as the frames report it.
    private var gridPeriod: Duration?
    /// The newest pre-roll frame at that period: sequence and exposure start.
    private var grid: (sequence: Int64, start: SensorTime)?
    /// Requests out with their predicted pairing, to learn how far the prediction is off.
    private var predicted: [UInt64: Int64] = [:]
    /// Actual pairing minus predicted, from the newest pre-roll request that came back.
    public private(set) var pairingBias: Int64 = 0
    /// The frame planned to start at the instant, once known.
    public private(set) var targetFrame: Int64?
    /// Stretches sent (a second one corrects a first that landed on two frames).
    public private(set) var corrections = 0
    /// The most stretches one lock sends.
    public static let maxCorrections = 3
    /// How the lock went where it did not go to plan, one sentence, for the capture's report.
    public private(set) var note: String?
    /// The pre-roll's exposures, cycled so that no request repeats the one before it: as many
    /// as a frame has requests it may carry (the landing window's width), so a frame's
    /// exposure names its request. Empty where the frame period leaves no room for them (the
    /// pre-roll then repeats the first step's controls).
    public let variants: [Duration]
    /// The variant each pre-roll request out carries, by cookie.
    private var variantOfRequest: [UInt64: Int] = [:]
    /// Pre-roll requests that came back: the frame each was paired with and its variant.
    private var pairedVariants: [(frame: Int64, variant: Int)] = []
    private var lastVariant = -1
    /// Frames from a request's paired frame to the frame its controls landed on, as last seen.
    public private(set) var landingOffset: Int64?

    public init(instant: SensorTime, step: BracketScheduler.Step, timing: CameraTiming, depth: Int) {
        self.instant = instant
        self.step = step
        self.timing = timing
        self.depth = depth
        variants = Self.variants(of: step, timing: timing)
    }

    /// Exposures a few lines apart from the first step's (at least four lines, the metadata's
    /// tolerance being one, and a sixteenth of it: under 0.1 EV, so a preview barely flickers),
    /// above it where the frame period leaves room, else below.
    static func variants(of step: BracketScheduler.Step, timing: CameraTiming) -> [Duration] {
        guard let e = step.target.exposure else { return [] }
        let count = max(2, timing.landingOffsets.count)
        let period = step.controls.frameDurationLimits?.lowerBound ?? timing.framePeriod(for: e)
        let d = Duration.microseconds((max(timing.lineTime * 4, e / 16).nanosecondsValue + 999) / 1_000)
        if e + d * count <= period - timing.margin, e + d * count <= timing.exposureRange.upperBound {
            return (1...count).map { e + d * $0 }
        }
        if e - d * count >= max(timing.exposureRange.lowerBound, timing.lineTime) {
            return (1...count).map { e - d * $0 }
        }
        return []
    }

    /// A pre-roll request: the next variant (or the step's own exposure where there is none),
    /// at the pre-roll's period or `frameDuration`.
    private mutating func preroll(cookie: UInt64, frameDuration: Duration? = nil) -> Request {
        var c = step.controls
        if !variants.isEmpty {
            lastVariant = (lastVariant + 1) % variants.count
            c.exposureTime = variants[lastVariant]
            variantOfRequest[cookie] = lastVariant
        }
        if let frameDuration { c.frameDurationLimits = frameDuration...frameDuration }
        return .preroll(c)
    }

    /// The variant whose exposure a frame carries, if any.
    private func variant(carriedBy m: FrameMetadata) -> Int? {
        variants.indices.first { i in
            var t = step.target
            t.exposure = variants[i]
            return t.isCarried(by: m, lineTime: timing.lineTime)
        }
    }

    /// The period of every pre-roll frame: what the first step's controls ask for.
    public var period: Duration {
        step.controls.frameDurationLimits?.lowerBound ?? timing.framePeriod(for: step.target.exposure ?? .zero)
    }

    /// Frames from the first pre-roll request to the frame that starts at the instant, for
    /// two rounds of correction: the pre-roll's landing, then per round one pipeline of
    /// requests before the stretch goes out and the stretch's landing, and a spare frame each.
    public var leadFrames: Int { 3 * timing.landingOffsets.upperBound + 2 * depth + 4 }

    public var isHandedOver: Bool { if case .handedOver = state { return true } else { return false } }

    /// What the request going out now (with `cookie`, expected to pair with frame `pairing`)
    /// carries. `newest` is the newest frame's metadata, for estimating times before the
    /// pre-roll's own frames are seen.
    public mutating func request(cookie: UInt64, pairing rawPairing: Int64, newest: FrameMetadata?) -> Request {
        let pairing = rawPairing + pairingBias
        let lo = Int64(timing.landingOffsets.lowerBound), hi = Int64(timing.landingOffsets.upperBound)
        switch state {
        case .handedOver:
            return .handOver
        case .waiting:
            // Start once the instant is within the lead, estimated from the newest frame at
            // the slower of its period and the pre-roll's.
            guard let m = newest, let start = m.exposureStart else { return .filler }
            let current = m.frameDuration ?? timing.everyFramePeriod
            let pace = max(current, period)
            let startOfPaired = start + current * Int(max(0, pairing - Int64(m.sequence)))
            guard instant - startOfPaired <= pace * leadFrames else { return .filler }
            state = .prerolling
            predicted[cookie] = rawPairing
            return preroll(cookie: cookie)
        case .prerolling:
            predicted[cookie] = rawPairing
            return preroll(cookie: cookie)
        case .correcting(let target, let stretch):
            guard pairing + hi <= target, let gridPeriod else {
                if let previous = targetFrame {
                    // A second round that no longer fits: the first round's target stands.
                    note = "the phase was off after a stretch and there was no time to correct it"
                    state = .locked(target: previous, settledFrom: .max)
                } else {
                    note = "not locked: the pre-roll began too late for the stretch to land before the instant"
                    state = .unlocked
                }
                return request(cookie: cookie, pairing: rawPairing, newest: newest)
            }
            targetFrame = target
            predicted[cookie] = rawPairing
            guard stretch > .zero else {
                state = .locked(target: target, settledFrom: .max)
                return preroll(cookie: cookie)
            }
            corrections += 1
            state = .locked(target: target, settledFrom: pairing + hi + 1)
            // The sensor makes frames of whole lines: the stretched frame is the fewest lines
            // that reach the instant (so it starts at it or under a line after, never before),
            // asked for in whole microseconds (libcamera's unit) that round up to those lines.
            let line = timing.lineTime.nanosecondsValue
            let lines = ((gridPeriod + stretch).nanosecondsValue + line - 1) / line
            return preroll(cookie: cookie, frameDuration: .microseconds(lines * line / 1_000))
        case .locked(let target, _):
            // The first step goes out on the request that lands on the target as requests
            // land now (the earliest landing until a pre-roll frame has shown it).
            let offset = landingOffset ?? lo
            if pairing + offset < target {
                predicted[cookie] = rawPairing
                // A late phase lasts (only a repeated write or a frame without an IPA run lets
                // the pipeline catch up), but an early one can turn late at any write: a
                // request that may yet land on the target carries the first step, so the
                // target has it either way (landing early, it is a frame before the instant,
                // which no step takes).
                if pairing + hi >= target { return .preroll(step.controls) }
                return preroll(cookie: cookie)
            }
            if pairing + offset > target { note = "the bracket took over \(pairing + offset - target) frame(s) late" }
            state = .handedOver
            return .handOver
        case .unlocked:
            // As an unlocked capture: once the earliest landing is exposed after the instant.
            if let g = grid, let gridPeriod, g.start + gridPeriod * Int(max(0, pairing + lo - g.sequence)) < instant {
                predicted[cookie] = rawPairing
                return preroll(cookie: cookie)
            }
            state = .handedOver
            return .handOver
        }
    }

    /// The lock's outcome once the first step's photo is in: where its exposure began, and
    /// the plan's note where it went wrong.
    public func report(firstStart: SensorTime?, instant: SensorTime) -> String {
        let planned = targetFrame.map { "frame \($0)" } ?? "no frame"
        guard let firstStart else { return note ?? "no photo" }
        let error = firstStart - instant
        let rounds = corrections == 1 ? "1 stretch" : "\(corrections) stretches"
        if error >= .zero && error <= timing.lineTime { return "locked: \(planned) exposed \(error.preciseDescription) after the instant (\(rounds))" }
        return "\(note ?? "planned \(planned)"); exposed \(error.preciseDescription) after the instant (\(rounds))"
    }

    /// A frame came back (with the request `cookie` it was paired with).
    public mutating func observe(cookie: UInt64, status: CompletedRequest.Status, metadata m: FrameMetadata) {
        if let p = predicted.removeValue(forKey: cookie) { pairingBias = Int64(m.sequence) - p }
        if let v = variantOfRequest.removeValue(forKey: cookie) {
            if pairedVariants.count == 16 { pairedVariants.removeFirst() }
            pairedVariants.append((Int64(m.sequence), v))
        }
        let seq = Int64(m.sequence)
        guard status == .complete, let readout = m.sensorTimestamp, let exposure = m.exposureTime, let fd = m.frameDuration else { return }
        let carried = variant(carriedBy: m)
        guard carried != nil || step.target.isCarried(by: m, lineTime: timing.lineTime) else { return }
        // Where the first step's exposure would begin on this frame: a variant's exposure is a
        // few lines longer or shorter, and the frame's readout is what the grid keeps.
        let start = readout - (step.target.exposure ?? exposure)
        if let v = carried {
            // The request whose controls this frame carries: its landing offset is the
            // pipeline's now.
            let window = Int64(timing.landingOffsets.lowerBound)...Int64(timing.landingOffsets.upperBound)
            let candidates = pairedVariants.filter { $0.variant == v && window.contains(seq - $0.frame) }
            if candidates.count == 1 { landingOffset = seq - candidates[0].frame}
        }
        let line = timing.lineTime.nanosecondsValue
        // A pre-roll frame at the pre-roll's period (not a stretched one).
        guard abs((fd - (gridPeriod ?? period)).nanosecondsValue) <= line else { return }
        if gridPeriod == nil { gridPeriod = fd }
        grid = (seq, start)
        switch state {
        case .prerolling:
            plan(from: seq, start: start, period: fd)
        case .locked(let target, let settledFrom) where seq >= settledFrom && seq < target:
            // The stretch is behind this frame: the phase it shows is final. Off by more than
            // a line (the stretch landed on two frames), plan another while there is time.
            let error = start + fd * Int(target - seq) - instant
            if error < .zero || error > timing.lineTime, corrections < Self.maxCorrections {
                plan(from: seq, start: start, period: fd)
            }
        default:
            break
        }
    }

    /// The grid from frame `seq` on: the last frame starting at or before the instant is the
    /// target, and one frame before it is stretched by the remainder.
    private mutating func plan(from seq: Int64, start: SensorTime, period fd: Duration) {
        let ahead = instant - start
        let n = ahead.nanosecondsValue / fd.nanosecondsValue
        guard n >= 1 else {
            if targetFrame == nil {
                state = .unlocked
                note = "not locked: the pre-roll began too late (the instant was under a frame away)"
            }
            return
        }
        state = .correcting(target: seq + n, stretch: ahead - fd * Int(n))
    }
}

