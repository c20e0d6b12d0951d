import Foundation
import ImageOutput
import Testing

/// A process killed mid-capture leaves the sidecar it wrote while the capture ran, and may have
/// renamed a photo into place after it: the next start names that photo in the sidecar.
@Suite("Sidecars a killed process left")
struct InterruptedSidecarTests {
    func sidecar(incomplete: Bool, listed: [String]) -> Data {
        var o: [String: Any] = ["steps": listed.map { ["files": [["path": $0]]] }]
        if incomplete {
            o["incomplete"] = ["error": OutputDirectory.interruptedSidecarError + ": the process ended before the steps listed here were written", "missingSteps": [2, 3]]
        }
        return try! JSONSerialization.data(withJSONObject: o)
    }

    @Test("photos renamed into place after an interrupted sidecar are listed under foundOnRestart, once; a finished sidecar and temporaries are left alone")
    func foundOnRestart() throws {
        let root = NSTemporaryDirectory() + "sb-interrupted-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let dir = try OutputDirectory(path: root, reserve: 0)
        let day = root + "/2026-11-28"
        try FileManager.default.createDirectory(atPath: day, withIntermediateDirectories: true)
        let fm = FileManager.default
        // Capture 6: killed after step 2's DNG was renamed into place, before its sidecar said so.
        #expect(fm.createFile(atPath: day + "/233944_0006_capture.json", contents: sidecar(incomplete: true, listed: ["233944_0006_1.jpg"])), "created")
        for name in ["233944_0006_1.jpg", "233944_0006_2.dng", ".shutterbug-999999-1-0.tmp"] { #expect(fm.createFile(atPath: day + "/" + name, contents: Data([1])), "created") }
        // Capture 7: finished; a stray photo of its number is not its sidecar's business here.
        let finished = sidecar(incomplete: false, listed: ["233950_0007_1.jpg"])
        #expect(fm.createFile(atPath: day + "/233950_0007_capture.json", contents: finished), "created")
        for name in ["233950_0007_1.jpg", "233950_0007_2.jpg"] { #expect(fm.createFile(atPath: day + "/" + name, contents: Data([1])), "created") }

        #expect(dir.listPhotosAfterInterruptedSidecars(template: .default) == 1)
        let car = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: day + "/233944_0006_capture.json"))) as? [String: Any])
        let incomplete = try #require(car["incomplete"] as? [String: Any])
        #expect(incomplete["foundOnRestart"] as? [String] == ["233944_0006_2.dng"])
        #expect(incomplete["missingSteps"] as? [Int] == [2, 3], "the steps stay missing: no frame metadata for them")
        #expect(fm.contents(atPath: day + "/233950_0007_capture.json") == finished)
        // Again: nothing more to list.
        #expect(dir.listPhotosAfterInterruptedSidecars(template: .default) == 0)
    }
}
