import ShutterbugCore
#if canImport(Glibc)
import Glibc
#endif

/// The Raspberry Pi camera pipeline as a pure state machine: a free-running sensor, requests
/// paired with frames already captured, an IPA whose sensor writes land several frames later,
/// the 30 Hz algorithm rate limit, drops, and a slewing lens.
///
/// The sensor runs one frame per `beginFrame`/`finishFrame` pair. A frame paired with a request
/// passes the request's controls to the IPA; if the IPA runs on that frame, its sensor writes
/// land `delays.max + 1` or `+ 2` sensor frames later (CAMERA-FACTS §2), never on the paired
/// frame itself. Colour controls apply to the paired frame. Metadata reports what each frame
/// was really exposed with, quantised to the line time.
public struct SimulatedPipeline: Sendable {
    /// A request as the pipeline sees it.
    public struct Request: Sendable {
        public var slot: Int
        public var cookie: UInt64
        public var controls: CameraControls
        public init(slot: Int, cookie: UInt64, controls: CameraControls) {
            self.slot = slot
            self.cookie = cookie
            self.controls = controls
        }
    }

    /// Register values of one sensor frame.
    struct SensorSettings: Hashable, Sendable {
        var exposureLines: Int
        var gainCode: Int
        var frameLengthLines: Int
        var digitalGain: Double
    }

    /// The timing of the frame being read out, known before any request pairs with it.
    public struct FrameTiming: Sendable {
        public var sequence: UInt64
        /// Start of readout (`SensorTimestamp`).
        public var readout: SensorTime
        public var frameDuration: Duration
        public var exposure: Duration
        /// When the frame has been read out and processed, i.e. when it can complete.
        public var completion: SensorTime
    }

    /// What the image of a frame is made from; rendered only if someone reads the pixels.
    public struct FrameRecipe: Sendable, Hashable {
        public var sequence: UInt64
        /// Scene signal as a fraction of full scale: scene rate × exposure × total gain.
        public var signal: Double
        public var totalGain: Double
        /// |physical lens position − subject| in dioptres during the exposure.
        public var defocus: Double
        /// The white-balance gains the ISP applied.
        public var colourGains: ColourGains
        /// The colour correction matrix the ISP applied.
        public var correction: Matrix3
        /// What the camera looks at.
        public var scene: SimulationOptions.Scene
        /// The raw R/G and B/G of a grey under the scene's light (1 / its balancing gains).
        public var rawWhite: RGB
        /// The correction that turns this sensor's white-balanced RGB into linear sRGB under the
        /// scene's light: how the scene's colours reach the sensor (see `ColourChart`).
        public var sceneCorrection: Matrix3
    }

    /// A frame paired with a request.
    public struct Frame: Sendable {
        public var request: Request
        /// The request's number in pairing (= queueing) order, libcamera's `Request::sequence()`.
        public var requestSequence: UInt32
        public var metadata: FrameMetadata
        public var recipe: FrameRecipe
    }

    public enum Outcome: Sendable {
        case completed(Frame)
        /// The frame was lost: no request was waiting, or the pipeline dropped it.
        case dropped(sequence: UInt64)
    }

    public let profile: SensorProfile
    public let mode: SensorMode
    public let options: SimulationOptions

    var rng: SplitMix64
    /// The next sensor frame's number.
    public private(set) var sequence: UInt64 = 0
    var current: SensorSettings
    /// Sensor writes waiting for their frame, each with the request whose controls the IPA
    /// run that made it had just applied.
    var writes = Ring<(frame: UInt64, settings: SensorSettings, request: UInt32)>(capacity: 8)
    /// The request behind the sensor settings in force (`ControlListSequence`).
    var inForceRequest: UInt32?
    /// Requests paired so far.
    var pairedRequests: UInt32 = 0
    var lastLanding: UInt64?
    var lastRun: (frame: UInt64, late: Bool)?
    /// The settings of the last write scheduled.
    var lastWritten: SensorSettings?
    var lastIPARun: SensorTime?
    var previousReadout: SensorTime
    let startTime: SensorTime
    var pendingTiming: FrameTiming?
    /// External-trigger mode: the pulse that starts the next frame's exposure.
    var pulse: (start: SensorTime, width: Duration)?
    /// Frames flagged as start-up frames after this start: the Pi's IPA counts its AGC's and
    /// AWB's convergence frames only for the algorithms running in auto (`IpaBase::start`), so
    /// a start with fixed exposure, gain and colour gains has none.
    public private(set) var startupFrames: Int

    // IPA state: what the algorithms aim for.
    var agc: AGCState
    var awbEnabled = true
    var manualColourGains: ColourGains?
    var lens: LensState
    /// CLOCK_REALTIME - CLOCK_MONOTONIC when the sensor started, for `FrameWallClock`; nil
    /// reports none (an older libcamera).
    public var wallClockOffsetNanoseconds: Int64?
    /// The AWB's estimate of the light's colour temperature.
    var awbKelvin: Double
    /// The matrix last reported, shared by every frame's metadata until it changes
    /// (copy-on-write: no allocation per frame).
    var reportedMatrix: (kelvin: Double, matrix: Matrix3, elements: [Double])
    let reportedBlackLevels: [Int]
    /// The scene's light as the sensor sees it.
    let sceneWhite: RGB
    let sceneCorrection: Matrix3

    /// Scene signal per second of exposure at unity gain, as a fraction of full scale.
    var sceneRate: Double { 18.0 * sceneLux / 400.0 }
    /// The scene's light now (the schedule's at the frame being read out).
    var sceneLux: Double

    /// Creates the pipeline with the sensor started at `start` with `controls`, which apply
    /// from the very first frame.
    public init(profile: SensorProfile, mode: SensorMode, options: SimulationOptions, start: SensorTime, controls: CameraControls) {
        self.profile = profile
        self.mode = mode
        self.options = options
        self.startTime = start
        self.sceneLux = options.sceneSchedule?.lux(at: 0) ?? options.sceneLux
        self.reportedBlackLevels = Array(repeating: profile.blackLevel << (16 - profile.bitDepth), count: 4)
        self.rng = SplitMix64(seed: options.seed)
        self.previousReadout = start
        self.agc = AGCState()
        self.lens = LensState(position: profile.defaultLensPosition)
        let tuning = profile.colour
        let truth = tuning.gains(kelvin: options.illuminant)
        self.sceneWhite = RGB(1 / truth.red, 1, 1 / truth.blue)
        self.sceneCorrection = tuning.correction(kelvin: options.illuminant)
        // A Pi that returns start-up frames starts its AWB from a mid-range guess and
        // converges over them; an older one has converged by the first frame it returns.
        self.awbKelvin = options.startupFrames > 0 ? 4500 : options.illuminant
        let m = tuning.correction(kelvin: awbKelvin)
        self.reportedMatrix = (awbKelvin, m, m.elements)
        self.current = SensorSettings(exposureLines: 1, gainCode: 0, frameLengthLines: 1, digitalGain: 1)
        self.startupFrames = options.startupFrames
        current = agcSettings(filtered: false)
        apply(controls)
        let autoExposure = agc.enabled && (agc.manualExposure == nil || agc.manualGain == nil)
        if !autoExposure && !awbEnabled { startupFrames = 0 }
        current = agcSettings(filtered: false)
        // A Pi that returns start-up frames starts the AGC from its default exposure, well
        // off the scene's, and converges over those frames (CAMERA-FACTS §9).
        if options.startupFrames > 0, agc.enabled, agc.manualExposure == nil || agc.manualGain == nil, let t = agc.filteredTotal {
            agc.filteredTotal = t * 0.35
            current = agcSettings(filtered: true)
        }
        if let target = lensTarget { lens.commanded = target; lens.position = target }
        // Lens and colour controls passed to start() are in force from the first frame.
    }

    // MARK: Frames

    /// Starts the next sensor frame: applies the sensor writes that land on it and returns its
    /// timing. Call `finishFrame` next.
    public mutating func beginFrame() -> FrameTiming {
        if let t = pendingTiming { return t }
        while let w = writes.first, w.frame <= sequence {
            current = w.settings
            inForceRequest = w.request
            _ = writes.popFirst()
        }
        var fd = mode.lineTime * current.frameLengthLines
        var exposure = mode.lineTime * current.exposureLines
        var readout = previousReadout + fd
        if let p = pulse, let t = profile.externalTrigger {
            // Triggered: the exposure begins with the pulse and lasts its width plus the
            // sensor's fixed offset; readout follows at once.
            exposure = p.width + t.exposureOffset
            readout = p.start + exposure
            fd = sequence == 0 ? exposure + mode.readoutTime : readout - previousReadout
        }
        if let schedule = options.sceneSchedule { sceneLux = schedule.lux(at: (readout - startTime).secondsValue) }
        // Completion after the frame is read out and through the ISP (a few ms).
        let completion = readout + mode.readoutTime + .milliseconds(4)
        let t = FrameTiming(sequence: sequence, readout: readout, frameDuration: fd, exposure: exposure, completion: completion)
        pendingTiming = t
        return t
    }

    /// Finishes the frame begun by `beginFrame`, pairing it with `request` (nil: none waiting).
    public mutating func finishFrame(request: Request?) -> Outcome {
        let timing = beginFrame()
        pendingTiming = nil
        pulse = nil
        sequence += 1
        previousReadout = timing.readout

        let dropped = options.dropProbability > 0 && rng.unit() < options.dropProbability
        guard let request, !dropped else { return .dropped(sequence: timing.sequence) }

        // The frame was exposed with `current` and the lens as it physically was.
        let exposed = current
        let midExposure = timing.readout + mode.readoutTime / 2 - timing.exposure / 2
        let physicalLens = lens.physicalPosition(at: midExposure)

        let requestSequence = pairedRequests
        pairedRequests &+= 1
        let controlList = inForceRequest
        apply(request.controls)
        // Colour: the gains set by hand, or the AWB's for the temperature it has found; the
        // matrix for the temperature the gains imply (the Pi's inverse CT curve when manual).
        let tuning = profile.colour
        let colourGains: ColourGains
        let kelvin: Double
        if !awbEnabled, let manual = manualColourGains {
            colourGains = manual
            kelvin = tuning.kelvin(forRedGain: manual.red)
        } else {
            colourGains = tuning.gains(kelvin: awbKelvin)
            kelvin = awbKelvin
        }
        if kelvin != reportedMatrix.kelvin {
            let m = tuning.correction(kelvin: kelvin)
            reportedMatrix = (kelvin, m, m.elements)
        }

        let ipaRuns = lastIPARun.map { timing.readout - $0 >= options.ipaMinInterval * 0.9 } ?? true
        if ipaRuns {
            lastIPARun = timing.readout
            _ = schedule(agcSettings(filtered: true), pairedWith: timing.sequence, request: requestSequence)
            stepLens(at: timing.completion)
            if awbEnabled, awbKelvin != options.illuminant {
                let speed = sequence <= UInt64(options.startupFrames) ? 0.6 : 0.2
                awbKelvin += speed * (options.illuminant - awbKelvin)
                if abs(awbKelvin - options.illuminant) < 1 { awbKelvin = options.illuminant }
            }
        }

        let analogue = profile.gainModel.gain(forCode: exposed.gainCode)
        var metadata = FrameMetadata(
            sequence: UInt32(truncatingIfNeeded: timing.sequence),
            sensorTimestamp: timing.readout,
            exposureTime: timing.exposure,
            analogueGain: Gain(analogue),
            digitalGain: Gain(exposed.digitalGain),
            frameDuration: timing.frameDuration,
            lensPosition: profile.hasFocusMotor ? Dioptres(lens.commanded) : nil,
            colourGains: colourGains,
            colourTemperature: Int(kelvin.rounded()),
            lux: sceneLux)
        if options.reportsControlListSequence { metadata.controlListSequence = controlList.map { Int64($0) } }
        // What the Pi's IPA reports besides: the colour correction matrix it applied, black
        // levels in 16-bit units, a sensor warming from 32 °C towards 48 °C over its first ten
        // minutes, the focus figure of merit (the scene's contrast, falling with defocus) and
        // the AF state.
        metadata.colourCorrectionMatrix = reportedMatrix.elements
        metadata.sensorBlackLevels = reportedBlackLevels
        let running = max(0, (timing.readout - startTime).secondsValue)
        metadata.sensorTemperature = ((48 - 16 * exp(-running / 200)) * 10).rounded() / 10
        if profile.hasFocusMotor {
            let blur = abs(physicalLens - subjectDioptres) / SceneRenderer.blurScale
            metadata.focusFoM = Int((20_000 / (1 + blur * blur)).rounded())
            let moving = abs(physicalLens - lens.commanded) > 0.005
            switch lens.afMode {
            case .manual: metadata.afState = .idle
            case .auto, .continuous: metadata.afState = moving || lensTarget.map({ abs($0 - lens.commanded) > 0.005 }) == true ? .scanning : .focused
            }
        }
        if let offset = wallClockOffsetNanoseconds { metadata.wallClock = WallClockTime(nanoseconds: timing.readout.nanoseconds + offset) }
        let total = analogue * exposed.digitalGain
        let recipe = FrameRecipe(
            sequence: timing.sequence,
            signal: sceneRate * timing.exposure.secondsValue * total,
            totalGain: total,
            defocus: profile.hasFocusMotor ? abs(physicalLens - subjectDioptres) : 0,
            colourGains: colourGains,
            correction: reportedMatrix.matrix,
            scene: options.scene,
            rawWhite: sceneWhite,
            sceneCorrection: sceneCorrection)
        return .completed(Frame(request: request, requestSequence: requestSequence, metadata: metadata, recipe: recipe))
    }

    /// External-trigger mode: the next frame is exposed from `start` for `width` plus the
    /// sensor's offset. Call before `beginFrame`.
    public mutating func trigger(at start: SensorTime, width: Duration) {
        precondition(pendingTiming == nil, "trigger(at:width:) between beginFrame and finishFrame")
        pulse = (start, width)
    }

    /// Lets `duration` pass with the sensor running and no frame delivered (a stall).
    public mutating func stall(for duration: Duration) {
        pendingTiming = nil
        let fd = mode.lineTime * current.frameLengthLines
        let frames = max(1, Int(duration.nanosecondsValue / max(1, fd.nanosecondsValue)))
        sequence += UInt64(frames)
        previousReadout = previousReadout + fd * frames
    }

    /// Schedules sensor writes from the IPA run on `frame`; returns the landing frame.
    ///
    /// In random mode, lateness is a phase: whether the IPA's writes for a frame reach
    /// DelayedControls before the next frame starts. It turns late at random and then stays
    /// late, since every write queued after a late one is late too. It catches up (turns early)
    /// at random as well, but only where catching up hides nothing: after a frame without a
    /// run (a skip or a drop), or when the write repeats the one before it. Catching up merges
    /// two queued writes onto one frame, which would otherwise lose the first of them.
    mutating func schedule(_ settings: SensorSettings, pairedWith frame: UInt64, request: UInt32) -> UInt64 {
        let offsets = profile.delays.landingOffsets
        var late: Bool
        switch options.landing {
        case .early: late = false
        case .late: late = true
        case .random:
            let previous = lastRun?.late ?? false
            late = previous
            if rng.unit() < 0.25 {
                let gap = lastRun.map { $0.frame + 1 < frame } ?? true
                let repeats = writes.last?.settings == settings || lastWritten == settings
                if !previous || gap || repeats { late = !previous }
            }
        }
        let landing = frame + UInt64(late ? offsets.upperBound : offsets.lowerBound)
        lastRun = (frame, late)
        if let previous = lastLanding, landing <= previous, let last = writes.last, last.frame == previous {
            // Caught up: this write merges with the previous one (which it repeats).
            writes.replaceLast(with: (previous, settings, request))
            lastWritten = settings
            return previous
        }
        lastLanding = landing
        lastWritten = settings
        if writes.count == writes.capacity { _ = writes.popFirst() }
        writes.append((landing, settings, request))
        return landing
    }
}
