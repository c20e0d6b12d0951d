import Foundation
import ImageOutput
import TestSupport
import Testing

/// The `shutterbug` binary as a person runs it: output, JSON, and messages for bad input.
@Suite("shutterbug CLI", .timeLimit(.minutes(3)))
struct CLITests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs the shutterbug built next to this test bundle (SwiftPM puts both in one folder).
    static func shutterbug(_ args: String...) async throws -> Run { try await shutterbug(args) }

    /// Runs the binary off Swift's cooperative pool (a GCD thread waits for it), so a test
    /// waiting for a process never starves the async work of tests running beside it.
    static func shutterbug(_ args: [String]) async throws -> Run {
        try await offPool { try runShutterbug(args) }
    }

    static func shutterbugWithEnvironment(_ environment: [String: String], _ args: String...) async throws -> Run {
        try await offPool { try runShutterbug(args, environment: environment) }
    }

    static func runShutterbug(_ args: [String], environment: [String: String] = [:]) throws -> Run {
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("shutterbug").path
        guard FileManager.default.isExecutableFile(atPath: exe) else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: exe])
        }
        let r = try runChildBlocking(exe, args, environment: environment)
        return Run(status: r.status, stdout: r.out, stderr: r.err)
    }

    @Test("stream prints one line per frame with what it was exposed with")
    func stream() async throws {
        let r = try await Self.shutterbug("stream", "--camera", "sim:imx477", "--frames", "8", "--virtual-time")
        #expect(r.status == 0, "\(r.stderr)")
        let frames = r.stdout.split(separator: "\n").filter { $0.hasPrefix("#") }
        #expect(frames.count == 8)
        #expect(frames.allSatisfy { $0.contains("exp ") && $0.contains("gain ") && $0.contains("fd ") && $0.contains("t=") })
        #expect(r.stdout.contains("8 frames (6 start-up), 0 dropped"), "\(r.stdout)")
        #expect(frames.prefix(6).allSatisfy { $0.contains("[startup]") } && !frames.dropFirst(6).contains { $0.contains("[startup]") })
    }

    @Test("in virtual time a stall ends stream and fails focus as in real time: seen by the frames' own times, not missed because the CPU never waited")
    func stallInVirtualTime() async throws {
        let r = try await Self.shutterbug("stream", "--camera", "sim:imx477", "--role", "video", "--frames", "60", "--virtual-time", "--fault-stall", "24:30")
        #expect(r.status == 1, "\(r.stdout)")
        #expect(r.stderr.contains("nothing arrived for 30.0 s on the camera's clock"), "\(r.stderr)")
        let frames = r.stdout.split(separator: "\n").filter { $0.hasPrefix("#") }
        #expect(frames.last?.hasPrefix("#   23") == true, "no frame after the stall is printed: \(frames.suffix(2))")
        // A lock's frame limit counts frames that came, not the numbers a stall skipped.
        let f = try await Self.shutterbug("focus", "--camera", "sim:imx708", "--lens", "12", "--virtual-time", "--fault-stall", "24:1.9")
        #expect(f.status == 0, "\(f.stderr)")
        let g = try await Self.shutterbug("focus", "--camera", "sim:imx708", "--lens", "12", "--virtual-time", "--fault-stall", "24:2.5")
        #expect(g.status != 0 && g.stderr.contains("no frame came back for 2.5 s"), "\(g.stderr)")
    }

    @Test("without --camera and no libcamera camera it says it uses the simulated IMX477")
    func defaultCamera() async throws {
        let r = try await Self.shutterbug("stream", "--frames", "2", "--virtual-time")
        #expect(r.status == 0)
        let real = try await Self.shutterbug("cameras", "--json").stdout.split(separator: "\n").contains { $0.contains("\"simulated\":false") }
        if !real {
            #expect(r.stderr.contains("sim:imx477"))
            #expect(r.stdout.contains("camera sim:imx477"))
        }
    }

    @Test("a change queued with a request is reported on the frame that first carries it")
    func applyAt() async throws {
        let r = try await Self.shutterbug("stream", "--camera", "sim:imx219", "--frames", "16", "--virtual-time", "--landing", "early",
                                    "--apply-at", "4", "--exposure", "1/250", "--gain", "2")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("3 frames after the request's own frame 4"), "\(r.stdout)")
    }

    @Test("DNG output asks for the raw stream in the processed stream's own mode, and the mode and buffers are reported")
    func sensorMode() async throws {
        let root = NSTemporaryDirectory() + "sb-mode-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let r = try await Self.shutterbug("bracket", "--camera", "sim:imx477", "--role", "video", "--virtual-time", "--exposures", "1/100,1/50",
                                          "--format", "dng", "--output", root, "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        let summary = try JSONSerialization.jsonObject(with: Data(lines.last!.utf8)) as! [String: Any]
        // The summary is the API's capture report (one Codable type) with the command's own
        // keys added; the lines before it are its steps.
        let report = try JSONDecoder().decode(CaptureReport.self, from: Data(lines.last!.utf8))
        let steps = try lines.dropLast().map { try JSONDecoder().decode(CaptureReport.Step.self, from: Data($0.utf8)) }
        #expect(report.steps == steps && steps.map(\.step) == [1, 2] && report.complete, "\(report)")
        #expect(steps.allSatisfy { $0.files?.count == 1 && $0.files!.allSatisfy { FileManager.default.fileExists(atPath: $0) } }, "\(steps)")
        let mode = try #require(summary["sensorMode"] as? [String: Any])
        // 1920x1080 video runs in the 2028x1520 40 fps mode; the raw stream's default (the full
        // 4056x3040 at 10 fps) would have slowed the sensor down.
        #expect(mode["width"] as? Int == 2028 && mode["height"] as? Int == 1520 && mode["bitDepth"] as? Int == 12, "\(mode)")
        #expect(mode["maxFps"] as? Double == 40)
        #expect((summary["bufferBytes"] as? Int ?? 0) > 0)
        // --raw-size picks the mode; it means nothing without DNG, and says so.
        let picked = try await Self.shutterbug("bracket", "--camera", "sim:imx477", "--role", "video", "--virtual-time", "--exposures", "1/100",
                                               "--format", "dng", "--output", root, "--raw-size", "4056x3040", "--json")
        let pickedMode = try JSONSerialization.jsonObject(with: Data(picked.stdout.split(separator: "\n").last!.utf8)) as! [String: Any]
        #expect((pickedMode["sensorMode"] as? [String: Any])?["width"] as? Int == 4056, "\(picked.stderr)")
        let noDNG = try await Self.shutterbug("bracket", "--camera", "sim:imx477", "--exposures", "1/100", "--raw-size", "2028x1520")
        #expect(noDNG.status == 64 && noDNG.stderr.contains("only DNG output uses"), "\(noDNG.stderr)")
        let s = try await Self.shutterbug("stream", "--camera", "sim:imx708", "--frames", "2", "--virtual-time")
        #expect(s.stdout.contains("sensor mode 1536x864 10-bit, up to 120.00 fps") && s.stdout.contains("buffers 5 × "), "\(s.stdout)")
    }

    @Test("a configuration over the memory budget exits 64 with the bytes and the budget")
    func memoryBudget() async throws {
        let r = try await Self.shutterbugWithEnvironment(["SHUTTERBUG_MEMORY_BUDGET_MB": "100"], "bracket", "--camera", "sim:imx477", "--role", "still", "--virtual-time",
                                                         "--exposures", "1/100,1/50,1/25", "--format", "dng", "--output", NSTemporaryDirectory() + "sb-budget-unused")
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("MB raw = ") && r.stderr.contains("over the memory budget of 100 MB (SHUTTERBUG_MEMORY_BUDGET_MB)"), "\(r.stderr)")
    }

    @Test("--json prints one object per frame and a summary")
    func json() async throws {
        let r = try await Self.shutterbug("stream", "--camera", "sim:imx708", "--frames", "5", "--virtual-time", "--json", "--lens", "2")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 6)
        for l in lines {
            let obj = try JSONSerialization.jsonObject(with: Data(l.utf8)) as? [String: Any]
            #expect(obj != nil)
        }
        let last = try JSONSerialization.jsonObject(with: Data(lines.last!.utf8)) as! [String: Any]
        #expect(last["summary"] as? Bool == true)
        #expect(last["frames"] as? Int == 5)
        // What the Pi reports besides exposure and gain is carried through.
        let first = try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as! [String: Any]
        #expect((first["colourCorrectionMatrix"] as? [Double])?.count == 9)
        #expect((first["sensorBlackLevels"] as? [Double])?.count == 4)
        #expect(first["sensorTemperatureC"] as? Double != nil && first["focusFoM"] as? Int != nil)
        #expect(first["afState"] as? String == "idle", "manual focus: the AF is idle")
        #expect((first["wallClockUTC"] as? String)?.hasSuffix("Z") == true)
        #expect(first["status"] as? String == "startup")
    }

    @Test("settings beyond the sensor are adjusted to what it can do, and the adjustment said", arguments: [
        (["stream", "--camera", "sim:imx219", "--exposure", "20s"], "to 11.76 s"),
        (["stream", "--camera", "sim:imx477", "--gain", "50"], "gain 50.00 to 22.26"),
        (["stream", "--camera", "sim:imx708", "--lens", "20"], "to 15.00 dpt"),
    ])
    func adjusted(args: [String], expected: String) async throws {
        let r = try await Self.shutterbug(args + ["--frames", "3", "--virtual-time"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("adjusted: ") && r.stderr.contains(expected), "stderr: \(r.stderr)")
    }

    @Test("bad values name the problem and the accepted range", arguments: [
        (["stream", "--camera", "sim:imx477", "--lens", "2"], "no focus motor"),
        (["stream", "--camera", "sim:nope"], "sim:imx219, sim:imx477"),
        (["stream", "--camera", "sim:imx477", "--exposure", "fast"], "1/250"),
        (["stream", "--camera", "sim:imx477", "--drop-probability", "2"], "0...0.99"),
        (["stream", "--camera", "sim:imx477", "--frames", "0"], "1...1000000"),
        (["stream", "--camera", "/base/no/such"], "no libcamera camera"),
    ])
    func badInput(args: [String], expected: String) async throws {
        let r = try await Self.shutterbug(args)
        #expect(r.status != 0)
        #expect(r.stderr.contains(expected), "stderr: \(r.stderr)")
    }

    @Test("cameras lists the simulated profiles")
    func cameras() async throws {
        let r = try await Self.shutterbug("cameras")
        #expect(r.status == 0)
        for m in ["imx219", "imx477", "imx708", "imx296", "ov5647"] { #expect(r.stdout.contains("sim:\(m)")) }
    }
}
