import ShutterbugCore

/// How a session's buffers are shared out, worked out before anything is allocated: every
/// stream gets the largest bracket's photos, the pipeline's depth (`RequestFeeder
/// .pipelineDepth`, always in flight so the sensor never starves) and what the frame sinks may
/// hold; a bracket may then hold whatever the camera allocated beyond the pipeline and the
/// sinks.
public struct BufferPlan: Sendable, Hashable {
    /// The largest bracket the session is prepared for.
    public let bracketCount: Int
    /// Buffers per stream that the sinks may hold between them.
    public let sinkBuffers: Int
    /// Buffers per stream held for zero shutter lag (the newest frames, in place).
    public let ringFrames: Int
    /// The most of them held in the camera's buffers, where the budget holds fewer than all
    /// (`fittingInPlace`); the rest are copies in the pool. Nil: all, as far as the camera
    /// allocates buffers.
    public var ringInPlaceLimit: Int?

    /// The most frames a zero-shutter-lag ring may hold.
    public static let ringRange = 0...32

    /// - Throws: `.invalidArgument` for a bracket outside 1...32, frames per sink outside
    ///   1...8 or ring frames outside 0...32.
    public init(bracketCount: Int, sinks: Int, framesPerSink: Int, ringFrames: Int = 0) throws {
        guard (1...32).contains(bracketCount) else {
            throw ShutterbugError(.invalidArgument, "prepared bracket count must be in 1...32, not \(bracketCount)")
        }
        guard (1...8).contains(framesPerSink) else {
            throw ShutterbugError(.invalidArgument, "frames per sink must be in 1...8, not \(framesPerSink)")
        }
        guard Self.ringRange.contains(ringFrames) else {
            throw ShutterbugError(.invalidArgument, "frames held for zero shutter lag must be in \(Self.ringRange), not \(ringFrames)")
        }
        self.bracketCount = bracketCount
        self.sinkBuffers = sinks * framesPerSink
        self.ringFrames = ringFrames
    }

    /// A plan holding `held` frames for zero shutter lag, and the frames and photos for the
    /// largest of `bursts` besides the bracket, windows counted at one frame per `period` (the mode's fastest; nil before the
    /// mode is known: one frame stands in for a window).
    ///
    /// - Throws: as `init(bracketCount:sinks:framesPerSink:ringFrames:)`, and for a window that
    ///   takes more than 32 frames, naming them.
    public init(bracketCount: Int, sinks: Int, framesPerSink: Int, holding held: HeldFrames, bursts: [BurstRequest] = [], period: Duration?) throws {
        let fastest = period ?? .seconds(1_000_000)
        if let period { for b in bursts { try b.check(fastest: period) } }
        let held = bursts.reduce(held) { $0.union($1.held) }
        let n = held.count(period: fastest)
        if let period, !Self.ringRange.contains(n) {
            throw ShutterbugError(.invalidArgument, "holding \(held) of frames takes \(n) at this mode's fastest frame period, \(period.millisecondsDescription); at most \(Self.ringRange.upperBound) are held: ask for a shorter window or a count")
        }
        let photos = bursts.reduce(bracketCount) { max($0, $1.largest(fastest: fastest).count) }
        try self.init(bracketCount: photos, sinks: sinks, framesPerSink: framesPerSink, ringFrames: n)
    }

    /// The buffers each stream asks for.
    public var buffersPerStream: Int { bracketCount + RequestFeeder.pipelineDepth + sinkBuffers + min(ringFrames, ringInPlaceLimit ?? ringFrames) }

    /// The most frames held in place that keep `config`'s buffers (a frame of every stream per
    /// slot) within `budget`, beside the photos, the pipeline and the sinks; nil when not even
    /// those fit.
    public func fittingInPlace(_ config: CameraConfiguration, within budget: MemoryBudget) -> Int? {
        let perSlot = config.streams.reduce(0) { $0 + $1.frameSize }
        guard perSlot > 0 else { return nil }
        let n = budget.bytes / perSlot - RequestFeeder.pipelineDepth - sinkBuffers - bracketCount
        return n >= 0 ? min(n, ringFrames) : nil
    }

    /// The streams, each asking for `buffersPerStream`.
    public func requests(_ streams: [StreamRequest]) -> [StreamRequest] {
        streams.map { r in
            var s = r
            s.bufferCount = buffersPerStream
            return s
        }
    }

    /// Of the frames held for zero shutter lag, those the camera's buffers can spare once it
    /// allocated `slots` per stream (it may allocate fewer than asked): what is left beside
    /// the bracket's photos, the pipeline and the sinks. The rest are copied into a pool.
    public func ringInPlace(slots: Int) -> Int { max(0, min(ringFrames, ringInPlaceLimit ?? ringFrames, slots - RequestFeeder.pipelineDepth - sinkBuffers - bracketCount)) }

    /// Frames held as copies in the pool, once the camera allocated `slots` per stream.
    public func ringPooled(slots: Int) -> Int { ringFrames - ringInPlace(slots: slots) }

    /// The pool's bytes for a configuration: a copy of every stream's frame per pooled frame.
    public func poolBytes(_ config: CameraConfiguration) -> Int {
        guard let slots = config.streams.map(\.bufferCount).min() else { return 0 }
        return ringPooled(slots: slots) * config.streams.reduce(0) { $0 + $1.frameSize }
    }

    /// Refuses a configuration whose buffers would take more than `budget` (the camera's: a
    /// Pi 4's CMA pool), or whose copies of the frames held beyond them more than `pool`
    /// (process memory), naming the bytes of each and what to ask for instead.
    public func check(_ config: CameraConfiguration, within budget: MemoryBudget, pool poolBudget: MemoryBudget? = nil) throws {
        let pool = poolBytes(config)
        if pool > 0, let poolBudget, pool > poolBudget.bytes {
            let slots = config.streams.map(\.bufferCount).min() ?? 0
            throw ShutterbugError(.invalidArgument, "holding \(ringFrames) frames for zero shutter lag takes \(ringInPlace(slots: slots)) in the camera's buffers (\(config.bufferDescription)) and \(ringPooled(slots: slots)) copied into a pool of \(MemoryBudget.megabytes(pool)), over the pool's budget of \(poolBudget); ask for fewer frames held (--hold, --pre), a smaller size or fewer streams, or set SHUTTERBUG_POOL_BUDGET_MB")
        }
        guard config.bufferBytes > budget.bytes else { return }
        let sinks = sinkBuffers > 0 ? ", \(sinkBuffers) for sinks" : ""
        let ring = ringFrames > 0 ? ", \(ringFrames) held for zero shutter lag" : ""
        let fewer = ringFrames > 0 ? "fewer frames held (--hold, --pre), " : ""
        throw ShutterbugError(.invalidArgument, "this configuration needs \(config.bufferDescription) of buffers (\(bracketCount) for a bracket's or a burst's photos, \(RequestFeeder.pipelineDepth) in flight\(sinks)\(ring) per stream), over the memory budget of \(budget); ask for \(fewer)fewer bracket steps, a smaller size or fewer streams, or set SHUTTERBUG_MEMORY_BUDGET_MB")
    }

    /// The most photos a bracket may hold once the camera allocated `slots` buffers per stream
    /// (it may allocate fewer than asked; the frames held that it cannot spare go to the pool):
    /// at least one.
    public func photos(slots: Int) -> Int { max(1, slots - RequestFeeder.pipelineDepth - sinkBuffers - ringInPlace(slots: slots)) }
}

extension CaptureMachine {
    /// Whether this camera, as configured with `slots` buffers of which a bracket may hold
    /// `photos`, can take `settings`.
    ///
    /// - Throws: `.unsupported` for a bracket the camera has no controls for (named), or
    ///   `.invalidArgument` for manual steps the frames could not tell apart, or for more steps
    ///   than `photos`, with the range.
    public func validate(_ settings: PhotoSettings, camera: String, slots: Int, photos: Int) throws {
        if let burst = settings.burst, !(1...photos).contains(burst.count) {
            throw ShutterbugError(.invalidArgument, "a burst of \(burst.count) frames (\(burst.before) before, the trigger's, \(burst.after) after) does not fit: \(camera) has \(slots) buffers per stream, so at most \(photos) photos are held at once (accepted 1...\(photos))")
        }
        guard let b = settings.bracket else { return }
        let supported = limits.supported
        if case .lensPositions = b {
            guard supported.contains(.lensPosition) else {
                throw ShutterbugError(.unsupported, "\(camera) has no focus motor; a focus bracket needs a camera with one, such as sim:imx708")
            }
        } else if !supported.isSuperset(of: [.exposureTime, .analogueGain]) {
            throw ShutterbugError(.unsupported, "\(camera) does not support ExposureTime and AnalogueGain, so it cannot bracket exposures")
        }
        if case .manualExposure(let steps) = b {
            let targets = steps.map { adjust(exposure: $0.duration, gain: $0.gain.value, what: "").0 }
            if let reason = ambiguity(targets) { throw ShutterbugError(.invalidArgument, reason) }
        }
        guard (1...photos).contains(b.count) else {
            throw ShutterbugError(.invalidArgument, "a bracket of \(b.count) steps does not fit: \(camera) has \(slots) buffers per stream and \(RequestFeeder.pipelineDepth) stay in flight for the pipeline, so maxBracketedCapturePhotoCount is \(photos) (accepted 1...\(photos))")
        }
    }
}

/// How many of the newest frames a session holds for zero-shutter-lag captures: a count, a
/// time window sized at the configured mode's fastest frame rate (so it holds the window
/// however fast the camera runs), or the larger of both (several triggers' wishes together).
public struct HeldFrames: Sendable, Hashable, CustomStringConvertible {
    public var frames: Int
    public var window: Duration
    /// Frames held beyond the window (a burst's frames before its trigger, and two more so that
    /// a trigger heard late still finds its own frame).
    public var margin: Int

    public init(frames: Int = 0, window: Duration = .zero, margin: Int = 0) {
        self.frames = frames
        self.window = window
        self.margin = window > .zero ? max(0, margin) : 0
    }

    public static let none = HeldFrames()
    public static func frames(_ n: Int) -> HeldFrames { HeldFrames(frames: n) }
    public static func window(_ w: Duration) -> HeldFrames { HeldFrames(window: w) }

    /// Holds what either holds.
    public func union(_ other: HeldFrames) -> HeldFrames {
        HeldFrames(frames: max(frames, other.frames), window: max(window, other.window), margin: max(margin, other.margin))
    }

    /// The frames that hold the count and the window (and its margin) at one frame per `period`.
    public func count(period: Duration) -> Int {
        guard window > .zero, period > .zero else { return frames }
        return max(frames, Int((window / period).rounded(.up)) + margin)
    }

    public var description: String {
        let n = frames > 0 ? "\(frames) frame\(frames == 1 ? "" : "s")" : nil
        let w = window > .zero ? window.millisecondsDescription + (margin > 0 ? " and \(margin) frames more" : "") : nil
        return [n, w].compactMap { $0 }.joined(separator: " or ") + (n == nil && w == nil ? "none" : "")
    }
}
