/// The sensor mode a configuration runs in, as the camera reports it: the raw size and depth,
/// and the frame-duration and exposure limits that apply in it (on libcamera, the controls'
/// `ControlInfo` after configuration).
public struct SensorModeReport: Sendable, Hashable, CustomStringConvertible {
    public var width: Int?
    public var height: Int?
    public var bitDepth: Int?
    public var frameDurationLimits: ClosedRange<Duration>?
    public var exposureLimits: ClosedRange<Duration>?
    /// How the size is known: "raw stream" (the camera delivered it), "simulated sensor", or
    /// "Raspberry Pi mode choice" (a known sensor without a raw stream: the mode the Pi
    /// pipeline picks for the output size).
    public var source: String

    public init(width: Int?, height: Int?, bitDepth: Int?, frameDurationLimits: ClosedRange<Duration>?, exposureLimits: ClosedRange<Duration>?, source: String) {
        self.width = width
        self.height = height
        self.bitDepth = bitDepth
        self.frameDurationLimits = frameDurationLimits
        self.exposureLimits = exposureLimits
        self.source = source
    }

    /// The fastest frame rate the mode allows.
    public var maxFrameRate: Double? { frameDurationLimits.map { 1 / $0.lowerBound.secondsValue } }

    /// "2028x1520 12-bit, up to 40.00 fps, exposure 31 µs to 694.42 ms (simulated sensor)".
    public var description: String {
        var parts: [String] = []
        if let w = width, let h = height { parts.append("\(w)x\(h)\(bitDepth.map { " \($0)-bit" } ?? "")") }
        if let f = maxFrameRate { parts.append("up to \(String(format2: f)) fps") }
        if let e = exposureLimits { parts.append("exposure \(Int(e.lowerBound.microsecondsValue.rounded())) µs to \(e.upperBound.millisecondsDescription)") }
        return (parts.isEmpty ? "not reported" : parts.joined(separator: ", ")) + " (\(source))"
    }

    /// Whether `other` is a slower mode than this one (a lower top frame rate).
    public func isFaster(than other: SensorModeReport) -> Bool {
        guard let a = maxFrameRate, let b = other.maxFrameRate else { return false }
        return a > b * 1.001
    }

    /// The report as a JSON object.
    public var json: JSONObject {
        var o = JSONObject()
        o.add("width", width)
        o.add("height", height)
        o.add("bitDepth", bitDepth)
        o.add("maxFps", maxFrameRate)
        o.add("minFrameDurationUs", frameDurationLimits?.lowerBound.microsecondsValue)
        o.add("maxFrameDurationUs", frameDurationLimits?.upperBound.microsecondsValue)
        o.add("minExposureUs", exposureLimits?.lowerBound.microsecondsValue)
        o.add("maxExposureUs", exposureLimits?.upperBound.microsecondsValue)
        o.add("source", source)
        return o
    }
}
