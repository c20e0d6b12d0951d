import ShutterbugCore

extension FrameCopy {
    /// Whether JPEG can be written from this format: YUV420 as it is, packed RGB (a camera with
    /// no YUV stream, such as vimc or some USB cameras) converted first.
    public static func encodesToJPEG(_ format: PixelFormat) -> Bool {
        format == .yuv420 || isPackedRGB(format)
    }

    /// Packed RGB that `yuv420()` converts: 24-bit RGB888 and BGR888, and 32-bit XRGB8888 (the
    /// Pi's viewfinder format).
    static func isPackedRGB(_ format: PixelFormat) -> Bool {
        format == .rgb888 || format == .bgr888 || format == .xrgb8888
    }

    /// The frame as YUV420 (BT.601 full range, as the Pi's ISP writes it, chroma averaged over
    /// each 2x2 block): itself if it is already, converted from packed RGB888, BGR888 or
    /// XRGB8888. libcamera's formats are DRM's, little-endian: BGR888 is R, G, B bytes in
    /// memory, RGB888 B, G, R, XRGB8888 B, G, R, X.
    public func yuv420() -> FrameCopy {
        guard Self.isPackedRGB(format), let packed = planes.first, let bpp = format.bytesPerPixel else { return self }
        let w = width, h = height, cw = (w + 1) / 2, ch = (h + 1) / 2
        let (r, b) = format == .bgr888 ? (0, 2) : (2, 0)
        var out = [UInt8](repeating: 0, count: w * h + 2 * cw * ch)
        // Closures with their types spelt out, the sums split: Swift 6.2's type checker gives up
        // on the whole as one expression.
        bytes.withUnsafeBufferPointer { (src: UnsafeBufferPointer<UInt8>) -> Void in
            out.withUnsafeMutableBufferPointer { (dst: inout UnsafeMutableBufferPointer<UInt8>) -> Void in
                let u0 = w * h, v0 = u0 + cw * ch
                // Fixed point, 16 fractional bits: Y = .299 R + .587 G + .114 B;
                // Cb = 128 + .5 (B - Y) / .886; Cr = 128 + .5 (R - Y) / .701.
                for cy in 0..<ch {
                    for cx in 0..<cw {
                        var sr = 0, sg = 0, sb = 0, n = 0
                        for dy in 0..<2 where 2 * cy + dy < h {
                            let y = 2 * cy + dy
                            let row = packed.offset + y * packed.stride
                            for dx in 0..<2 where 2 * cx + dx < w {
                                let x = 2 * cx + dx
                                let p = row + bpp * x
                                let pr = Int(src[p + r]), pg = Int(src[p + 1]), pb = Int(src[p + b])
                                let luma: Int = 19_595 * pr + 38_470 * pg + 7_471 * pb
                                dst[y * w + x] = UInt8((luma + 32_768) >> 16)
                                sr += pr
                                sg += pg
                                sb += pb
                                n += 1
                            }
                        }
                        let cbSum: Int = -11_059 * sr - 21_709 * sg + 32_768 * sb
                        let crSum: Int = 32_768 * sr - 27_439 * sg - 5_329 * sb
                        let cb = cbSum / n, cr = crSum / n
                        dst[u0 + cy * cw + cx] = UInt8(clamping: 128 + (cb + 32_768) >> 16)
                        dst[v0 + cy * cw + cx] = UInt8(clamping: 128 + (cr + 32_768) >> 16)
                    }
                }
            }
        }
        return FrameCopy(width: w, height: h, format: .yuv420,
                         planes: [PlaneLayout(offset: 0, length: w * h, stride: w),
                                  PlaneLayout(offset: w * h, length: cw * ch, stride: cw),
                                  PlaneLayout(offset: w * h + cw * ch, length: cw * ch, stride: cw)],
                         bytes: out)
    }
}
