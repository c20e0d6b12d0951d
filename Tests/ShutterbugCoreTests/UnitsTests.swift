import ShutterbugCore
import Testing

@Suite("Units and parsing", .timeLimit(.minutes(3)))
struct UnitsTests {
    @Test("exposures parse in the forms photographers write", arguments: [
        ("1/250", 4_000_000), ("1/8000", 125_000), ("4ms", 4_000_000), ("4000us", 4_000_000),
        ("4000µs", 4_000_000), ("0.5s", 500_000_000), ("0.004", 4_000_000), ("2", 2_000_000_000), ("1/2s", 500_000_000),
    ])
    func parseExposure(text: String, nanoseconds: Int64) throws {
        #expect(try ExposureParser.parse(text).nanosecondsValue == nanoseconds)
    }

    @Test("bad exposures are refused with the accepted forms", arguments: ["", "fast", "1/0", "-4ms", "0", "1/-2"])
    func badExposure(text: String) {
        #expect {
            try ExposureParser.parse(text)
        } throws: { error in
            guard let e = error as? ShutterbugError else { return false }
            return e.code == .invalidArgument && e.message.contains("1/250")
        }
    }

    @Test("ISO maps to gain with ISO 100 = 1.0")
    func iso() {
        #expect(Gain(iso: 100).value == 1.0)
        #expect(Gain(iso: 800).value == 8.0)
        #expect(Gain(3.2).iso == 320)
        #expect(Gain(4).stops == 2)
    }

    @Test("dioptres convert to distances and from AVFoundation's normalised position")
    func dioptres() {
        #expect(Dioptres(2).distance == 0.5)
        #expect(Dioptres.infinity.distance == nil)
        #expect(Dioptres(focusedAt: 0.25).value == 4)
        #expect(Dioptres(normalised: 0, in: 0...15).value == 15)
        #expect(Dioptres(normalised: 1, in: 0...15).value == 0)
        #expect(Dioptres(normalised: 0.5, in: 0...10).value == 5)
    }

    @Test("durations describe themselves for people")
    func describe() {
        #expect(Duration.microseconds(4000).exposureDescription == "1/250 s")
        #expect(Duration.milliseconds(1500).exposureDescription == "1.50 s")
        #expect(Duration.microseconds(33_333).millisecondsDescription == "33.33 ms")
        #expect(SensorTime(nanoseconds: 1_000_000_123).description == "1.000000123")
    }
}

@Suite("Sensor profiles", .timeLimit(.minutes(3)))
struct SensorProfileTests {
    @Test("gain codes round-trip and quantise within one code", arguments: SensorProfile.catalogue)
    func gainModel(profile: SensorProfile) {
        let range = profile.analogueGainRange
        #expect(range.lowerBound >= 1.0 && range.upperBound > 8)
        var g = range.lowerBound
        while g <= range.upperBound {
            let q = profile.gainModel.quantise(g)
            #expect(abs(q / g - 1) < 0.06, "\(profile.model) gain \(g) quantised to \(q)")
            #expect(profile.gainModel.quantise(q) == q)
            g *= 1.37
        }
        #expect(profile.gainModel.quantise(1000) == range.upperBound)
    }

    @Test("published figures: delays, floors and lens")
    func figures() {
        #expect(SensorProfile.imx219.delays.landingOffsets == 3...4)
        #expect(SensorProfile.imx296.delays.landingOffsets == 3...4)
        #expect(SensorProfile.ov5647.delays.landingOffsets == 3...4)
        #expect(SensorProfile.imx477.delays.landingOffsets == 4...5)
        #expect(SensorProfile.imx708.delays.landingOffsets == 4...5)
        #expect(abs(SensorProfile.imx477.fullResolution.maxFrameRate - 10) < 0.01)
        #expect(abs(SensorProfile.imx708.fullResolution.maxFrameRate - 14.35) < 0.01)
        #expect(SensorProfile.imx708.lensRange == 0...15)
        #expect(SensorProfile.imx477.lensRange == nil)
        #expect(SensorProfile.named("IMX477") == .imx477)
        #expect(SensorProfile.named("imx999") == nil)
    }

    @Test("the mode for a size is the smallest that covers it")
    func modeChoice() {
        #expect(SensorProfile.imx477.mode(forWidth: 800, height: 600).width == 1332)
        #expect(SensorProfile.imx477.mode(forWidth: 2000, height: 1500).width == 2028)
        #expect(SensorProfile.imx477.mode(forWidth: 9000, height: 9000).width == 4056)
    }
}

@Suite("Camera controls", .timeLimit(.minutes(1)))
struct CameraControlsTests {
    @Test("isEmpty agrees with the set of controls carried, for none and for each control alone")
    func isEmptyMatchesSet() {
        var each: [CameraControls] = []
        func with(_ f: (inout CameraControls) -> Void) { var c = CameraControls(); f(&c); each.append(c) }
        with { $0.aeEnabled = false }
        with { $0.exposureTime = .milliseconds(10) }
        with { $0.analogueGain = Gain(2) }
        with { $0.exposureValue = -1 }
        with { $0.awbEnabled = true }
        with { $0.colourGains = ColourGains(red: 2, blue: 1.5) }
        with { $0.frameDurationLimits = .milliseconds(10)...(.milliseconds(20)) }
        with { $0.afMode = .manual }
        with { $0.lensPosition = Dioptres(1) }
        #expect(CameraControls().isEmpty && CameraControls().set.isEmpty)
        #expect(Set(each.map(\.set.rawValue)).count == 9, "each sets a control of its own")
        for c in each { #expect(!c.isEmpty && c.set.rawValue.nonzeroBitCount == 1, "\(c.set)") }
    }
}

@Suite("Frame metadata", .timeLimit(.minutes(1)))
struct FrameMetadataValueTests {
    @Test("a value: a copy changed leaves the original alone; equal fields are equal and hash alike, however built")
    func valueSemantics() {
        var a = FrameMetadata(sequence: 7, sensorTimestamp: SensorTime(nanoseconds: 1_000), exposureTime: .microseconds(500))
        a.colourCorrectionMatrix = [1, 0, 0, 0, 1, 0, 0, 0, 1]
        var b = a
        #expect(a == b)
        b.exposureTime = .microseconds(600)
        b.colourCorrectionMatrix?[0] = 2
        #expect(a.exposureTime == .microseconds(500) && a.colourCorrectionMatrix?[0] == 1, "the original is unchanged")
        #expect(b.exposureTime == .microseconds(600) && b.colourCorrectionMatrix?[0] == 2)
        #expect(a != b)
        var c = FrameMetadata(sequence: 7)
        c.sensorTimestamp = SensorTime(nanoseconds: 1_000)
        c.exposureTime = .microseconds(500)
        c.colourCorrectionMatrix = [1, 0, 0, 0, 1, 0, 0, 0, 1]
        #expect(a == c && a.hashValue == c.hashValue, "built apart, equal")
        c.sequence = 8
        #expect(a != c, "the sequence counts")
        #expect(Set([a, b, c, a]).count == 3)
    }
}
