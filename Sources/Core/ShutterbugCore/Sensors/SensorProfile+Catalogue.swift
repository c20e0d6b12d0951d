/// The Raspberry Pi camera modules, from CAMERA-FACTS §2 and §3.
///
/// Full-resolution timing is the published figure; binned modes take the line time of the
/// driver's line length at its pixel rate where known, else the frame period divided by its
/// lines (marked *derived*). IMX296's integration margin is not published: one line is assumed.
extension SensorProfile {
    private static func us(_ v: Double) -> Duration { .nanoseconds(Int64((v * 1000).rounded())) }
    private static func ms(_ v: Double) -> Duration { .nanoseconds(Int64((v * 1_000_000).rounded())) }

    /// Camera Module 2.
    public static let imx219 = SensorProfile(
        model: "imx219", product: "Camera Module 2",
        modes: [
            SensorMode(width: 3280, height: 2464, minFramePeriod: ms(47.2), lineTime: us(18.90), margin: us(75.6), maxExposure: .seconds(exactly: 11.76), binned: false),
            SensorMode(width: 1920, height: 1080, minFramePeriod: ms(21.02), lineTime: us(18.90), margin: us(75.6), maxExposure: .seconds(exactly: 11.76), binned: false),
            SensorMode(width: 1640, height: 1232, minFramePeriod: ms(23.90), lineTime: us(18.90), margin: us(75.6), maxExposure: .seconds(exactly: 11.76), binned: true),
            SensorMode(width: 640, height: 480, minFramePeriod: ms(9.68), lineTime: us(18.90), margin: us(75.6), maxExposure: .seconds(exactly: 11.76), binned: true),
        ],
        delays: ControlDelays(exposure: 2, gain: 1, vblank: 2),
        gainModel: .reciprocal(base: 256, codes: 0...232),
        minExposureLines: 4, bitDepth: 10, cfa: .rggb, blackLevel: 64,
        lensRange: nil, defaultLensPosition: 0)

    /// HQ Camera.
    public static let imx477 = SensorProfile(
        model: "imx477", product: "HQ Camera",
        modes: [
            SensorMode(width: 4056, height: 3040, minFramePeriod: ms(100.0), lineTime: us(28.57), margin: us(630), maxExposure: .seconds(exactly: 670.74), binned: false),
            SensorMode(width: 2028, height: 1520, minFramePeriod: ms(25.0), lineTime: us(15.17), margin: us(334), maxExposure: .seconds(exactly: 670.74), binned: true),
            SensorMode(width: 1332, height: 990, minFramePeriod: ms(8.333), lineTime: us(7.93), margin: us(174), maxExposure: .seconds(exactly: 670.74), binned: true),
        ],
        delays: ControlDelays(exposure: 2, gain: 2, vblank: 3),
        gainModel: .reciprocal(base: 1024, codes: 0...978),
        minExposureLines: 4, bitDepth: 12, cfa: .rggb, blackLevel: 256,
        lensRange: nil, defaultLensPosition: 0)

    /// Camera Module 3, with its DW9807 voice-coil focus motor.
    public static let imx708 = SensorProfile(
        model: "imx708", product: "Camera Module 3",
        modes: [
            SensorMode(width: 4608, height: 2592, minFramePeriod: ms(69.67), lineTime: us(26.29), margin: us(1262), maxExposure: .seconds(exactly: 112), binned: false),
            SensorMode(width: 2304, height: 1296, minFramePeriod: ms(17.85), lineTime: us(12.45), margin: us(598), maxExposure: .seconds(exactly: 112), binned: true),
            SensorMode(width: 1536, height: 864, minFramePeriod: ms(8.333), lineTime: us(8.90), margin: us(427), maxExposure: .seconds(exactly: 112), binned: true),
        ],
        delays: ControlDelays(exposure: 2, gain: 2, vblank: 3),
        gainModel: .reciprocal(base: 1024, codes: 112...960),
        minExposureLines: 8, bitDepth: 10, cfa: .rggb, blackLevel: 64,
        lensRange: 0...15, defaultLensPosition: 1.0)

    /// Global Shutter Camera.
    public static let imx296 = SensorProfile(
        model: "imx296", product: "Global Shutter Camera",
        modes: [
            SensorMode(width: 1456, height: 1088, minFramePeriod: ms(16.7), lineTime: us(14.81), margin: us(14.81), maxExposure: .seconds(exactly: 15.5), binned: false),
        ],
        delays: ControlDelays(exposure: 2, gain: 2, vblank: 2),
        gainModel: .decibel(stepTenthsOfDB: 1, codes: 0...480),
        minExposureLines: 2, bitDepth: 10, cfa: .rggb, blackLevel: 60,
        lensRange: nil, defaultLensPosition: 0)

    /// Camera Module 1.
    public static let ov5647 = SensorProfile(
        model: "ov5647", product: "Camera Module 1",
        modes: [
            SensorMode(width: 2592, height: 1944, minFramePeriod: ms(63.98), lineTime: us(32.5), margin: us(130), maxExposure: .seconds(exactly: 0.97), binned: false),
            SensorMode(width: 1296, height: 972, minFramePeriod: ms(21.58), lineTime: us(21.0), margin: us(84), maxExposure: .seconds(exactly: 0.97), binned: true),
            SensorMode(width: 640, height: 480, minFramePeriod: ms(16.97), lineTime: us(33.2), margin: us(133), maxExposure: .seconds(exactly: 0.97), binned: true),
        ],
        delays: ControlDelays(exposure: 2, gain: 2, vblank: 2),
        gainModel: .linear(divisor: 16, codes: 16...1023),
        minExposureLines: 4, bitDepth: 10, cfa: .gbrg, blackLevel: 16,
        lensRange: nil, defaultLensPosition: 0)

    /// Every profile, in the order `cameras` lists them.
    public static let catalogue: [SensorProfile] = [.imx219, .imx477, .imx708, .imx296, .ov5647]

    /// The profile for a sensor model name, case-insensitively.
    public static func named(_ model: String) -> SensorProfile? {
        catalogue.first { $0.model == model.lowercased() }
    }
}
