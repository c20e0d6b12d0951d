/// A set of the controls Shutterbug sends, used to report which ones a camera does not support.
public struct ControlSet: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    // The bit values match the bridge's sbc_control_bit so no table is needed at the boundary.
    public static let aeEnable = ControlSet(rawValue: 1 << 0)
    public static let exposureTime = ControlSet(rawValue: 1 << 1)
    public static let analogueGain = ControlSet(rawValue: 1 << 2)
    public static let exposureValue = ControlSet(rawValue: 1 << 3)
    public static let awbEnable = ControlSet(rawValue: 1 << 4)
    public static let colourGains = ControlSet(rawValue: 1 << 5)
    public static let frameDurationLimits = ControlSet(rawValue: 1 << 6)
    public static let afMode = ControlSet(rawValue: 1 << 7)
    public static let lensPosition = ControlSet(rawValue: 1 << 8)

    public static let all: ControlSet = [
        .aeEnable, .exposureTime, .analogueGain, .exposureValue, .awbEnable, .colourGains,
        .frameDurationLimits, .afMode, .lensPosition,
    ]

    static let names: [(ControlSet, String)] = [
        (.aeEnable, "AeEnable"), (.exposureTime, "ExposureTime"), (.analogueGain, "AnalogueGain"),
        (.exposureValue, "ExposureValue"), (.awbEnable, "AwbEnable"), (.colourGains, "ColourGains"),
        (.frameDurationLimits, "FrameDurationLimits"), (.afMode, "AfMode"),
        (.lensPosition, "LensPosition"),
    ]

    /// libcamera's names of the controls in the set.
    public var names: [String] { ControlSet.names.filter { contains($0.0) }.map(\.1) }

    public var description: String { names.joined(separator: ", ") }
}
