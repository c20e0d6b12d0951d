import Foundation
import ImageOutput
import TestSupport
import Testing

@Suite("the run's contact sheet")
struct RunSheetTests {
    func thumb(_ grey: UInt8) -> RunSheet.Thumb {
        RunSheet.Thumb(rgb: [UInt8](repeating: grey, count: 128 * 96 * 3), width: 128, height: 96, labels: ["SLOT 0  11-24 10:00:00", "1/100 s  GAIN 1.00"])
    }

    @Test("one slot under a title longer than its tile: the sheet is as wide as the title, and djpeg reads it")
    func oneSlotLongTitle() async throws {
        let title = "ROOF  1 OF 1 SLOTS  EV -2.00,-1.00,0.00,1.00,2.00"
        let jpeg = try RunSheet.jpeg([thumb(128)], title: title)
        let path = NSTemporaryDirectory() + "runsheet-\(UUID().uuidString).jpg"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(jpeg).write(to: URL(fileURLWithPath: path))
        let r = try await runChild("/usr/bin/djpeg", ["-pnm", "-outfile", "/dev/null", path])
        #expect(r.status == 0, "\(r.err)")
        let size = try await runChild("/usr/bin/python3", ["-c", "import sys; d=open(sys.argv[1],'rb').read(); i=d.index(b'\\xff\\xc0'); print(int.from_bytes(d[i+7:i+9],'big'))", path])
        // 12 px either side of the title, 12 px per character at scale 2.
        #expect(Int(size.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 >= 24 + title.count * 12, "\(size.out)")
    }
}
