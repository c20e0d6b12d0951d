import Foundation
import TestSupport
import Testing

/// One rule for DNG's raw stream in every command: the processed stream's own sensor mode
/// unless --raw-size says otherwise, and a line saying which.
@Suite("The raw stream's sensor mode, the same in every command", .timeLimit(.minutes(3)))
struct RawStreamCLITests {
    /// Each command writing DNG at 640x480 on the HQ camera (whose 1332x990 mode streams that
    /// size at 120 fps; a raw stream left to itself asks for 4056x3040 at 10).
    static let commands: [[String]] = [
        ["bracket", "--role", "viewfinder", "--ev", "0"],
        ["timelapse", "--size", "640x480", "--interval", "2s", "--count", "1"],
        ["trigger", "--role", "viewfinder", "--simulated", "regular:300ms", "--count", "1"],
    ]

    /// The DNGs' widths the sidecars under `dir` list.
    func dngWidths(_ dir: String) throws -> [Int] {
        let sidecars = (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? []).filter { $0.hasSuffix("_capture.json") }
        return try sidecars.flatMap { path -> [Int] in
            let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/" + path))) as? [String: Any]
            let steps = json?["steps"] as? [[String: Any]] ?? []
            return steps.flatMap { ($0["files"] as? [[String: Any]] ?? []).filter { $0["format"] as? String == "dng" }.compactMap { $0["width"] as? Int } }
        }
    }

    @Test("DNG in the processed stream's mode, said on standard error; --raw-size picks another, said too", arguments: commands.indices)
    func rawMode(index: Int) async throws {
        for rawSize in [nil, "4056x3040"] {
            let dir = NSTemporaryDirectory() + "sb-raw-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let args = Self.commands[index] + ["--camera", "sim:imx477", "--virtual-time", "--format", "dng,jpeg", "--output", dir] + (rawSize.map { ["--raw-size", $0] } ?? [])
            let r = try await CLITests.shutterbug(args)
            #expect(r.status == 0, "\(args): \(r.stderr)")
            let widths = try dngWidths(dir)
            #expect(!widths.isEmpty && widths.allSatisfy { $0 == (rawSize == nil ? 1332 : 4056) }, "\(args): DNG widths \(widths)")
            let says = rawSize == nil ? "DNG's raw stream: sensor mode 1332x990" : "--raw-size puts the sensor in 4056x3040"
            #expect(r.stderr.contains(says), "\(args): \(r.stderr)")
        }
    }
}
