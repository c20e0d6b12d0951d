/// What a stream is for; libcamera picks sizes, formats and buffer counts from it.
public enum StreamRole: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Full-resolution Bayer data from the sensor.
    case raw
    /// Full-resolution processed stills (YUV420). The Pi gives 1 buffer by default: too few
    /// for a bracket, so ask for more.
    case still
    /// Processed video (YUV420 1080p).
    case video
    /// A small preview (XRGB8888 800x600 on the Pi).
    case viewfinder

    public var description: String { rawValue }
}

/// A stream as asked for: `nil` fields take the role's defaults.
public struct StreamRequest: Hashable, Sendable {
    public var role: StreamRole
    public var width: Int?
    public var height: Int?
    public var pixelFormat: PixelFormat?
    public var bufferCount: Int?

    public init(role: StreamRole, width: Int? = nil, height: Int? = nil, pixelFormat: PixelFormat? = nil, bufferCount: Int? = nil) {
        self.role = role
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.bufferCount = bufferCount
    }
}

/// A stream as the camera settled on it.
public struct StreamConfiguration: Hashable, Sendable, CustomStringConvertible {
    public var role: StreamRole
    public var width: Int
    public var height: Int
    public var pixelFormat: PixelFormat
    public var stride: Int
    public var frameSize: Int
    public var bufferCount: Int

    public init(role: StreamRole, width: Int, height: Int, pixelFormat: PixelFormat, stride: Int, frameSize: Int, bufferCount: Int) {
        self.role = role
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.stride = stride
        self.frameSize = frameSize
        self.bufferCount = bufferCount
    }

    public var description: String {
        "\(role) \(width)x\(height) \(pixelFormat) stride \(stride) x\(bufferCount) buffers"
    }
}

/// The outcome of `configure`: the streams as set, and what was changed from the request.
public struct CameraConfiguration: Hashable, Sendable {
    public var streams: [StreamConfiguration]
    /// One sentence per adjustment ("viewfinder 640x480 adjusted to 636x480"); empty when the
    /// request was taken as it was.
    public var adjustments: [String]

    public init(streams: [StreamConfiguration], adjustments: [String]) {
        self.streams = streams
        self.adjustments = adjustments
    }

    public var isAdjusted: Bool { !adjustments.isEmpty }

    /// Bytes the configuration's buffers take once allocated: every stream's frame size times
    /// its buffer count (contiguous memory from the CMA pool on a Pi 4).
    public var bufferBytes: Int { streams.reduce(0) { $0 + $1.frameSize * $1.bufferCount } }

    /// "13 × 18.5 MB still + 13 × 24.7 MB raw = 561 MB".
    public var bufferDescription: String {
        let parts = streams.map { "\($0.bufferCount) × \(MemoryBudget.megabytes($0.frameSize)) \($0.role)" }
        return parts.joined(separator: " + ") + " = \(MemoryBudget.megabytes(bufferBytes))"
    }

    /// Lists each way a settled stream differs from its request.
    public static func adjustments(requested: [StreamRequest], settled: [StreamConfiguration]) -> [String] {
        var notes: [String] = []
        for (r, s) in zip(requested, settled) {
            if let w = r.width, let h = r.height, w != s.width || h != s.height {
                notes.append("\(r.role) size \(w)x\(h) adjusted to \(s.width)x\(s.height)")
            }
            if let f = r.pixelFormat, f != s.pixelFormat {
                notes.append("\(r.role) format \(f) adjusted to \(s.pixelFormat)")
            }
            if let b = r.bufferCount, b != s.bufferCount {
                notes.append("\(r.role) buffer count \(b) adjusted to \(s.bufferCount)")
            }
        }
        return notes
    }
}
