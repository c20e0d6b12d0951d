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

    /// - Throws: `.invalidArgument` for a bracket outside 1...32 or frames per sink outside 1...8.
    public init(bracketCount: Int, sinks: Int, framesPerSink: Int) throws {
        guard (1...32).contains(bracketCount) else {
            throw ShutterbugError(.invalidArgument, "prepared bracket count must be in 1...32, not \(bracketCount)")
        }
        guard (1...8).contains(framesPerSink) else {
            throw ShutterbugError(.invalidArgument, "frames per sink must be in 1...8, not \(framesPerSink)")
        }
        self.bracketCount = bracketCount
        self.sinkBuffers = sinks * framesPerSink
    }

    /// The buffers each stream asks for.
    public var buffersPerStream: Int { bracketCount + RequestFeeder.pipelineDepth + sinkBuffers }

    /// The streams, each asking for `buffersPerStream`.
    public func requests(_ streams: [StreamRequest]) -> [StreamRequest] {
        streams.map { r in
            var s = r
            s.bufferCount = buffersPerStream
            return s
        }
    }

    /// Refuses a configuration whose buffers would take more than `budget`, naming the bytes
    /// per stream and what to ask for instead.
    public func check(_ config: CameraConfiguration, within budget: MemoryBudget) throws {
        guard config.bufferBytes > budget.bytes else { return }
        let sinks = sinkBuffers > 0 ? ", \(sinkBuffers) for sinks" : ""
        throw ShutterbugError(.invalidArgument, "this configuration needs \(config.bufferDescription) of buffers (\(bracketCount) for a bracket, \(RequestFeeder.pipelineDepth) in flight\(sinks) per stream), over the memory budget of \(budget); ask for fewer bracket steps, a smaller size or fewer streams, or set SHUTTERBUG_MEMORY_BUDGET_MB")
    }

    /// The most photos a bracket may hold once the camera allocated `slots` buffers per stream
    /// (it may allocate fewer than asked): at least one.
    public func photos(slots: Int) -> Int { max(1, slots - RequestFeeder.pipelineDepth - sinkBuffers) }
}

extension CaptureMachine {
    /// Whether this camera, as configured with `slots` buffers of which a bracket may hold
    /// `photos`, can take `settings`.
    ///
    /// - Throws: `.unsupported` for a bracket the camera has no controls for (named), or
    ///   `.invalidArgument` for manual steps the frames could not tell apart, or for more steps
    ///   than `photos`, with the range.
    public func validate(_ settings: PhotoSettings, camera: String, slots: Int, photos: Int) throws {
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
