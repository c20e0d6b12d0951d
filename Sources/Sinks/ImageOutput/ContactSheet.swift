import CImageCodecs
import ShutterbugCore

/// One JPEG with a bracket's steps side by side, each labelled with what the frame reported
/// (exposure, gain, frame number) and with its luminance histogram underneath, so a person
/// can look instead of reading numbers.
public enum ContactSheet {
    /// A step's picture and what to write under it.
    public struct Tile: Sendable {
        /// 8-bit sRGB, row-major.
        public var rgb: [UInt8]
        public var width: Int
        public var height: Int
        /// 256 bins of luma (Y', 0...255) over the whole frame.
        public var histogram: [Int]
        public var labels: [String]
    }

    static let tileWidth = 480
    static let pad = 16
    static let scale = 2
    static let histogramHeight = 96
    static var lineHeight: Int { (BitmapFont.height + 3) * scale }

    /// A tile from a YUV420 frame: box-filtered to `tileWidth`, the histogram from every
    /// second pixel of every second row of the full frame.
    public static func tile(yuv frame: FrameCopy, labels: [String]) -> Tile {
        let tw = min(tileWidth, frame.width)
        let th = max(1, frame.height * tw / max(frame.width, 1))
        var rgb = [UInt8](repeating: 0, count: tw * th * 3)
        var histogram = [Int](repeating: 0, count: 256)
        frame.bytes.withUnsafeBufferPointer { src in
            let yp = frame.planes[0], up = frame.planes[1], vp = frame.planes[2]
            for y in 0..<th {
                let y0 = y * frame.height / th, y1 = max(y0 + 1, (y + 1) * frame.height / th)
                for x in 0..<tw {
                    let x0 = x * frame.width / tw, x1 = max(x0 + 1, (x + 1) * frame.width / tw)
                    let p = YUVBox.mean(src, planes: (yp, up, vp), rows: y0..<y1, columns: x0..<x1,
                                        rowStep: max(1, (y1 - y0) / 4), columnStep: max(1, (x1 - x0) / 4))
                    let o = (y * tw + x) * 3
                    (rgb[o], rgb[o + 1], rgb[o + 2]) = p
                }
            }
            for yy in stride(from: 0, to: frame.height, by: 2) {
                let row = yp.offset + yy * yp.stride
                for xx in stride(from: 0, to: frame.width, by: 2) { histogram[Int(src[row + xx])] += 1 }
            }
        }
        return Tile(rgb: rgb, width: tw, height: th, histogram: histogram, labels: labels)
    }

    /// A small picture of a YUV420 frame, `width` wide: each pixel a box average.
    public static func thumbnail(yuv frame: FrameCopy, width: Int) -> (rgb: [UInt8], width: Int, height: Int) {
        let tw = max(1, min(width, frame.width))
        let th = max(1, frame.height * tw / max(frame.width, 1))
        var rgb = [UInt8](repeating: 0, count: tw * th * 3)
        frame.bytes.withUnsafeBufferPointer { src in
            for y in 0..<th {
                let y0 = y * frame.height / th, y1 = max(y0 + 1, (y + 1) * frame.height / th)
                for x in 0..<tw {
                    let x0 = x * frame.width / tw, x1 = max(x0 + 1, (x + 1) * frame.width / tw)
                    let p = YUVBox.mean(src, planes: (frame.planes[0], frame.planes[1], frame.planes[2]), rows: y0..<y1, columns: x0..<x1,
                                        rowStep: max(1, (y1 - y0) / 4), columnStep: max(1, (x1 - x0) / 4))
                    let o = (y * tw + x) * 3
                    (rgb[o], rgb[o + 1], rgb[o + 2]) = p
                }
            }
        }
        return (rgb, tw, th)
    }

    /// A tile from an 8-bit sRGB picture (a DNG's preview), its histogram from its own luma.
    public static func tile(rgb: [UInt8], width: Int, height: Int, labels: [String]) -> Tile {
        var histogram = [Int](repeating: 0, count: 256)
        for i in stride(from: 0, to: width * height * 3, by: 3) {
            histogram[Int(clamp8(0.299 * Double(rgb[i]) + 0.587 * Double(rgb[i + 1]) + 0.114 * Double(rgb[i + 2])))] += 1
        }
        // Nearest-neighbour up or down to the tile width: the preview is already box-filtered.
        let tw = tileWidth, th = max(1, height * tw / max(width, 1))
        var out = [UInt8](repeating: 0, count: tw * th * 3)
        for y in 0..<th {
            let sy = min(height - 1, y * height / th)
            for x in 0..<tw {
                let sx = min(width - 1, x * width / tw)
                for c in 0..<3 { out[(y * tw + x) * 3 + c] = rgb[(sy * width + sx) * 3 + c] }
            }
        }
        return Tile(rgb: out, width: tw, height: th, histogram: histogram, labels: labels)
    }

    /// The sheet as 8-bit sRGB: tiles left to right on a dark ground, labels, histograms.
    public static func render(_ tiles: [Tile]) -> (rgb: [UInt8], width: Int, height: Int) {
        let labelLines = tiles.map(\.labels.count).max() ?? 0
        let tileHeight = tiles.map(\.height).max() ?? 0
        let width = ((pad + tiles.count * (tileWidth + pad)) + 1) & ~1
        let height = ((pad + tileHeight + pad / 2 + labelLines * lineHeight + pad / 2 + histogramHeight + pad) + 1) & ~1
        var canvas = Canvas(width: width, height: height, fill: (34, 34, 34))
        for (i, t) in tiles.enumerated() {
            let x0 = pad + i * (tileWidth + pad)
            canvas.blit(t.rgb, width: t.width, height: t.height, at: (x0 + (tileWidth - t.width) / 2, pad))
            var y = pad + tileHeight + pad / 2
            for line in t.labels {
                canvas.text(line, at: (x0, y), colour: (235, 235, 235))
                y += lineHeight
            }
            y = pad + tileHeight + pad / 2 + labelLines * lineHeight + pad / 2
            canvas.histogram(t.histogram, in: (x0, y, tileWidth, histogramHeight))
        }
        return (canvas.pixels, width, height)
    }

    /// The sheet as a JPEG (sYCC, 4:2:0).
    public static func jpeg(_ tiles: [Tile], quality: Int = 90) throws -> [UInt8] {
        let (rgb, w, h) = render(tiles)
        return try jpeg(rgb: rgb, width: w, height: h, quality: quality)
    }

    /// An 8-bit sRGB picture of even width and height as a JPEG (sYCC, 4:2:0).
    public static func jpeg(rgb: [UInt8], width w: Int, height h: Int, quality: Int) throws -> [UInt8] {
        var yuv = [UInt8](repeating: 128, count: w * h + 2 * (w / 2) * (h / 2))
        let cOffset = w * h, vOffset = cOffset + (w / 2) * (h / 2)
        for y in 0..<h {
            for x in 0..<w {
                let o = (y * w + x) * 3
                yuv[y * w + x] = clamp8(0.299 * Double(rgb[o]) + 0.587 * Double(rgb[o + 1]) + 0.114 * Double(rgb[o + 2]))
            }
        }
        for y in 0..<(h / 2) {
            for x in 0..<(w / 2) {
                var r = 0.0, g = 0.0, b = 0.0
                for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                    let o = ((2 * y + dy) * w + 2 * x + dx) * 3
                    r += Double(rgb[o])
                    g += Double(rgb[o + 1])
                    b += Double(rgb[o + 2])
                }
                r /= 4
                g /= 4
                b /= 4
                yuv[cOffset + y * (w / 2) + x] = clamp8(128 - 0.168736 * r - 0.331264 * g + 0.5 * b)
                yuv[vOffset + y * (w / 2) + x] = clamp8(128 + 0.5 * r - 0.418688 * g - 0.081312 * b)
            }
        }
        let planes = [PlaneLayout(offset: 0, length: w * h, stride: w),
                      PlaneLayout(offset: cOffset, length: (w / 2) * (h / 2), stride: w / 2),
                      PlaneLayout(offset: vOffset, length: (w / 2) * (h / 2), stride: w / 2)]
        var buffer: UnsafeMutablePointer<UInt8>?
        var capacity = 0
        defer { sbi_free(buffer) }
        let length = try yuv.withUnsafeBufferPointer {
            try JPEGEncoder.encodePlanes($0.baseAddress!, planes: planes, width: w, height: h, quality: quality, app1: [], buffer: &buffer, capacity: &capacity)
        }
        return Array(UnsafeBufferPointer(start: buffer, count: length))
    }

    /// The lines under a step: what was asked, what the frame reported, which frame.
    public static func labels(step: Int, of steps: Int, requested: String, metadata m: FrameMetadata) -> [String] {
        var exposure = m.exposureTime.map(\.exposureDescription) ?? "-"
        if let g = m.totalGain { exposure += "  GAIN " + String(format2: g.value) }
        var last = "FRAME \(m.sequence)"
        if let l = m.lensPosition { last += "  LENS " + String(format2: l.value) }
        return ["STEP \(step)/\(steps)  \(requested)", exposure, last]
    }

    @inline(__always) static func clamp8(_ v: Double) -> UInt8 { UInt8(min(max(v.rounded(), 0), 255)) }
}

/// An 8-bit RGB drawing surface.
struct Canvas {
    var width: Int
    var height: Int
    var pixels: [UInt8]

    init(width: Int, height: Int, fill: (UInt8, UInt8, UInt8)) {
        self.width = width
        self.height = height
        pixels = [UInt8](repeating: 0, count: width * height * 3)
        rect((0, 0, width, height), fill)
    }

    mutating func set(_ x: Int, _ y: Int, _ c: (UInt8, UInt8, UInt8)) {
        guard x >= 0, y >= 0, x < width, y < height else { return }
        let o = (y * width + x) * 3
        pixels[o] = c.0
        pixels[o + 1] = c.1
        pixels[o + 2] = c.2
    }

    /// Fills the part of `r` on the canvas (none, where it lies outside).
    mutating func rect(_ r: (x: Int, y: Int, w: Int, h: Int), _ c: (UInt8, UInt8, UInt8)) {
        let x0 = max(0, r.x), x1 = min(width, r.x + r.w), y0 = max(0, r.y), y1 = min(height, r.y + r.h)
        guard x0 < x1, y0 < y1 else { return }
        for y in y0..<y1 {
            for x in x0..<x1 { set(x, y, c) }
        }
    }

    mutating func blit(_ rgb: [UInt8], width w: Int, height h: Int, at p: (x: Int, y: Int)) {
        for y in 0..<h {
            for x in 0..<w {
                let o = (y * w + x) * 3
                set(p.x + x, p.y + y, (rgb[o], rgb[o + 1], rgb[o + 2]))
            }
        }
    }

    mutating func text(_ s: String, at p: (x: Int, y: Int), colour: (UInt8, UInt8, UInt8)) {
        let k = ContactSheet.scale
        var x = p.x
        for ch in s {
            let bits = BitmapFont.glyph(ch)
            for gy in 0..<BitmapFont.height {
                for gx in 0..<BitmapFont.width where bits[gy * BitmapFont.width + gx] {
                    rect((x + gx * k, p.y + gy * k, k, k), colour)
                }
            }
            x += (BitmapFont.width + 1) * k
        }
    }

    /// Bars of the bins' counts (square root, so shadows and highlights stay visible), with
    /// the shadow and highlight ends marked red when pixels clip there.
    mutating func histogram(_ bins: [Int], in r: (x: Int, y: Int, w: Int, h: Int)) {
        rect(r, (16, 16, 16))
        let total = max(bins.reduce(0, +), 1)
        let top = Double(bins.max() ?? 1).squareRoot()
        for x in 0..<r.w {
            let lo = x * bins.count / r.w, hi = max(lo + 1, (x + 1) * bins.count / r.w)
            let v = Double(bins[lo..<hi].max() ?? 0).squareRoot() / max(top, 1)
            let bar = Int((v * Double(r.h - 2)).rounded())
            rect((r.x + x, r.y + r.h - 1 - bar, 1, bar), (200, 200, 200))
        }
        // More than 0.5% of pixels at 0 or 255: clipped.
        if Double(bins[0]) / Double(total) > 0.005 { rect((r.x, r.y, 4, r.h), (220, 40, 40)) }
        if Double(bins[bins.count - 1]) / Double(total) > 0.005 { rect((r.x + r.w - 4, r.y, 4, r.h), (220, 40, 40)) }
    }
}

/// The mean colour of a box of a YUV420 frame, as 8-bit RGB (BT.601 full range, as the ISP's
/// YUV is): contact-sheet tiles and keogram columns.
enum YUVBox {
    static func mean(_ src: UnsafeBufferPointer<UInt8>, planes: (PlaneLayout, PlaneLayout, PlaneLayout), rows: Range<Int>, columns: Range<Int>,
                     rowStep: Int = 1, columnStep: Int = 1) -> (UInt8, UInt8, UInt8) {
        let (yp, up, vp) = planes
        var sy = 0, su = 0, sv = 0, n = 0
        for yy in stride(from: rows.lowerBound, to: rows.upperBound, by: rowStep) {
            for xx in stride(from: columns.lowerBound, to: columns.upperBound, by: columnStep) {
                sy += Int(src[yp.offset + yy * yp.stride + xx])
                su += Int(src[up.offset + (yy / 2) * up.stride + xx / 2])
                sv += Int(src[vp.offset + (yy / 2) * vp.stride + xx / 2])
                n += 1
            }
        }
        guard n > 0 else { return (0, 0, 0) }
        let l = Double(sy) / Double(n), cb = Double(su) / Double(n) - 128, cr = Double(sv) / Double(n) - 128
        return (ContactSheet.clamp8(l + 1.402 * cr), ContactSheet.clamp8(l - 0.344136 * cb - 0.714136 * cr), ContactSheet.clamp8(l + 1.772 * cb))
    }
}
