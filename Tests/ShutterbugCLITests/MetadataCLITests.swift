import Foundation
import TestSupport
import Testing

/// What the files say about themselves, read back by exiftool: every format validates, the
/// same facts are written the same way in both, and the sidecar is usable by a program.
@Suite("Metadata: exiftool -validate, same facts in DNG and JPEG, a sidecar a program can use", .serialized, .timeLimit(.minutes(4)))
struct MetadataCLITests {
    static var exe: String { OutputCLITests.exe }
    /// The one warning exiftool gives every libtiff DNG: libtiff writes SubIFDs with the TIFF
    /// "IFD" type (13) where exiftool expects LONG. Both are legal TIFF; exiftool notes it.
    static let subIFDNote = "Non-standard format (ifd) for IFD0 0x014a"

    static func bracket(_ args: [String]) async throws -> (dir: String, files: [String]) {
        let dir = NSTemporaryDirectory() + "sb-meta-\(UUID().uuidString)"
        let r = try await runChild(exe, ["bracket", "--virtual-time", "--role", "video", "--output", dir, "--name", "{capture}_{step}"] + args)
        #expect(r.status == 0, "bracket failed: \(r.err)")
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted().map { dir + "/" + $0 }
        return (dir, files)
    }

    @Test("exiftool -validate -warning -a: nothing for the JPEG, only the SubIFD note for the DNG (Pi 4 and Pi 5 raw)", arguments: ["pi4", "pi5"])
    func validates(platform: String) async throws {
        let b = try await Self.bracket(["--camera", "sim:imx708", "--platform", platform, "--exposures", "2.000014s", "--lens", "0"])
        defer { try? FileManager.default.removeItem(atPath: b.dir) }
        let images = b.files.filter { $0.hasSuffix(".dng") || $0.hasSuffix(".jpg") }
        #expect(images.count == 2)
        var facts: [String: [String: Any]] = [:]
        for file in images {
            let v = try await runChild("/usr/bin/env", ["exiftool", "-validate", "-warning", "-a", "-s", "-s", "-s", file])
            // The first line is the verdict ("OK", "2 Warnings"), each further line a warning.
            let lines = v.out.split(separator: "\n").map(String.init)
            #expect(lines.first == "OK" || lines.first?.contains("Warning") == true, "\(file): \(v.out) \(v.err)")
            let warnings = Array(lines.dropFirst())
            let allowed = file.hasSuffix(".dng") ? warnings.filter { !$0.contains(Self.subIFDNote) } : warnings
            #expect(allowed.isEmpty, "\(file): \(v.out)")
            let j = try await runChild("/usr/bin/env", ["exiftool", "-j", "-n", "-ExposureTime", "-SubjectDistance", file])
            let parsed = try #require(try JSONSerialization.jsonObject(with: Data(j.out.utf8)) as? [[String: Any]])
            facts[(file as NSString).pathExtension] = parsed.first
        }
        // The exposure keeps its precision (the sensor quantises 2.000014 s to whole lines).
        let sidecar = try #require(b.files.first { $0.hasSuffix(".json") })
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: sidecar))) as? [String: Any])
        let frame = try #require(((json["steps"] as? [[String: Any]])?.first?["frame"]) as? [String: Any])
        let actual = try #require(frame["exposureTimeUs"] as? Double) / 1e6
        for (format, f) in facts {
            let t = try #require(f["ExposureTime"] as? Double, "\(format) has no ExposureTime")
            #expect(abs(t - actual) < 1e-6, "\(format) ExposureTime \(t), frame \(actual)")
        }
        // Infinity (lens at 0 dioptres) the same way in both.
        #expect(facts["dng"]?["SubjectDistance"] as? String == facts["jpg"]?["SubjectDistance"] as? String)
        #expect(facts["jpg"]?["SubjectDistance"] as? String == "inf", "\(facts)")
    }

    @Test("the sidecar: files relative to it, discarded frames with every value they reported, no integer past 2^53 as a number")
    func sidecar() async throws {
        // Dropped frames make the scheduler discard some: their metadata must be there too.
        let b = try await Self.bracket(["--camera", "sim:imx477", "--ev", "-1,0,1", "--drop-probability", "0.3", "--seed", "3"])
        defer { try? FileManager.default.removeItem(atPath: b.dir) }
        let sidecar = try #require(b.files.first { $0.hasSuffix(".json") })
        let text = try String(contentsOfFile: sidecar, encoding: .utf8)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let discarded = try #require((json["resolved"] as? [String: Any])?["discarded"] as? [[String: Any]])
        #expect(!discarded.isEmpty, "seed 3 with drops discards a frame; nothing to check")
        for d in discarded {
            let f = try #require(d["frame"] as? [String: Any], "discarded frame without its metadata: \(d)")
            #expect(f["sequence"] as? Int == d["sequence"] as? Int)
            #expect(f["exposureTimeUs"] is Double && f["colourCorrectionMatrix"] is [Double] && f["sensorTimestampNs"] is Int)
        }
        for step in try #require(json["steps"] as? [[String: Any]]) {
            for file in try #require(step["files"] as? [[String: Any]]) {
                let path = try #require(file["path"] as? String)
                #expect(!path.hasPrefix("/") && FileManager.default.fileExists(atPath: (sidecar as NSString).deletingLastPathComponent + "/" + path))
                #expect(file["width"] is Int && file["height"] is Int && file["bytes"] is Int)
            }
        }
        // Every bare integer in the text fits a double exactly.
        let regex = try NSRegularExpression(pattern: #"(?<![\w."])-?\d{16,}(?![\w."])"#)
        let big = regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { Range($0.range, in: text).map { String(text[$0]) } }
            .filter { (Int64($0)?.magnitude ?? .max) > 1 << 53 }
        #expect(big.isEmpty, "integers past 2^53 as JSON numbers: \(big)")
    }
}

/// `bracket --contact-sheet`: one JPEG with every step, read back by djpeg.
@Suite("Contact sheet", .timeLimit(.minutes(3)))
struct ContactSheetCLITests {
    /// Decodes a JPEG with djpeg to (width, height, RGB bytes).
    static func decode(_ path: String) async throws -> (Int, Int, [UInt8]) {
        let r = try await runChild("/usr/bin/env", ["sh", "-c", "djpeg -pnm \"$1\" | od -An -v -tu1 -w1000000", "sh", path])
        let bytes = r.out.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { UInt8($0) }
        // "P6\nW H\n255\n" then pixels.
        let text = String(decoding: bytes.prefix(32), as: UTF8.self).split(separator: "\n")
        let size = text[1].split(separator: " ").compactMap { Int($0) }
        let header = text[0].utf8.count + text[1].utf8.count + text[2].utf8.count + 3
        return (size[0], size[1], Array(bytes[header...]))
    }

    @Test("three steps side by side, brighter left to right as the EV rises, labels drawn under each")
    func sheet() async throws {
        let (dir, files) = try await MetadataCLITests.bracket(["--camera", "sim:imx477", "--ev", "-2,0,2", "--format", "jpeg", "--contact-sheet"])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sheet = try #require(files.first { $0.hasSuffix("_sheet.jpg") }, "no contact sheet in \(files)")
        let v = try await runChild("/usr/bin/env", ["exiftool", "-validate", "-warning", "-a", "-s", "-s", "-s", sheet])
        #expect(v.out.trimmingCharacters(in: .whitespacesAndNewlines) == "OK", "exiftool -validate on the sheet: \(v.out)")
        let (w, h, rgb) = try await Self.decode(sheet)
        // Three 480-pixel tiles with 16-pixel gaps.
        #expect(w == 16 + 3 * (480 + 16), "sheet \(w)x\(h)")
        try #require(rgb.count == w * h * 3)
        func mean(_ x0: Int, _ y0: Int, _ x1: Int, _ y1: Int) -> Double {
            var s = 0.0
            for y in y0..<y1 { for x in x0..<x1 { s += Double(rgb[(y * w + x) * 3 + 1]) } }
            return s / Double((x1 - x0) * (y1 - y0))
        }
        let tiles = (0..<3).map { i in mean(16 + i * 496 + 40, 40, 16 + i * 496 + 440, 200) }
        #expect(tiles[0] < tiles[1] && tiles[1] < tiles[2], "tile brightness \(tiles)")
        // The label band under each picture (the tile's height follows the stream's aspect):
        // some pixels are text-bright on the dark ground.
        let sidecar = try #require(files.first { $0.hasSuffix(".json") })
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: sidecar))) as? [String: Any])
        #expect((json["contactSheet"] as? String).map { sheet.hasSuffix($0) } == true, "sidecar names the sheet: \(json["contactSheet"] ?? "nothing")")
        let frame = try #require(((json["steps"] as? [[String: Any]])?.first?["files"] as? [[String: Any]])?.first)
        let th = (frame["height"] as? Int ?? 1080) * 480 / (frame["width"] as? Int ?? 1920)
        var bright = 0
        for y in (16 + th + 8)..<(16 + th + 8 + 3 * 20) {
            for x in 16..<(16 + 480) where rgb[(y * w + x) * 3 + 1] > 200 { bright += 1 }
        }
        #expect(bright > 300, "no label text under the first tile (\(bright) bright pixels)")
    }

    @Test("--contact-sheet without --output is refused with the reason")
    func needsOutput() async throws {
        let r = try await runChild(MetadataCLITests.exe, ["bracket", "--camera", "sim:imx477", "--ev", "0", "--contact-sheet"])
        #expect(r.status == 64 && r.err.contains("--output"), "\(r.status) \(r.err)")
    }
}

/// `--preview auto` where there is no display (the unit tier's machine): capture carries on,
/// one line says why. On a machine with a display the line says where the preview is.
@Suite("--preview without a display", .timeLimit(.minutes(3)))
struct HeadlessPreviewCLITests {
    @Test("stream, bracket and focus with --preview auto run, with exactly one line about the preview", arguments: [
        ["stream", "--camera", "sim:imx477", "--frames", "3", "--virtual-time"],
        ["bracket", "--camera", "sim:imx477", "--ev", "-1,0,1", "--role", "video", "--virtual-time"],
        ["focus", "--camera", "sim:imx708", "--lens", "1", "--virtual-time"],
    ])
    func headless(args: [String]) async throws {
        let r = try await runChild(MetadataCLITests.exe, args + ["--preview", "auto"])
        #expect(r.status == 0, "\(args[0]): \(r.err)")
        let lines = r.err.split(separator: "\n").filter { $0.contains("preview off") || $0.contains("preview on") }
        #expect(lines.count == 1, "\(args[0]) said about the preview: \(lines)")
        if !FileManager.default.fileExists(atPath: "/dev/dri") {
            #expect(lines.first?.contains("preview off: no display device") == true, "\(lines)")
        }
    }

    @Test("shutterbug preview with no display to show on exits 69 (unavailable) with the reason",
          .enabled(if: !FileManager.default.fileExists(atPath: "/dev/dri"), "this machine has a display device (the virtual board's tests cover one)"))
    func previewNeedsADisplay() async throws {
        let r = try await runChild(MetadataCLITests.exe, ["preview", "--camera", "sim:imx477", "--duration", "1"])
        #expect(r.status == 69 && r.err.contains("preview off: no display device"), "\(r.status) \(r.err)")
    }
}
