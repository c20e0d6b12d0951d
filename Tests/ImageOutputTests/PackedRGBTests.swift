import Foundation
import ImageOutput
import ShutterbugCore
import TestSupport
import Testing

@Suite("JPEG from a camera with only packed RGB (vimc, some USB cameras)")
struct PackedRGBTests {
    /// vimc's colour bars as R, G, B.
    let bars: [(UInt8, UInt8, UInt8)] = [(191, 191, 191), (191, 191, 0), (0, 191, 191), (0, 191, 0), (191, 0, 191), (191, 0, 0), (0, 0, 191), (0, 0, 0)]

    func frame(_ format: PixelFormat, width: Int = 128, height: Int = 32, padding: Int = 8) -> FrameCopy {
        let bpp = format.bytesPerPixel!
        let stride = width * bpp + padding
        var bytes = [UInt8](repeating: 0xAB, count: stride * height)
        for y in 0..<height {
            for x in 0..<width {
                let c = bars[x * bars.count / width]
                // DRM's BGR888 is R, G, B in memory; RGB888 is B, G, R; XRGB8888 B, G, R, X
                // (the X byte left at the padding's value: it must be ignored).
                let px = format == .bgr888 ? [c.0, c.1, c.2] : [c.2, c.1, c.0]
                for k in 0..<3 { bytes[y * stride + bpp * x + k] = px[k] }
            }
        }
        return FrameCopy(width: width, height: height, format: format, planes: [PlaneLayout(offset: 0, length: stride * height, stride: stride)], bytes: bytes)
    }

    @Test("BGR888, RGB888 and XRGB8888 (the Pi's viewfinder) convert to the same YUV420, each bar's luma and chroma as BT.601 full range says, the row padding ignored", arguments: [PixelFormat.bgr888, .rgb888, .xrgb8888])
    func conversion(_ format: PixelFormat) throws {
        let yuv = frame(format).yuv420()
        #expect(yuv.format == .yuv420 && yuv.planes.count == 3)
        for (i, c) in bars.enumerated() {
            let x = (2 * i + 1) * 128 / 16
            let (r, g, b) = (Double(c.0), Double(c.1), Double(c.2))
            let y = 0.299 * r + 0.587 * g + 0.114 * b
            let cb = 128 + (b - y) / 1.772, cr = 128 + (r - y) / 1.402
            let got = (Double(yuv.bytes[yuv.planes[0].offset + 5 * yuv.planes[0].stride + x]),
                       Double(yuv.bytes[yuv.planes[1].offset + 2 * yuv.planes[1].stride + x / 2]),
                       Double(yuv.bytes[yuv.planes[2].offset + 2 * yuv.planes[2].stride + x / 2]))
            #expect(abs(got.0 - y) <= 1 && abs(got.1 - cb) <= 1 && abs(got.2 - cr) <= 1, "bar \(i): \(got) vs \((y, cb, cr))")
        }
        // An odd size keeps its last column and row.
        let odd = frame(format, width: 9, height: 5).yuv420()
        #expect(odd.bytes.count == 9 * 5 + 2 * 5 * 3)
    }

    @Test("a BGR888 frame written as JPEG decodes (djpeg) to its colours within a few levels")
    func jpegRoundTrip() async throws {
        let yuv = frame(.bgr888, width: 256, height: 64).yuv420()
        let jpeg = try JPEGEncoder.encode(yuv, quality: 95, facts: nil, scratch: JPEGScratch()) { Array($0) }
        let dir = NSTemporaryDirectory() + "packed-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Data(jpeg).write(to: URL(fileURLWithPath: dir + "/bars.jpg"))
        let r = try await runChild("/usr/bin/djpeg", ["-pnm", "-outfile", dir + "/bars.ppm", dir + "/bars.jpg"])
        #expect(r.status == 0, "\(r.err)")
        let ppm = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/bars.ppm")))
        // "P6\n256 64\n255\n" then RGB rows.
        let header = "P6\n256 64\n255\n".utf8.count
        for (i, c) in bars.enumerated() {
            let x = (2 * i + 1) * 256 / 16, y = 32
            let p = header + (y * 256 + x) * 3
            let got = (Int(ppm[p]), Int(ppm[p + 1]), Int(ppm[p + 2]))
            #expect(abs(got.0 - Int(c.0)) <= 6 && abs(got.1 - Int(c.1)) <= 6 && abs(got.2 - Int(c.2)) <= 6, "bar \(i): \(got) vs \(c)")
        }
    }
}
