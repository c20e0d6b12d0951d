/// A pixel format named by its DRM fourcc code, as libcamera and KMS name them.
///
/// Like libcamera's `PixelFormat`, a fourcc plus a DRM format modifier: the Raspberry Pi's raw
/// streams are Bayer fourccs with the MIPI CSI-2 packing modifier.
public struct PixelFormat: Hashable, Sendable, CustomStringConvertible {
    public var fourcc: UInt32
    /// DRM format modifier; 0 is linear (`DRM_FORMAT_MOD_LINEAR`).
    public var modifier: UInt64
    public init(fourcc: UInt32, modifier: UInt64 = 0) {
        self.fourcc = fourcc
        self.modifier = modifier
    }

    /// `MIPI_FORMAT_MOD_CSI2_PACKED`: fourcc_mod_code(MIPI, 1) with libcamera's MIPI vendor
    /// code 0x0b (`__mod(11, 1)` in `formats.h`), libcamera's `_CSI2P` formats.
    public static let csi2PackedModifier: UInt64 = 0x0b << 56 | 1
    /// `PISP_FORMAT_MOD_COMPRESS_MODE1`: fourcc_mod_code(RPI, 1), vendor 0x0c (`__mod(12, 1)`),
    /// libcamera's `*_PISP_COMP1` formats, the Pi 5's compressed raw on a 16-bit Bayer fourcc.
    public static let pispCompressedModifier: UInt64 = 0x0c << 56 | 1

    /// Builds the code from its four characters, e.g. "YU12".
    public init(_ code: StaticString) {
        precondition(code.utf8CodeUnitCount == 4, "a fourcc has four characters")
        let p = code.utf8Start
        fourcc = UInt32(p[0]) | UInt32(p[1]) << 8 | UInt32(p[2]) << 16 | UInt32(p[3]) << 24
        modifier = 0
    }

    init(code: String, modifier: UInt64 = 0) {
        let b = Array(code.utf8)
        fourcc = UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
        self.modifier = modifier
    }

    /// Planar YUV 4:2:0, three planes (Y, U, V). libcamera's `YUV420`.
    public static let yuv420 = PixelFormat("YU12")
    /// 32-bit XRGB, little-endian B G R X bytes. libcamera's `XRGB8888`.
    public static let xrgb8888 = PixelFormat("XR24")
    /// 24-bit RGB, B G R bytes in memory. libcamera's `RGB888` (what vimc offers).
    public static let rgb888 = PixelFormat("RG24")
    /// 24-bit BGR, R G B bytes in memory. libcamera's `BGR888`.
    public static let bgr888 = PixelFormat("BG24")

    /// The four characters.
    public var code: String {
        let bytes = (0..<4).map { UInt8((fourcc >> (8 * $0)) & 0xff) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// libcamera's name for the formats Shutterbug knows, else the fourcc.
    public var description: String {
        switch self {
        case .yuv420: return "YUV420"
        case .xrgb8888: return "XRGB8888"
        case .rgb888: return "RGB888"
        case .bgr888: return "BGR888"
        default:
            if let b = bayer {
                switch b.packing {
                case .pispComp1: return "\(b.cfa.rawValue)_PISP_COMP1"
                case .csi2: return "S\(b.cfa.rawValue)\(b.bits)_CSI2P"
                case .none: return "S\(b.cfa.rawValue)\(b.bits)"
                }
            }
            return modifier == 0 ? code : "\(code)/0x\(String(modifier, radix: 16))"
        }
    }

    /// Bytes per pixel of the first plane for packed formats, `nil` for planar or raw ones.
    public var bytesPerPixel: Int? {
        switch self {
        case .xrgb8888: return 4
        case .rgb888, .bgr888: return 3
        default:
            if let b = bayer, b.packing == .none { return b.bits > 8 ? 2 : 1 }
            return nil
        }
    }
}

/// How the samples of a Bayer frame sit in memory.
public enum BayerPacking: Hashable, Sendable {
    /// One sample per 8-bit or 16-bit little-endian container, in the low bits.
    case none
    /// MIPI CSI-2 packing: RAW10 puts 4 samples in 5 bytes (4 high bytes, then the 4 pairs of
    /// low bits), RAW12 2 samples in 3 bytes (2 high bytes, then both low nibbles). 8-bit and 16-bit formats
    /// have no packed form.
    case csi2
    /// The Raspberry Pi 5's PISP_COMP1: 8 bytes per block of 8 samples of 16-bit scale (with a
    /// black-level offset taken off), always 16 bits per sample when decoded.
    case pispComp1
}

/// A Bayer format: the colour order, bits per sample and packing.
public struct BayerFormat: Hashable, Sendable {
    public var cfa: CFAPattern
    public var bits: Int
    public var packing: BayerPacking
    public init(cfa: CFAPattern, bits: Int, packing: BayerPacking) {
        self.cfa = cfa
        self.bits = bits
        self.packing = packing
    }

    /// Bytes for one row of `width` samples, before any stride alignment.
    public func rowBytes(width: Int) -> Int {
        switch packing {
        case .none: return width * (bits > 8 ? 2 : 1)
        case .csi2:
            switch bits {
            case 10: return (width * 5 + 3) / 4
            case 12: return (width * 3 + 1) / 2
            default: return width
            }
        case .pispComp1: return (width + 7) / 8 * 8
        }
    }
}

extension PixelFormat {
    /// The libcamera Bayer format for an order, depth and packing: `SRGGB12_CSI2P` is
    /// `.bayer(.init(cfa: .rggb, bits: 12, packing: .csi2))`.
    public static func bayer(_ b: BayerFormat) -> PixelFormat {
        // drm_fourcc.h / libcamera formats.yaml codes.
        let code: String
        switch (b.bits, b.cfa) {
        case (8, .rggb): code = "RGGB"
        case (8, .grbg): code = "GRBG"
        case (8, .gbrg): code = "GBRG"
        case (8, .bggr): code = "BA81"
        case (10, .rggb): code = "RG10"
        case (10, .grbg): code = "BA10"
        case (10, .gbrg): code = "GB10"
        case (10, .bggr): code = "BG10"
        case (12, .rggb): code = "RG12"
        case (12, .grbg): code = "BA12"
        case (12, .gbrg): code = "GB12"
        case (12, .bggr): code = "BG12"
        case (_, .rggb): code = "RGB6"
        case (_, .grbg): code = "GR16"
        case (_, .gbrg): code = "GB16"
        case (_, .bggr): code = "BYR2"
        }
        switch b.packing {
        case .csi2 where b.bits != 8 && b.bits != 16: return PixelFormat(code: code, modifier: csi2PackedModifier)
        case .pispComp1: return PixelFormat(code: code, modifier: pispCompressedModifier)
        default: return PixelFormat(code: code)
        }
    }

    /// The Bayer layout of this format, `nil` when it is not a Bayer format.
    public var bayer: BayerFormat? {
        let table: [String: (CFAPattern, Int)] = [
            "RGGB": (.rggb, 8), "GRBG": (.grbg, 8), "GBRG": (.gbrg, 8), "BA81": (.bggr, 8),
            "RG10": (.rggb, 10), "BA10": (.grbg, 10), "GB10": (.gbrg, 10), "BG10": (.bggr, 10),
            "RG12": (.rggb, 12), "BA12": (.grbg, 12), "GB12": (.gbrg, 12), "BG12": (.bggr, 12),
            "RGB6": (.rggb, 16), "GR16": (.grbg, 16), "GB16": (.gbrg, 16), "BYR2": (.bggr, 16),
        ]
        guard let (cfa, bits) = table[code] else { return nil }
        switch modifier {
        case Self.csi2PackedModifier: return BayerFormat(cfa: cfa, bits: bits, packing: .csi2)
        case Self.pispCompressedModifier: return BayerFormat(cfa: cfa, bits: 16, packing: .pispComp1)
        case 0: return BayerFormat(cfa: cfa, bits: bits, packing: .none)
        default: return nil  // a layout this code does not know: not to be read as plain samples
        }
    }
}
