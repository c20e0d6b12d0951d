import CImageCodecs
import ShutterbugCore

/// PNG through libpng: 8-bit RGB.
public enum PNGEncoder {
    /// - Throws: `.invalidArgument` for a size libpng's limits or the buffer do not allow.
    public static func encode(rgb: [UInt8], width: Int, height: Int) throws -> [UInt8] {
        guard width > 0, height > 0, rgb.count >= width * height * 3 else {
            throw ShutterbugError(.invalidArgument, "a \(width)x\(height) PNG needs \(width * height * 3) bytes of RGB, not \(rgb.count)")
        }
        return try rgb.withUnsafeBufferPointer { p in
            try JPEGEncoder.call("encoding a PNG") { out, len, err, errlen in
                sbi_png_encode_rgb(p.baseAddress, UInt32(width), UInt32(height), width * 3, out, len, err, errlen)
            }
        }
    }
}

/// A keogram: one column per slot, the middle column of each slot's frame from top to
/// bottom, so a day's light, clouds and night read at a glance from left to right.
public enum Keogram {
    /// The height columns are scaled to.
    public static let height = 240

    /// The middle column of a YUV420 frame as `height` RGB pixels (BT.601 full range, each an
    /// average of the rows it covers).
    public static func column(_ yuv: FrameCopy, height: Int = Keogram.height) -> [UInt8] {
        guard yuv.planes.count >= 3, yuv.width > 1, yuv.height > 1 else { return [UInt8](repeating: 0, count: height * 3) }
        let x = yuv.width / 2
        var out = [UInt8](repeating: 0, count: height * 3)
        yuv.bytes.withUnsafeBufferPointer { b in
            for row in 0..<height {
                let y0 = row * yuv.height / height, y1 = min(yuv.height, max(y0 + 1, (row + 1) * yuv.height / height))
                (out[row * 3], out[row * 3 + 1], out[row * 3 + 2]) = YUVBox.mean(b, planes: (yuv.planes[0], yuv.planes[1], yuv.planes[2]), rows: y0..<y1, columns: x..<(x + 1))
            }
        }
        return out
    }

    /// The keogram of `columns` (each `height` RGB pixels; nil: a slot with no frame, drawn
    /// dark red so a gap is seen as a gap) as a PNG.
    public static func png(_ columns: [[UInt8]?], height: Int = Keogram.height) throws -> [UInt8] {
        let width = max(1, columns.count)
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        for (x, column) in columns.enumerated() {
            for y in 0..<height {
                let i = (y * width + x) * 3
                if let column, column.count >= height * 3 {
                    rgb[i] = column[y * 3]; rgb[i + 1] = column[y * 3 + 1]; rgb[i + 2] = column[y * 3 + 2]
                } else {
                    rgb[i] = 90
                }
            }
        }
        return try PNGEncoder.encode(rgb: rgb, width: width, height: height)
    }
}
