/// Packs Bayer rows of 16-bit samples into the layouts cameras deliver: 8-bit, 16-bit
/// little-endian containers, and MIPI CSI-2 RAW10/RAW12 packing (libcamera's `_CSI2P`), for
/// the simulated camera. The DNG writer's unpacker (`RawUnpacker`) is its inverse.
public enum BayerPacker {
    /// Packs `samples` (values below 2^bits) into `out`, which holds
    /// `BayerFormat.rowBytes(width: samples.count)` bytes.
    public static func pack(_ samples: UnsafeBufferPointer<UInt16>, bits: Int, packing: BayerPacking, into out: UnsafeMutablePointer<UInt8>) {
        let n = samples.count
        switch (packing, bits) {
        case (.csi2, 10):
            var o = 0, i = 0
            while i + 4 <= n {
                let a = samples[i], b = samples[i + 1], c = samples[i + 2], d = samples[i + 3]
                out[o] = UInt8(truncatingIfNeeded: a >> 2)
                out[o + 1] = UInt8(truncatingIfNeeded: b >> 2)
                out[o + 2] = UInt8(truncatingIfNeeded: c >> 2)
                out[o + 3] = UInt8(truncatingIfNeeded: d >> 2)
                out[o + 4] = UInt8(truncatingIfNeeded: (a & 3) | (b & 3) << 2 | (c & 3) << 4 | (d & 3) << 6)
                i += 4
                o += 5
            }
            if i < n {  // a partial group: missing samples count as zero
                var low: UInt16 = 0
                for k in 0..<(n - i) {
                    out[o + k] = UInt8(truncatingIfNeeded: samples[i + k] >> 2)
                    low |= (samples[i + k] & 3) << (2 * k)
                }
                out[o + n - i] = UInt8(truncatingIfNeeded: low)
            }
        case (.csi2, 12):
            var o = 0, i = 0
            while i + 2 <= n {
                let a = samples[i], b = samples[i + 1]
                out[o] = UInt8(truncatingIfNeeded: a >> 4)
                out[o + 1] = UInt8(truncatingIfNeeded: b >> 4)
                out[o + 2] = UInt8(truncatingIfNeeded: (a & 0xf) | (b & 0xf) << 4)
                i += 2
                o += 3
            }
            if i < n {
                out[o] = UInt8(truncatingIfNeeded: samples[i] >> 4)
                out[o + 1] = UInt8(truncatingIfNeeded: samples[i] & 0xf)
            }
        default:
            if bits <= 8 {
                for i in 0..<n { out[i] = UInt8(truncatingIfNeeded: samples[i]) }
            } else {
                UnsafeMutableRawPointer(out).copyMemory(from: samples.baseAddress!, byteCount: n * 2)
            }
        }
    }
}
