#if canImport(Glibc)
import Glibc
#endif
/// What one completed frame reports about itself: the ground truth of how it was exposed.
///
/// Reported exposure is quantised to the sensor's line time, so compare it with a tolerance.
/// A field is `nil` when the camera did not report it (vimc reports almost nothing).
public struct FrameMetadata: Hashable, Sendable {
    /// The buffer's frame sequence (`FrameMetadata::sequence`). Gaps mean dropped frames.
    public var sequence: UInt32

    /// The rest, behind one reference and copied on write: a frame's metadata is handed from
    /// the camera to the session, its monitors, its recent-frames window and the photos, and
    /// copying a few hundred bytes of optionals at each step was a tenth of the per-frame work
    /// on a small board (perf on the virtual board).
    private var storage: Storage

    private struct Fields: Hashable, Sendable {
        var sensorTimestamp: SensorTime? = nil
        var exposureTime: Duration? = nil
        var analogueGain: Gain? = nil
        var digitalGain: Gain? = nil
        var frameDuration: Duration? = nil
        var lensPosition: Dioptres? = nil
        var colourGains: ColourGains? = nil
        var colourTemperature: Int? = nil
        var lux: Double? = nil
        var controlListSequence: Int64? = nil
        var colourCorrectionMatrix: [Double]? = nil
        var sensorBlackLevels: [Int]? = nil
        var sensorTemperature: Double? = nil
        var focusFoM: Int? = nil
        var afState: AutofocusState? = nil
        var wallClock: WallClockTime? = nil
        var measuredFrameInterval: Duration? = nil
    }

    /// Written only through `unique()`, after a uniqueness check: never shared while mutated.
    private final class Storage: @unchecked Sendable {
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    /// The storage, made this value's own first if another value shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
        return storage
    }

    /// Start of readout on CLOCK_MONOTONIC (`SensorTimestamp`). Exposure of the first row began
    /// about `exposureTime` earlier.
    public var sensorTimestamp: SensorTime? {
        get { storage.fields.sensorTimestamp }
        set { unique().fields.sensorTimestamp = newValue }
    }
    public var exposureTime: Duration? {
        get { storage.fields.exposureTime }
        set { unique().fields.exposureTime = newValue }
    }
    public var analogueGain: Gain? {
        get { storage.fields.analogueGain }
        set { unique().fields.analogueGain = newValue }
    }
    public var digitalGain: Gain? {
        get { storage.fields.digitalGain }
        set { unique().fields.digitalGain = newValue }
    }
    public var frameDuration: Duration? {
        get { storage.fields.frameDuration }
        set { unique().fields.frameDuration = newValue }
    }
    /// The commanded lens position (not a measurement).
    public var lensPosition: Dioptres? {
        get { storage.fields.lensPosition }
        set { unique().fields.lensPosition = newValue }
    }
    public var colourGains: ColourGains? {
        get { storage.fields.colourGains }
        set { unique().fields.colourGains = newValue }
    }
    public var colourTemperature: Int? {
        get { storage.fields.colourTemperature }
        set { unique().fields.colourTemperature = newValue }
    }
    public var lux: Double? {
        get { storage.fields.lux }
        set { unique().fields.lux = newValue }
    }
    /// The `requestSequence` of the request whose controls took effect on this frame, where
    /// the camera says (the Raspberry Pi fork's `rpi::ControlListSequence`); `nil` elsewhere,
    /// and then only the reported values tell which settings a frame carries.
    public var controlListSequence: Int64? {
        get { storage.fields.controlListSequence }
        set { unique().fields.controlListSequence = newValue }
    }
    /// The ISP's colour correction matrix for this frame, row-major 3×3, camera RGB (after
    /// white balance) to linear sRGB (`ColourCorrectionMatrix`).
    public var colourCorrectionMatrix: [Double]? {
        get { storage.fields.colourCorrectionMatrix }
        set { unique().fields.colourCorrectionMatrix = newValue }
    }
    /// Black levels per Bayer channel (R, Gr, Gb, B) in 16-bit units (`SensorBlackLevels`).
    public var sensorBlackLevels: [Int]? {
        get { storage.fields.sensorBlackLevels }
        set { unique().fields.sensorBlackLevels = newValue }
    }
    /// Degrees Celsius (`SensorTemperature`).
    public var sensorTemperature: Double? {
        get { storage.fields.sensorTemperature }
        set { unique().fields.sensorTemperature = newValue }
    }
    /// The ISP's focus figure of merit: higher is sharper (`FocusFoM`).
    public var focusFoM: Int? {
        get { storage.fields.focusFoM }
        set { unique().fields.focusFoM = newValue }
    }
    /// The autofocus algorithm's state (`AfState`).
    public var afState: AutofocusState? {
        get { storage.fields.afState }
        set { unique().fields.afState = newValue }
    }
    /// CLOCK_REALTIME at the instant of `sensorTimestamp` (`FrameWallClock`, libcamera 0.5.2 on).
    public var wallClock: WallClockTime? {
        get { storage.fields.wallClock }
        set { unique().fields.wallClock = newValue }
    }
    /// The time since the previous frame's `sensorTimestamp`, measured by the backend where the
    /// camera reports neither `ExposureTime` nor `FrameDuration` (vimc, some USB cameras); not
    /// a libcamera control.
    public var measuredFrameInterval: Duration? {
        get { storage.fields.measuredFrameInterval }
        set { unique().fields.measuredFrameInterval = newValue }
    }

    public static func == (a: FrameMetadata, b: FrameMetadata) -> Bool {
        a.sequence == b.sequence && (a.storage === b.storage || a.storage.fields == b.storage.fields)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(sequence)
        hasher.combine(storage.fields)
    }

    public init(
        sequence: UInt32, sensorTimestamp: SensorTime? = nil, exposureTime: Duration? = nil,
        analogueGain: Gain? = nil, digitalGain: Gain? = nil, frameDuration: Duration? = nil,
        lensPosition: Dioptres? = nil, colourGains: ColourGains? = nil,
        colourTemperature: Int? = nil, lux: Double? = nil
    ) {
        self.sequence = sequence
        storage = Storage(Fields(sensorTimestamp: sensorTimestamp, exposureTime: exposureTime, analogueGain: analogueGain,
                                 digitalGain: digitalGain, frameDuration: frameDuration, lensPosition: lensPosition,
                                 colourGains: colourGains, colourTemperature: colourTemperature, lux: lux))
    }

    /// When exposure of the first row began: `SensorTimestamp - ExposureTime`, the rule
    /// Picamera2 uses to find the first frame exposed after an instant.
    public var exposureStart: SensorTime? {
        guard let t = sensorTimestamp, let e = exposureTime else { return nil }
        return t - e
    }

    /// The earliest the first row's exposure can have begun: `exposureStart` where the camera
    /// reports its exposure, else the start of readout less a frame (`FrameDuration`, or the
    /// measured interval), since an exposure lasts at most a frame. A frame whose earliest start
    /// is at or after an instant was exposed after it, whatever the camera reports; every "first
    /// frame exposed after" rule compares this.
    public var earliestExposureStart: SensorTime? {
        if let s = exposureStart { return s }
        guard let t = sensorTimestamp, let f = frameDuration ?? measuredFrameInterval else { return nil }
        return t - f
    }

    /// The "first frame exposed after an instant" rule, the one every selector asks (a trigger's
    /// frame, a single photo's, a bracket's steps, the kept frame): its earliest possible exposure
    /// start is at or after `instant`. False for a frame that says too little to tell.
    @inlinable
    public func exposed(after instant: SensorTime) -> Bool {
        earliestExposureStart.map { $0 >= instant } ?? false
    }

    /// Total gain (analogue × digital), the factor pixel values scale with besides exposure.
    public var totalGain: Gain? {
        guard let a = analogueGain else { return nil }
        return a * (digitalGain ?? .unity)
    }
}

/// libcamera's `AfState`.
public enum AutofocusState: Int, Sendable, Hashable, CustomStringConvertible {
    case idle = 0, scanning = 1, focused = 2, failed = 3

    public var description: String {
        switch self {
        case .idle: "idle"
        case .scanning: "scanning"
        case .focused: "focused"
        case .failed: "failed"
        }
    }
}

/// Nanoseconds since the Unix epoch on CLOCK_REALTIME.
public struct WallClockTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var nanoseconds: Int64
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
    public static func < (a: Self, b: Self) -> Bool { a.nanoseconds < b.nanoseconds }

    /// ISO 8601 in UTC with milliseconds, e.g. 2026-11-23T13:47:40.123Z.
    public var description: String {
        var t = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&t, &parts)
        let ms = Int((nanoseconds % 1_000_000_000) / 1_000_000)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let msText = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(msText)Z"
    }
}
