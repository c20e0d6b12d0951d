import ShutterbugCore
import Synchronization

/// Settings for one capture, immutable, with a unique ID that travels with its requests.
/// AVFoundation's `AVCapturePhotoSettings`, for a headless Pi camera.
public struct PhotoSettings: Sendable, Hashable {
    private static let counter = Atomic<Int64>(0)

    /// Unique within the process; the events of this capture carry it.
    public let uniqueID: Int64
    /// A bracket, or `nil` for a single photo with the settings in force.
    public let bracket: BracketSettings?
    /// The files each photo should become (written by the image writers).
    public let formats: Set<PhotoFormat>
    /// A trigger's instant on the camera's clock: every photo of the capture is a frame whose
    /// exposure began at or after it (`SensorTimestamp - ExposureTime >= instant`).
    public let exposedAfter: SensorTime?
    /// The trigger this capture answers, if any (its instant is `exposedAfter`); the sidecar
    /// records it with the lag.
    public let trigger: Trigger?
    /// A manual-exposure bracket exposed after an instant that is known ahead (a timelapse
    /// slot): the frames before it are planned so that the first step's exposure begins at
    /// the instant, within a line time, instead of up to a frame period after it
    /// (`PhaseLock`). Other captures ignore it.
    public let phaseLocked: Bool
    /// The white balance an exposure bracket's requests carry (and a phase lock's pre-roll
    /// requests, which repeat the first step's); nil: fixed at what the camera's AWB has now.
    /// The ISP takes it on a request's own frame, ahead of the exposures, so a caller that needs
    /// every photo at it locks it on the session beforehand too (as the timelapse does). The corresponding
    /// libcamera control is `ColourGains`.
    public let whiteBalance: ColourGains?
    /// The latest the first photo's exposure may begin (a timelapse slot's lateness limit): a
    /// capture whose first frame would begin later fails with `.late`, its frames given back
    /// unwritten, so a slot is skipped rather than fired late. Judged at exposure start, where
    /// the rule means something, not when the capture was asked for.
    public let exposedBefore: SensorTime?
    /// Zero shutter lag (AVFoundation's `isZeroShutterLagEnabled`, per capture): a single
    /// photo at an instant (`exposedAfter`) is the frame whose exposure covers the instant,
    /// taken from the frames the session holds (`prepare(ringFrames:)`) or the one exposing
    /// then, instead of the first frame exposed after it. Where no frame covers the instant (a
    /// gap between exposures, a drop, start-up) the first frame exposed after is taken and
    /// the resolved settings say why (`ResolvedPhotoSettings.zeroShutterLag`). A bracket's
    /// steps are frames still to come: it ignores this, saying so.
    public let zeroShutterLag: Bool
    /// Pre-capture: the frames before the trigger's frame (held, as for zero shutter lag), the
    /// frame exposing at the instant, and frames after it, as one capture's steps in frame
    /// order (Olympus's ProCapture). Needs `exposedAfter`; a bracket cannot have one.
    public let burst: Burst?

    /// A burst around an instant: `before` frames held from before it (within `window` of it,
    /// where given), the frame exposing at it, and `after` frames that follow.
    public struct Burst: Sendable, Hashable {
        public var before: Int
        public var window: Duration?
        public var after: Int

        public init(before: Int, window: Duration? = nil, after: Int) {
            self.before = max(0, before)
            self.window = window
            self.after = max(0, after)
        }

        /// Frames in the burst: always this many (fewer held before the instant means more
        /// taken after it).
        public var count: Int { before + 1 + after }
    }

    /// The photos the capture gives: the bracket's steps, the burst's frames, or one.
    public var stepCount: Int { bracket?.count ?? burst?.count ?? 1 }

    public init(bracket: BracketSettings? = nil, formats: Set<PhotoFormat> = [.jpeg], exposedAfter: SensorTime? = nil, phaseLocked: Bool = false,
                whiteBalance: ColourGains? = nil, exposedBefore: SensorTime? = nil, zeroShutterLag: Bool = false, burst: Burst? = nil) {
        uniqueID = Self.counter.wrappingAdd(1, ordering: .relaxed).newValue
        self.bracket = bracket
        self.formats = formats
        self.exposedAfter = exposedAfter
        self.phaseLocked = phaseLocked && exposedAfter != nil
        self.whiteBalance = whiteBalance
        self.exposedBefore = exposedBefore
        self.burst = bracket == nil && exposedAfter != nil ? burst : nil
        self.zeroShutterLag = (zeroShutterLag || self.burst != nil) && exposedAfter != nil
        trigger = nil
    }

    /// A capture exposed after `trigger`'s instant, and, given `exposedBefore`, starting no
    /// later than that (else it fails as late rather than take a frame of something after).
    public init(bracket: BracketSettings? = nil, formats: Set<PhotoFormat> = [.jpeg], trigger: Trigger, exposedBefore: SensorTime? = nil, zeroShutterLag: Bool = false,
                burst: Burst? = nil) {
        uniqueID = Self.counter.wrappingAdd(1, ordering: .relaxed).newValue
        self.bracket = bracket
        self.formats = formats
        self.exposedAfter = trigger.instant
        self.trigger = trigger
        phaseLocked = false
        whiteBalance = nil
        self.exposedBefore = exposedBefore
        self.zeroShutterLag = zeroShutterLag || burst != nil
        self.burst = bracket == nil ? burst : nil
    }
}

/// An output file format for a photo.
public enum PhotoFormat: String, Sendable, Hashable, CaseIterable {
    /// JPEG from the processed (YUV420) stream.
    case jpeg
    /// DNG from the raw (Bayer) stream.
    case dng
}

/// The steps of a bracket: AE bias, manual exposures, or lens positions.
/// AVFoundation's `AVCapturePhotoBracketSettings` with its two exposure kinds, plus focus.
public enum BracketSettings: Sendable, Hashable {
    /// Biases in stops from the metered exposure (auto-exposure settles first).
    case exposureBias([Double])
    /// Fixed exposure durations and analogue gains.
    case manualExposure([(duration: Duration, gain: Gain)])
    /// Lens positions, with exposure as it is.
    case lensPositions([Dioptres])

    public var count: Int {
        switch self {
        case .exposureBias(let b): return b.count
        case .manualExposure(let m): return m.count
        case .lensPositions(let l): return l.count
        }
    }

    public static func == (a: BracketSettings, b: BracketSettings) -> Bool {
        switch (a, b) {
        case (.exposureBias(let x), .exposureBias(let y)): return x == y
        case (.manualExposure(let x), .manualExposure(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.duration == $1.duration && $0.gain == $1.gain }
        case (.lensPositions(let x), .lensPositions(let y)): return x == y
        default: return false
        }
    }

    public func hash(into h: inout Hasher) {
        switch self {
        case .exposureBias(let x): h.combine(0); h.combine(x)
        case .manualExposure(let m): h.combine(1); for s in m { h.combine(s.duration); h.combine(s.gain) }
        case .lensPositions(let l): h.combine(2); h.combine(l)
        }
    }
}
