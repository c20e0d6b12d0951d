/// The Raspberry Pi camera modules, from CAMERA-FACTS §2 and §3.
///
/// Full-resolution timing is the published figure; binned modes take the line time of the
/// driver's line length at its pixel rate where known, else the frame period divided by its
/// lines (marked *derived*). IMX296's integration margin is not published: one line is assumed.
extension SensorProfile {
    private static func us(_ v: Double) -> Duration { .nanoseconds(Int64((v * 1000).rounded())) }
    /// Where a profile's colour calibration comes from.
    private static func tuning(_ sensor: String, matrices: String) -> String {
        "Raspberry Pi libcamera tuning src/ipa/rpi/vc4/data/\(sensor).json: rpi.awb ct_curve and \(matrices)"
    }
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
        lensRange: nil, defaultLensPosition: 0,
        colour: ColourTuning(
            curve: [2498, 0.9309, 0.3599, 2911, 0.8682, 0.4283, 2919, 0.8358, 0.4621, 3627, 0.7646, 0.5327,
                    4600, 0.6079, 0.6721, 5716, 0.5712, 0.7017, 8575, 0.4331, 0.8037],
            ccms: [(5000, [2.2229345364238413, -0.7596721523178808, -0.46326238410596027,
                           -0.6834893874172185, 2.7118816887417223, -1.02839940397351,
                           -0.2613746357615894, -0.668015927152318, 1.9293905629139072])],
            source: tuning("imx219", matrices: "rpi.nn.awb's single ccm")))

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
        lensRange: nil, defaultLensPosition: 0,
        colour: ColourTuning(
            curve: [2360, 0.6009, 0.3093, 2848, 0.5071, 0.4, 2903, 0.4905, 0.4392, 3628, 0.4261, 0.5564,
                    3643, 0.4228, 0.5623, 4660, 0.3529, 0.68, 5579, 0.3227, 0.7, 6125, 0.3129, 0.71,
                    6671, 0.3065, 0.72, 7217, 0.3014, 0.73, 7763, 0.295, 0.74, 9505, 0.2524, 0.7856],
            ccms: [(2850, [1.97469, -0.71439, -0.26031, -0.43521, 2.09769, -0.66248, -0.04826, -0.84642, 1.89468]),
                   (2960, [2.12952, -0.91185, -0.21768, -0.38018, 1.90789, -0.52771, 0.03988, -1.10079, 2.06092]),
                   (3580, [2.03422, -0.80048, -0.23374, -0.39089, 1.97221, -0.58132, -0.08969, -0.61439, 1.70408]),
                   (4559, [2.15423, -0.98143, -0.17279, -0.38131, 2.14763, -0.76632, -0.10069, -0.54383, 1.64452]),
                   (5881, [2.18464, -0.95493, -0.22971, -0.36826, 2.00298, -0.63471, -0.15219, -0.38055, 1.53274]),
                   (7600, [2.30687, -0.97295, -0.33392, -0.30872, 2.32779, -1.01908, -0.17761, -0.55891, 1.73651])],
            source: tuning("imx477", matrices: "rpi.ccm")))

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
        lensRange: 0...15, defaultLensPosition: 1.0,
        colour: ColourTuning(
            curve: [2498, 0.8733, 0.2606, 2821, 0.7707, 0.3245, 2925, 0.7338, 0.3499, 2926, 0.7193, 0.3603,
                    2951, 0.7144, 0.3639, 2954, 0.7111, 0.3663, 3578, 0.6038, 0.4516, 3717, 0.5861, 0.4669,
                    3784, 0.5786, 0.4737, 4485, 0.5113, 0.5368, 4615, 0.4994, 0.5486, 4671, 0.4927, 0.5554,
                    5753, 0.4274, 0.6246, 5773, 0.4265, 0.6256, 7433, 0.3723, 0.6881],
            ccms: [(2964, [1.72129, -0.45961, -0.26169, -0.30042, 1.56924, -0.26882, 0.15133, -1.13293, 1.98161]),
                   (3610, [1.54474, -0.35082, -0.19391, -0.36989, 1.67926, -0.30936, -0.00524, -0.55197, 1.55722]),
                   (4640, [1.52972, -0.35168, -0.17804, -0.28309, 1.67098, -0.38788, 0.01695, -0.57209, 1.55515]),
                   (5910, [1.56879, -0.42159, -0.14719, -0.27275, 1.59354, -0.32079, -0.02862, -0.40662, 1.43525]),
                   (7590, [1.41424, -0.21092, -0.20332, -0.17646, 1.71734, -0.54087, 0.01297, -0.63111, 1.61814])],
            source: tuning("imx708", matrices: "rpi.ccm")))

    /// Global Shutter Camera.
    public static let imx296 = SensorProfile(
        model: "imx296", product: "Global Shutter Camera",
        modes: [
            SensorMode(width: 1456, height: 1088, minFramePeriod: ms(16.7), lineTime: us(14.81), margin: us(14.81), maxExposure: .seconds(exactly: 15.5), binned: false),
        ],
        delays: ControlDelays(exposure: 2, gain: 2, vblank: 2),
        gainModel: .decibel(stepTenthsOfDB: 1, codes: 0...480),
        minExposureLines: 2, bitDepth: 10, cfa: .rggb, blackLevel: 60,
        lensRange: nil, defaultLensPosition: 0,
        colour: ColourTuning(
            curve: [2500, 0.5386, 0.2458, 2800, 0.4883, 0.3303, 2900, 0.4855, 0.3349, 3620, 0.4203, 0.4367,
                    4560, 0.3455, 0.5444, 5600, 0.2948, 0.6124, 7400, 0.2336, 0.6894],
            ccms: [(5000, [2.1073753846153847, -0.8054946153846154, -0.30188076923076923,
                           -0.43306999999999995, 2.162828076923077, -0.7297680769230768,
                           -0.126655, -0.5027626923076922, 1.6294176923076922])],
            source: tuning("imx296", matrices: "rpi.nn.awb's single ccm")),
        externalTrigger: .init(exposureOffset: .nanoseconds(14_260), enabledBy: "the imx296 driver's trigger_mode=1 (echo 1 > /sys/module/imx296/parameters/trigger_mode)"))

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
        lensRange: nil, defaultLensPosition: 0,
        colour: ColourTuning(
            curve: [2500, 1.0289, 0.4503, 2803, 0.9428, 0.5108, 2914, 0.9406, 0.5127, 3605, 0.8261, 0.6249,
                    4540, 0.7331, 0.7533, 5699, 0.6715, 0.8627, 8625, 0.6081, 1.0012],
            ccms: [(5000, [2.041588151260504, -0.5494553781512606, -0.49214025210084034,
                           -0.5116488235294118, 1.9901442857142857, -0.47849546218487393,
                           -0.10519773109243696, -0.641700168067227, 1.7468953781512604])],
            source: tuning("ov5647", matrices: "rpi.nn.awb's single ccm")))

    /// Every profile, in the order `cameras` lists them.
    public static let catalogue: [SensorProfile] = [.imx219, .imx477, .imx708, .imx296, .ov5647]

    /// The profile for a sensor model name, case-insensitively.
    public static func named(_ model: String) -> SensorProfile? {
        catalogue.first { $0.model == model.lowercased() }
    }
}
