import Foundation
import Testing

/// Every numeric option fed what a slip of the keyboard or a script produces: a clear message
/// naming the option and exit status 64, never a trap.
@Suite("numeric options refuse what no camera could mean", .timeLimit(.minutes(3)))
struct NumericInputTests {
    /// Each option with the arguments that make the command otherwise valid.
    static let options: [(option: String, context: [String])] = [
        ("--gain", ["bracket", "--exposures", "1/100"]),
        ("--lens", ["bracket", "--ev", "0", "--camera", "sim:imx708"]),
        ("--ev", ["bracket"]),
        ("--exposures", ["bracket"]),
        ("--focus-steps", ["bracket", "--camera", "sim:imx708"]),
        ("--quality", ["bracket", "--ev", "0"]),
        ("--reserve", ["bracket", "--ev", "0"]),
        ("--scene-lux", ["bracket", "--ev", "0"]),
        ("--subject-distance", ["bracket", "--ev", "0"]),
        ("--drop-probability", ["bracket", "--ev", "0"]),
        ("--ipa-rate", ["bracket", "--ev", "0"]),
        ("--seed", ["bracket", "--ev", "0"]),
        ("--lens", ["focus", "--camera", "sim:imx708"]),
        ("--frames", ["stream"]),
        ("--exposure", ["stream"]),
        ("--gain", ["stream"]),
        ("--lens", ["stream", "--camera", "sim:imx708"]),
        ("--fps", ["stream"]),
        ("--buffers", ["stream"]),
        ("--apply-at", ["stream"]),
    ]
    static let bad = ["inf", "-inf", "nan", "1e308", "-1e308", "1e-300", "-5", "1/1e-300", "1/100,,1/50", "x"]

    @Test("no value makes the process trap: it exits 0 or 64, never by a signal", arguments: options.indices)
    func neverTraps(index: Int) async throws {
        let (option, context) = Self.options[index]
        for value in Self.bad {
            let camera = context.contains("--camera") ? [] : ["--camera", "sim:imx477"]
            let r = try await CLITests.shutterbug(context + camera + [option, value, "--virtual-time"])
            #expect(r.status == 64 || r.status == 0, "\(option) \(value): status \(r.status), \(r.stderr)")
            #expect(!r.stderr.contains("Fatal error"), "\(option) \(value): \(r.stderr)")
            if r.status == 64 { #expect(r.stderr.contains("Error: "), "\(option) \(value): \(r.stderr)") }
        }
    }

    @Test("non-finite and huge values are never accepted", arguments: options.indices)
    func nonFinite(index: Int) async throws {
        let (option, context) = Self.options[index]
        for value in ["inf", "nan", "1e308", "-1e308", "1/1e-300", "1/100,,1/50"] {
            let camera = context.contains("--camera") ? [] : ["--camera", "sim:imx477"]
            let r = try await CLITests.shutterbug(context + camera + [option, value, "--virtual-time"])
            #expect(r.status == 64, "\(option) \(value): status \(r.status), stderr \(r.stderr)")
            #expect(r.stderr.contains(option), "\(option) \(value): the message does not name the option: \(r.stderr)")
        }
    }

    @Test("-0 reads as zero where zero is allowed, and as out of range where it is not")
    func negativeZero() async throws {
        let lens = try await CLITests.shutterbug(["focus", "--camera", "sim:imx708", "--lens", "-0", "--virtual-time"])
        #expect(lens.status == 0, "\(lens.stderr)")
        let gain = try await CLITests.shutterbug(["bracket", "--camera", "sim:imx477", "--exposures", "1/100", "--gain", "-0", "--virtual-time"])
        #expect(gain.status == 64)
        #expect(gain.stderr.contains("--gain must be a finite number in 1...1000"), "\(gain.stderr)")
        // A gain below 1 (ISO 100) is no gain a sensor has: 1e-308 is refused as 0 is.
        let tiny = try await CLITests.shutterbug(["bracket", "--camera", "sim:imx477", "--exposures", "1/100", "--gain", "1e-308", "--virtual-time"])
        #expect(tiny.status == 64 && tiny.stderr.contains("--gain must be a finite number in 1...1000"), "\(tiny.stderr)")
    }

    @Test("a lens position or focus bracket on a camera without a focus motor is a usage error (64) naming a camera that has one")
    func noFocusMotor() async throws {
        for args in [["focus", "--lens", "2"], ["bracket", "--focus-steps", "1,2"], ["bracket", "--lens", "2", "--ev", "0"], ["stream", "--lens", "2", "--frames", "3"]] {
            let r = try await CLITests.shutterbug(args + ["--camera", "sim:imx477", "--virtual-time"])
            #expect(r.status == 64 && r.stderr.contains("no focus motor") && r.stderr.contains("sim:imx708"), "\(args): \(r.status) \(r.stderr)")
        }
    }

    @Test("steps the frames cannot tell apart are a usage error (64), said in the terms they were given in (lens positions for a focus bracket)")
    func indistinguishableSteps() async throws {
        let focus = try await CLITests.shutterbug(["bracket", "--camera", "sim:imx708", "--role", "video", "--virtual-time", "--focus-steps", "1,1.0001"])
        #expect(focus.status == 64, "\(focus.status) \(focus.stderr)")
        #expect(focus.stderr.contains("cannot be told apart") && focus.stderr.contains("lens position within"), "\(focus.stderr)")
        #expect(!focus.stderr.contains("exposure within"), "a focus bracket's refusal speaks of lens positions: \(focus.stderr)")
        let exposures = try await CLITests.shutterbug(["bracket", "--camera", "sim:imx477", "--role", "video", "--virtual-time", "--exposures", "1/100,1/100.2", "--gain", "2"])
        #expect(exposures.status == 64 && exposures.stderr.contains("exposure within one line"), "\(exposures.status) \(exposures.stderr)")
    }

    @Test("a bracket longer than the camera can hold is refused before the camera opens, with the limit")
    func bracketSizeLimit() async throws {
        let steps = Array(repeating: "1/100", count: 20).joined(separator: ",")
        let r = try await CLITests.shutterbug(["bracket", "--camera", "sim:imx477", "--exposures", steps, "--virtual-time"])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("maxBracketedCapturePhotoCount"), "\(r.stderr)")
    }
}
