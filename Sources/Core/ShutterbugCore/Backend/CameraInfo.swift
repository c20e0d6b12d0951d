/// A camera as listed: its id and the properties Shutterbug uses.
public struct CameraInfo: Hashable, Sendable {
    /// The id to open it with (`sim:imx477`, or libcamera's id).
    public var id: String
    /// The sensor model where known (`imx477`), else what the camera calls itself.
    public var model: String
    /// The pixel array size, when known.
    public var pixelArrayWidth: Int?
    public var pixelArrayHeight: Int?
    /// Whether this is the simulated camera.
    public var isSimulated: Bool

    public init(id: String, model: String, pixelArrayWidth: Int? = nil, pixelArrayHeight: Int? = nil, isSimulated: Bool) {
        self.id = id
        self.model = model
        self.pixelArrayWidth = pixelArrayWidth
        self.pixelArrayHeight = pixelArrayHeight
        self.isSimulated = isSimulated
    }
}

/// The ranges the camera accepts for the controls Shutterbug sends; `nil` when unsupported.
public struct ControlLimits: Hashable, Sendable {
    public var supported: ControlSet
    public var exposureTime: ClosedRange<Duration>?
    public var analogueGain: ClosedRange<Double>?
    public var frameDuration: ClosedRange<Duration>?
    public var lensPosition: ClosedRange<Double>?

    public init(supported: ControlSet, exposureTime: ClosedRange<Duration>? = nil, analogueGain: ClosedRange<Double>? = nil, frameDuration: ClosedRange<Duration>? = nil, lensPosition: ClosedRange<Double>? = nil) {
        self.supported = supported
        self.exposureTime = exposureTime
        self.analogueGain = analogueGain
        self.frameDuration = frameDuration
        self.lensPosition = lensPosition
    }
}
