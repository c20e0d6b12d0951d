import ShutterbugCore

/// A small picture of a frame for a web page or a dashboard: a YUV 4:2:0 buffer point-sampled
/// to `width` (even sides), read in place, so a 12 MP frame costs the few hundred kilobytes the
/// picture needs, not a copy of the whole frame (18 MB).
public enum FramePreview {
    /// The sampled picture as planar YUV 4:2:0, or nil when the buffer is not YUV 4:2:0.
    public static func sample(_ buffer: any FrameBuffer, width: Int) -> FrameCopy? {
        guard buffer.pixelFormat == .yuv420, buffer.planes.count == 3, buffer.width >= 2, buffer.height >= 2 else { return nil }
        let tw = max(2, min(width, buffer.width) & ~1)
        let th = max(2, (buffer.height * tw / buffer.width) & ~1)
        let cw = tw / 2, ch = th / 2
        var bytes = [UInt8](repeating: 128, count: tw * th + 2 * cw * ch)
        let src = buffer.planes
        buffer.withUnsafeBytes { raw in
            // Each output sample from the middle of the source area it stands for.
            func copy(plane p: PlaneLayout, sourceWidth sw: Int, sourceHeight sh: Int, to offset: Int, width w: Int, height h: Int) {
                for y in 0..<h {
                    let sy = min(sh - 1, (2 * y + 1) * sh / (2 * h))
                    let row = p.offset + sy * p.stride
                    for x in 0..<w {
                        let sx = min(sw - 1, (2 * x + 1) * sw / (2 * w))
                        let i = row + sx
                        if i < raw.count { bytes[offset + y * w + x] = raw[i] }
                    }
                }
            }
            copy(plane: src[0], sourceWidth: buffer.width, sourceHeight: buffer.height, to: 0, width: tw, height: th)
            copy(plane: src[1], sourceWidth: buffer.width / 2, sourceHeight: buffer.height / 2, to: tw * th, width: cw, height: ch)
            copy(plane: src[2], sourceWidth: buffer.width / 2, sourceHeight: buffer.height / 2, to: tw * th + cw * ch, width: cw, height: ch)
        }
        let planes = [PlaneLayout(offset: 0, length: tw * th, stride: tw),
                      PlaneLayout(offset: tw * th, length: cw * ch, stride: cw),
                      PlaneLayout(offset: tw * th + cw * ch, length: cw * ch, stride: cw)]
        return FrameCopy(width: tw, height: th, format: .yuv420, planes: planes, bytes: bytes)
    }

    /// The buffer as a JPEG `width` wide: sampled in place where it is YUV 4:2:0, else copied
    /// and converted first (a viewfinder's XRGB8888).
    public static func jpeg(_ buffer: any FrameBuffer, width: Int, quality: Int = 80) throws -> [UInt8]? {
        let small: FrameCopy
        if let s = sample(buffer, width: width) {
            small = s
        } else if FrameCopy.encodesToJPEG(buffer.pixelFormat) {
            small = FrameCopy(buffer).yuv420()
        } else {
            return nil
        }
        let t = ContactSheet.thumbnail(yuv: small, width: width & ~1)
        let h = t.height & ~1
        return try ContactSheet.jpeg(rgb: Array(t.rgb.prefix(t.width * h * 3)), width: t.width, height: h, quality: quality)
    }
}
