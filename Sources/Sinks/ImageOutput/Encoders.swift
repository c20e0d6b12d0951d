import CImageCodecs
import ShutterbugCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A frame copied out of a camera buffer, so the buffer goes back to the camera at once and
/// encoding happens later on a worker (AVFoundation's deferred processing).
public struct FrameCopy: Sendable {
    public var width: Int
    public var height: Int
    public var format: PixelFormat
    public var planes: [PlaneLayout]
    public var bytes: [UInt8]

    /// Copies `buffer`'s bytes.
    public init(_ buffer: any FrameBuffer) {
        width = buffer.width
        height = buffer.height
        format = buffer.pixelFormat
        planes = buffer.planes
        let length = buffer.extent
        bytes = buffer.withUnsafeBytes { Array($0.prefix(length)) }
    }

    public init(width: Int, height: Int, format: PixelFormat, planes: [PlaneLayout], bytes: [UInt8]) {
        self.width = width
        self.height = height
        self.format = format
        self.planes = planes
        self.bytes = bytes
    }
}

/// Output memory for JPEG encoding, reused from frame to frame so a worker does not allocate
/// (and fault in) megabytes per photo. One per thread.
public final class JPEGScratch: @unchecked Sendable {
    fileprivate var buffer: UnsafeMutablePointer<UInt8>?
    fileprivate var capacity = 0
    fileprivate var thumb: UnsafeMutablePointer<UInt8>?
    fileprivate var thumbCapacity = 0
    public init() {}
    deinit {
        sbi_free(buffer)
        sbi_free(thumb)
    }
}

/// Encodes YUV420 frames to JPEG with EXIF and a 160-pixel thumbnail, straight from the planes.
public enum JPEGEncoder {
    /// JPEG quality: 1...100.
    public static let qualityRange = 1...100
    static let thumbnailWidth = 160

    /// Encodes `frame` (YUV420) into `scratch` and calls `body` with the JPEG's bytes, valid
    /// during the call.
    ///
    /// - Throws: `.invalidArgument` for a non-YUV420 frame or a quality outside 1...100.
    public static func encode<R>(_ frame: FrameCopy, quality: Int, facts: PhotoFacts?, scratch: JPEGScratch, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        guard frame.format == .yuv420, frame.planes.count == 3 else {
            throw ShutterbugError(.invalidArgument, "JPEG is written from the YUV420 stream, not \(frame.format)")
        }
        guard qualityRange.contains(quality) else {
            throw ShutterbugError(.invalidArgument, "JPEG quality must be in 1...100, not \(quality)")
        }
        var exif: [UInt8] = []
        if let facts {
            let thumbLength = try thumbnail(frame, scratch: scratch)
            let thumb = UnsafeBufferPointer(start: scratch.thumb, count: thumbLength)
            exif = try facts.withCFacts { f in
                try call("building the EXIF data") { out, len, err, errlen in
                    sbi_exif_build(f, UInt32(frame.width), UInt32(frame.height), thumb.baseAddress, thumb.count, out, len, err, errlen)
                }
            }
        }
        let length = try frame.bytes.withUnsafeBufferPointer { raw in
            try encodePlanes(raw.baseAddress!, planes: frame.planes, width: frame.width, height: frame.height, quality: quality, app1: exif,
                             buffer: &scratch.buffer, capacity: &scratch.capacity)
        }
        return try body(UnsafeRawBufferPointer(start: scratch.buffer, count: length))
    }

    static func encodePlanes(_ base: UnsafePointer<UInt8>, planes: [PlaneLayout], width: Int, height: Int, quality: Int, app1: [UInt8],
                             buffer: inout UnsafeMutablePointer<UInt8>?, capacity: inout Int) throws -> Int {
        var image = sbi_yuv420()
        image.width = UInt32(width)
        image.height = UInt32(height)
        image.plane = (base + planes[0].offset, base + planes[1].offset, base + planes[2].offset)
        image.stride = (UInt32(planes[0].stride), UInt32(planes[1].stride), UInt32(planes[2].stride))
        var err = [CChar](repeating: 0, count: 256)
        var length = 0
        let rc = app1.withUnsafeBufferPointer { a in
            err.withUnsafeMutableBufferPointer { e in
                sbi_jpeg_encode(&image, Int32(quality), a.baseAddress, a.count, &buffer, &capacity, &length, e.baseAddress!, e.count)
            }
        }
        guard rc == 0 else {
            throw ShutterbugError(rc == -EINVAL ? .invalidArgument : .system, "encoding the JPEG: \(message(err))", errno: -rc)
        }
        return length
    }

    /// A box-filtered 160-pixel-wide JPEG of the frame for EXIF's IFD 1, in `scratch.thumb`.
    static func thumbnail(_ frame: FrameCopy, scratch: JPEGScratch) throws -> Int {
        let tw = min(thumbnailWidth, frame.width) & ~1
        let th = max(2, Int((Double(frame.height) * Double(tw) / Double(frame.width)).rounded()) & ~1)
        let ys = tw, cs = tw / 2
        var small = [UInt8](repeating: 128, count: ys * th + 2 * cs * (th / 2))
        frame.bytes.withUnsafeBufferPointer { src in
            small.withUnsafeMutableBufferPointer { dst in
                for p in 0..<3 {
                    let pw = p == 0 ? tw : tw / 2, ph = p == 0 ? th : th / 2
                    let sw = p == 0 ? frame.width : (frame.width + 1) / 2, sh = p == 0 ? frame.height : (frame.height + 1) / 2
                    let plane = frame.planes[p]
                    let out = p == 0 ? 0 : ys * th + (p - 1) * cs * (th / 2)
                    for y in 0..<ph {
                        let y0 = y * sh / ph, y1 = max(y0 + 1, (y + 1) * sh / ph)
                        for x in 0..<pw {
                            let x0 = x * sw / pw, x1 = max(x0 + 1, (x + 1) * sw / pw)
                            // Sample a 4x4 grid inside the box: cheap and smooth enough for 160 px.
                            var sum = 0, n = 0
                            var yy = y0
                            while yy < y1 {
                                var xx = x0
                                let row = plane.offset + yy * plane.stride
                                while xx < x1 {
                                    sum += Int(src[row + xx])
                                    n += 1
                                    xx += max(1, (x1 - x0) / 4)
                                }
                                yy += max(1, (y1 - y0) / 4)
                            }
                            dst[out + y * pw + x] = UInt8(sum / max(n, 1))
                        }
                    }
                }
            }
        }
        let planes = [PlaneLayout(offset: 0, length: ys * th, stride: ys),
                      PlaneLayout(offset: ys * th, length: cs * (th / 2), stride: cs),
                      PlaneLayout(offset: ys * th + cs * (th / 2), length: cs * (th / 2), stride: cs)]
        return try small.withUnsafeBufferPointer {
            try encodePlanes($0.baseAddress!, planes: planes, width: tw, height: th, quality: 80, app1: [], buffer: &scratch.thumb, capacity: &scratch.thumbCapacity)
        }
    }

    /// Runs a codec call that returns malloc'ed bytes, copying them into an array.
    static func call(_ what: String, _ body: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, UnsafeMutablePointer<Int>, UnsafeMutablePointer<CChar>, Int) -> Int32) throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        var len = 0
        var err = [CChar](repeating: 0, count: 256)
        let rc = err.withUnsafeMutableBufferPointer { body(&out, &len, $0.baseAddress!, $0.count) }
        guard rc == 0, let out else {
            throw ShutterbugError(rc == -EINVAL ? .invalidArgument : .system, "\(what): \(message(err))", errno: rc < 0 ? Errno(rawValue: -rc) : nil)
        }
        defer { sbi_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: len))
    }

    static func message(_ err: [CChar]) -> String {
        String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Writes raw Bayer frames as DNG: unpacked from the camera's packing to 16-bit samples strip
/// by strip as they are written, with CFA pattern, black and white level, colour matrix,
/// as-shot neutral and the facts.
public enum DNGEncoder {
    /// Writes `frame` (a Bayer format) as DNG into `fd`.
    public static func write(_ frame: FrameCopy, facts: PhotoFacts, colourGains: ColourGains?, to fd: Int32) throws {
        guard let bayer = frame.format.bayer else {
            throw ShutterbugError(.invalidArgument, "DNG is written from a Bayer raw stream, not \(frame.format)")
        }
        let w = frame.width, h = frame.height
        let rowBytes = bayer.rowBytes(width: w)
        guard frame.planes[0].stride >= rowBytes, frame.bytes.count >= frame.planes[0].offset + frame.planes[0].stride * (h - 1) + rowBytes else {
            throw ShutterbugError(.invalidArgument, "the raw buffer (\(frame.bytes.count) bytes, stride \(frame.planes[0].stride)) is too small for \(w)x\(h) \(frame.format)")
        }
        let (black, white) = levels(bayer, facts: facts)
        let gains = colourGains ?? ColourGains(red: 1, blue: 1)
        let matrix = ColourMath.xyzToCamera(correction: facts.camera.colourCorrection, red: gains.red, blue: gains.blue)
        let packing = bayer.packing.sbiPacking

        var err = [CChar](repeating: 0, count: 256)
        let rc = frame.bytes.withUnsafeBufferPointer { bytes in
            let data = bytes.baseAddress! + frame.planes[0].offset
            let preview = ColourMath.preview(data, stride: frame.planes[0].stride, width: w, height: h, bits: bayer.bits, packing: packing, cfa: bayer.cfa,
                                             black: Double(black), white: Double(white), red: gains.red, blue: gains.blue,
                                             correction: facts.camera.colourCorrection)
            var image = sbi_dng_image()
            image.width = UInt32(w)
            image.height = UInt32(h)
            image.data = data
            image.stride = frame.planes[0].stride
            image.bits = UInt32(bayer.bits)
            image.packing = packing
            image.white_level = white
            image.black_level = (black, black, black, black)
            let cfa = Array(bayer.cfa.rawValue).map { $0 == "R" ? UInt8(0) : $0 == "G" ? 1 : 2 }
            image.cfa = (cfa[0], cfa[1], cfa[2], cfa[3])
            let m: [Float] = matrix.map { Float($0) }
            withUnsafeMutableBytes(of: &image.colour_matrix) { dst in m.withUnsafeBytes { dst.copyMemory(from: $0) } }
            image.as_shot_neutral = (Float(1 / gains.red), 1, Float(1 / gains.blue))
            image.thumb_width = UInt32(preview.width)
            image.thumb_height = UInt32(preview.height)
            return preview.rgb.withUnsafeBufferPointer { thumb in
                image.thumb_rgb = thumb.baseAddress
                return facts.withCFacts { f in err.withUnsafeMutableBufferPointer { sbi_dng_write(fd, &image, f, $0.baseAddress!, $0.count) } }
            }
        }
        if rc != 0 { throw OutputDirectory.error(-rc, JPEGEncoder.message(err)) }
    }
}

extension DNGEncoder {
    /// Black and white level at the depth the stream delivers (a Pi 5's compressed raw decodes
    /// to 16-bit scale whatever the sensor's depth): the black level the frame or sensor gives,
    /// scaled from the sensor's depth to the stream's.
    static func levels(_ bayer: BayerFormat, facts: PhotoFacts) -> (black: Float, white: UInt32) {
        let shift = bayer.bits - facts.camera.bitDepth
        let black = Float(facts.camera.blackLevel) * Float(shift >= 0 ? Double(1 << shift) : 1 / Double(1 << -shift))
        return (black, UInt32((1 << bayer.bits) - 1))
    }

    /// The DNG's preview of `frame`: 1/16 size, box-filtered, in the ISP's colours.
    public static func preview(_ frame: FrameCopy, facts: PhotoFacts, colourGains: ColourGains?) throws -> (rgb: [UInt8], width: Int, height: Int) {
        guard let bayer = frame.format.bayer else {
            throw ShutterbugError(.invalidArgument, "a raw preview needs a Bayer frame, not \(frame.format)")
        }
        let (black, white) = levels(bayer, facts: facts)
        let gains = colourGains ?? ColourGains(red: 1, blue: 1)
        return frame.bytes.withUnsafeBufferPointer { bytes in
            ColourMath.preview(bytes.baseAddress! + frame.planes[0].offset, stride: frame.planes[0].stride, width: frame.width, height: frame.height,
                               bits: bayer.bits, packing: bayer.packing.sbiPacking, cfa: bayer.cfa, black: Double(black), white: Double(white),
                               red: gains.red, blue: gains.blue, correction: facts.camera.colourCorrection)
        }
    }
}

/// Unpacks raw rows (CSI-2 packed or in containers) to 16-bit samples, as the DNG writer does.
public enum RawUnpacker {
    /// Unpacks one row of `width` samples of `format` from `row` into `out`.
    public static func unpack(_ row: UnsafePointer<UInt8>, width: Int, format: BayerFormat, into out: UnsafeMutablePointer<UInt16>) {
        let rc = sbi_unpack_row(row, UInt32(width), UInt32(format.bits), format.packing.sbiPacking, out)
        precondition(rc == 0, "no unpacker for \(format)")
    }
}

/// The colour arithmetic of a DNG.
enum ColourMath {
    /// DNG ColorMatrix1: XYZ to camera = (sRGB→XYZ × CCM × WB)⁻¹, the pipeline the ISP applied
    /// (rpicam-apps' `image/dng.cpp` derives it the same way). A reader that white-balances by
    /// AsShotNeutral and inverts this gets the ISP's colours back.
    static func xyzToCamera(correction: [Double], red: Double, blue: Double) -> [Double] {
        (Colorimetry.srgbToXYZ * Matrix3(correction) * Matrix3.diagonal(red, 1, blue)).inverse.elements
    }

    /// An 8-bit sRGB preview 1/16 the size: each pixel its 16x16 block of the frame
    /// demosaiced bilinearly and averaged, white-balanced, colour-corrected and through the
    /// sRGB tone curve, as the JPEG is.
    ///
    /// Each colour's sites sit a pixel apart from the others' (red at even columns, blue at odd
    /// ones), so a plain mean of each colour's sites in a block puts red's centre half a pixel
    /// left of blue's: an edge inside the block gave red a share of one side 1/8 larger than
    /// blue's, which the colour matrix turned into a cyan or orange fringe along every edge of
    /// a chart. Interpolated to every pixel first (each of the four sites' lattices linearly,
    /// separably), every colour covers the block alike: a site in the block weighs 2 per axis,
    /// the one on each side of it 1.5 and 0.5 as it reaches in, the same sum for each.
    static func preview(_ data: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, bits: Int, packing: sbi_packing, cfa: CFAPattern,
                        black: Double, white: Double, red: Double, blue: Double, correction: [Double]) -> (rgb: [UInt8], width: Int, height: Int) {
        let block = 16
        let pw = max(1, width / block), ph = max(1, height / block)
        var rgb = [UInt8](repeating: 0, count: pw * ph * 3)
        // The colour of each of the four lattices: (row & 1) * 2 + (column & 1).
        let sites = Array(cfa.rawValue).map { $0 == "R" ? 0 : $0 == "G" ? 1 : 2 }
        let range = max(white - black, 1)
        let ccm = Matrix3(correction)
        // White balance, then clip at full scale as the ISP does (a clipped highlight stays
        // white instead of turning magenta), then the matrix.
        @inline(__always) func balance(_ v: Double, _ gain: Double) -> Double { min(v * gain, min(gain, 1)) }
        // Per block and lattice: the weighted sum of its sites, and the weights (less at the
        // frame's edges, where a neighbour is missing).
        var sums = [Double](repeating: 0, count: pw * ph * 4)
        var weights = [Double](repeating: 0, count: pw * ph * 4)
        var row = [UInt16](repeating: 0, count: width)
        var rowSums = [Double](repeating: 0, count: pw * 2)
        var rowWeights = [Double](repeating: 0, count: pw * 2)
        // A frame narrower than a block: its whole width, even.
        let across = width >= block ? block : width & ~1
        let rows = height >= block ? min(height, ph * block + 1) : height & ~1
        for sy in 0..<rows {
            let rp = sy & 1
            row.withUnsafeMutableBufferPointer { r in
                _ = sbi_unpack_row(data + sy * stride, UInt32(width), UInt32(bits), packing, r.baseAddress!)
                // Across: each block's even and odd columns, each site weighing 2 and the end
                // ones as they reach in (even: 1.5 at column 0, 0.5 at the next block's 0; odd:
                // 0.5 at the block before's 15, 1.5 at 15).
                for bx in 0..<pw {
                    let k0 = bx * across
                    var even = 0, odd = 0, k = k0
                    while k < k0 + across {
                        even += Int(r[k])
                        odd += Int(r[k + 1])
                        k += 2
                    }
                    var e = 2 * Double(even), o = 2 * Double(odd)
                    var we = Double(across), wo = Double(across)
                    if across == block {
                        e -= 0.5 * Double(r[k0])
                        o -= 0.5 * Double(r[k0 + block - 1])
                        we -= 0.5
                        wo -= 0.5
                        if k0 + block < width {
                            e += 0.5 * Double(r[k0 + block])
                            we += 0.5
                        }
                        if k0 > 0 {
                            o += 0.5 * Double(r[k0 - 1])
                            wo += 0.5
                        }
                    }
                    rowSums[bx * 2] = e
                    rowSums[bx * 2 + 1] = o
                    rowWeights[bx * 2] = we
                    rowWeights[bx * 2 + 1] = wo
                }
            }
            // Down: the same weights for this row in its block, and in the one above (its row
            // 16) or below (its row -1) where it reaches in.
            func add(_ by: Int, _ wy: Double) {
                guard by >= 0, by < ph, wy > 0 else { return }
                for bx in 0..<pw {
                    for cp in 0..<2 {
                        let i = (by * pw + bx) * 4 + rp * 2 + cp
                        sums[i] += wy * rowSums[bx * 2 + cp]
                        weights[i] += wy * rowWeights[bx * 2 + cp]
                    }
                }
            }
            let by = sy / block, ry = sy % block
            if height < block {
                add(0, 1)
            } else if rp == 0 {
                add(by, ry == 0 ? 1.5 : 2)
                if ry == 0 { add(by - 1, 0.5) }
            } else {
                add(by, ry == block - 1 ? 1.5 : 2)
                if ry == block - 1 { add(by + 1, 0.5) }
            }
        }
        for y in 0..<ph {
            for x in 0..<pw {
                var c = [0.0, 0.0, 0.0], n = [0.0, 0.0, 0.0]
                for l in 0..<4 {
                    let i = (y * pw + x) * 4 + l
                    guard weights[i] > 0 else { continue }
                    c[sites[l]] += sums[i] / weights[i]
                    n[sites[l]] += 1
                }
                func mean(_ k: Int) -> Double { (c[k] / max(n[k], 1) - black) / range }
                let out = ccm.apply(RGB(balance(mean(0), red), balance(mean(1), 1), balance(mean(2), blue)))
                rgb[(y * pw + x) * 3] = UInt8((Colorimetry.srgbEncode(out.r) * 255).rounded())
                rgb[(y * pw + x) * 3 + 1] = UInt8((Colorimetry.srgbEncode(out.g) * 255).rounded())
                rgb[(y * pw + x) * 3 + 2] = UInt8((Colorimetry.srgbEncode(out.b) * 255).rounded())
            }
        }
        return (rgb, pw, ph)
    }
}

extension BayerPacking {
    /// The C codecs' name for the packing.
    var sbiPacking: sbi_packing {
        switch self {
        case .none: SBI_PACKING_NONE
        case .csi2: SBI_PACKING_CSI2
        case .pispComp1: SBI_PACKING_PISP_COMP1
        }
    }
}
