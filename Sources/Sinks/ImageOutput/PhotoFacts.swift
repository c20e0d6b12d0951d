import Capture
import CImageCodecs
import CSystemShims
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// The camera a photo came from, as its files name it.
public struct CameraDescription: Sendable, Hashable {
    /// EXIF Make.
    public var make: String
    /// EXIF Model: the sensor ("imx477").
    public var model: String
    /// DNG UniqueCameraModel ("Raspberry Pi HQ Camera imx477").
    public var uniqueModel: String
    /// Black level in raw units at the sensor's depth, per CFA site.
    public var blackLevel: Int
    /// The sensor's bit depth; the white level is 2^bits - 1.
    public var bitDepth: Int
    /// Camera RGB from sRGB-linear (the ISP's colour correction matrix at about 5000 K), used
    /// when the frame does not report its own.
    public var colourCorrection: [Double]

    public init(make: String = "Raspberry Pi", model: String, uniqueModel: String? = nil, blackLevel: Int, bitDepth: Int,
                colourCorrection: [Double] = CameraDescription.neutralCorrection) {
        self.make = make
        self.model = model
        self.uniqueModel = uniqueModel ?? "\(make) \(model)"
        self.blackLevel = blackLevel
        self.bitDepth = bitDepth
        self.colourCorrection = colourCorrection
    }

    /// A profile's camera: its product name, black level, depth, and its tuning's colour
    /// correction matrix at 5000 K.
    public init(profile: SensorProfile) {
        self.init(model: profile.model, uniqueModel: "Raspberry Pi \(profile.product) \(profile.model)", blackLevel: profile.blackLevel, bitDepth: profile.bitDepth,
                  colourCorrection: profile.colour.correction(kelvin: 5000).elements)
    }

    /// A correction that leaves colours as the sensor sees them, for cameras without a tuning.
    public static let neutralCorrection: [Double] = [1, 0, 0, 0, 1, 0, 0, 0, 1]
}

/// Turns a frame's CLOCK_MONOTONIC `SensorTimestamp` into calendar time. The offset between the
/// two clocks is sampled when the frame reaches the writer (it changes only when the wall clock
/// is set), so the time in a file is the frame's own, not the time it was saved.
public struct FrameClock: Sendable, Hashable {
    /// CLOCK_REALTIME - CLOCK_MONOTONIC, in nanoseconds.
    public var offsetNanoseconds: Int64

    public init(offsetNanoseconds: Int64) { self.offsetNanoseconds = offsetNanoseconds }

    /// The offset now.
    public static func sample() -> FrameClock { FrameClock(offsetNanoseconds: sbshim_realtime_offset_ns()) }

    /// Nanoseconds since the Unix epoch for a monotonic instant.
    public func unixNanoseconds(_ t: SensorTime) -> Int64 { t.nanoseconds + offsetNanoseconds }
}

/// The calendar parts of an instant in the local time zone, as EXIF writes them.
public struct LocalTime: Sendable, Hashable {
    /// "2026:11:21 14:03:07"
    public var exif: String
    /// "2026-11-21"
    public var date: String
    /// "140307"
    public var compactTime: String
    /// Milliseconds, "042".
    public var subsec: String
    /// "+01:00"
    public var offset: String
    /// ISO 8601 with milliseconds and offset.
    public var iso8601: String

    public init(unixNanoseconds ns: Int64) {
        var secs = time_t(ns / 1_000_000_000)
        let millis = Int((ns % 1_000_000_000) / 1_000_000)
        var tmv = tm()
        localtime_r(&secs, &tmv)
        let y = Int(tmv.tm_year) + 1900, mo = Int(tmv.tm_mon) + 1, d = Int(tmv.tm_mday)
        let h = Int(tmv.tm_hour), mi = Int(tmv.tm_min), s = Int(tmv.tm_sec)
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        func three(_ v: Int) -> String { v < 10 ? "00\(v)" : v < 100 ? "0\(v)" : "\(v)" }
        let gmtoff = Int(tmv.tm_gmtoff)
        let sign = gmtoff < 0 ? "-" : "+"
        offset = "\(sign)\(two(abs(gmtoff) / 3600)):\(two(abs(gmtoff) % 3600 / 60))"
        exif = "\(y):\(two(mo)):\(two(d)) \(two(h)):\(two(mi)):\(two(s))"
        date = "\(y)-\(two(mo))-\(two(d))"
        compactTime = "\(two(h))\(two(mi))\(two(s))"
        subsec = three(millis)
        iso8601 = "\(date)T\(two(h)):\(two(mi)):\(two(s)).\(subsec)\(offset)"
    }
}

/// Everything both file formats say about one photo, from the frame's own metadata.
public struct PhotoFacts: Sendable, Hashable {
    public var camera: CameraDescription
    public var software = "Shutterbug"
    public var description: String
    /// 32 hex digits: the capture's unique ID and the step.
    public var uniqueID: String
    /// When exposure began (`SensorTimestamp - ExposureTime`), local time.
    public var exposureStart: LocalTime?
    public var exposureTime: Duration?
    /// ISO 100 = total gain (analogue × digital) 1.0.
    public var iso: Double?
    /// Metres from the commanded lens position; `.infinity` at 0 dioptres.
    public var subjectDistance: Double?
    public var exposureBias: Double?
    /// EXIF ExposureMode: 0 auto, 1 manual, 2 auto bracket.
    public var exposureMode: Int

    public init(camera: CameraDescription, description: String, uniqueID: String, exposureStart: LocalTime?, exposureTime: Duration?,
                iso: Double?, subjectDistance: Double?, exposureBias: Double?, exposureMode: Int) {
        self.camera = camera
        self.description = description
        self.uniqueID = uniqueID
        self.exposureStart = exposureStart
        self.exposureTime = exposureTime
        self.iso = iso
        self.subjectDistance = subjectDistance
        self.exposureBias = exposureBias
        self.exposureMode = exposureMode
    }

    /// The facts of a captured photo: its frame's metadata, its step, and the clock offset.
    public init(photo: CapturedPhoto, captureID: Int64, stepCount: Int, bias: Double?, camera: CameraDescription, clock: FrameClock) {
        let m = photo.metadata
        // What the frame reports of itself wins over the catalogue: the ISP's matrix for this
        // frame's illuminant, and the sensor's black level (16-bit units, scaled to its depth).
        var camera = camera
        if let ccm = m.colourCorrectionMatrix, ccm.count == 9, ccm.allSatisfy(\.isFinite) { camera.colourCorrection = ccm }
        if let levels = m.sensorBlackLevels, !levels.isEmpty, (1...16).contains(camera.bitDepth) {
            camera.blackLevel = (levels.reduce(0, +) / levels.count) >> (16 - camera.bitDepth)
        }
        self.camera = camera
        let step = photo.step.index + 1
        description = stepCount > 1
            ? "Shutterbug capture \(captureID), bracket step \(step) of \(stepCount): \(photo.step.requested); frame \(m.sequence)"
            : "Shutterbug capture \(captureID); frame \(m.sequence)"
        uniqueID = Self.uniqueID(captureID: captureID, step: step)
        // The camera's own wall clock for the frame where it reports one (FrameWallClock);
        // otherwise the monotonic timestamp moved by the clocks' offset.
        if let wall = m.wallClock {
            exposureStart = LocalTime(unixNanoseconds: wall.nanoseconds - (m.exposureTime?.nanosecondsValue ?? 0))
        } else {
            exposureStart = (m.exposureStart ?? m.sensorTimestamp).map { LocalTime(unixNanoseconds: clock.unixNanoseconds($0)) }
        }
        exposureTime = m.exposureTime
        iso = m.totalGain.map { $0.iso }
        subjectDistance = m.lensPosition.map { $0.value > 0 ? 1 / $0.value : .infinity }
        exposureBias = bias
        exposureMode = stepCount > 1 ? 2 : (photo.step.planned.exposure != nil ? 1 : 0)
    }

    /// Random for each process, so no two runs (or cameras, or machines) share an ID.
    public static let processNonce = UInt64.random(in: 1...UInt64.max)

    /// EXIF ImageUniqueID: 32 hex digits, this process's random nonce (16), the capture's ID
    /// within the process (12) and the step (4). Unique across processes and cameras, unlike
    /// the capture ID alone, which every run starts again at 1.
    public static func uniqueID(captureID: Int64, step: Int, nonce: UInt64 = processNonce) -> String {
        String(nonce, radix: 16).leftPadded(to: 16)
            + String(UInt64(bitPattern: captureID) & 0xFFFF_FFFF_FFFF, radix: 16).leftPadded(to: 12)
            + String(step & 0xFFFF, radix: 16).leftPadded(to: 4)
    }

    /// Calls `body` with the C view of these facts (its strings live for the call only).
    func withCFacts<R>(_ body: (UnsafePointer<sbi_photo_facts>) throws -> R) rethrows -> R {
        let texts: [String?] = [camera.make, camera.model, camera.uniqueModel, software, description, uniqueID,
                                exposureStart?.exif, exposureStart?.subsec, exposureStart?.offset]
        let c = texts.map { $0.flatMap { strdup($0) } }
        defer { for p in c { free(p) } }
        var f = sbi_photo_facts(
            make: c[0], model: c[1], unique_model: c[2], software: c[3], description: c[4], unique_id: c[5],
            datetime: c[6], subsec: c[7], offset: c[8],
            exposure_s: exposureTime.map { $0.secondsValue } ?? 0,
            iso: iso ?? 0,
            subject_distance_m: subjectDistance.map { $0.isInfinite ? 4_294_967_295 : $0 } ?? -1,
            exposure_bias_ev: exposureBias ?? 0,
            has_exposure_bias: exposureBias == nil ? 0 : 1,
            exposure_mode: Int32(exposureMode))
        return try body(&f)
    }
}

extension String {
    func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
