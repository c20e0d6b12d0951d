/// A pixel format named by its DRM fourcc code, as libcamera and KMS name them.
public struct PixelFormat: Hashable, Sendable, CustomStringConvertible {
    public var fourcc: UInt32
    public init(fourcc: UInt32) { self.fourcc = fourcc }

    /// Builds the code from its four characters, e.g. "YU12".
    public init(_ code: StaticString) {
        precondition(code.utf8CodeUnitCount == 4, "a fourcc has four characters")
        let p = code.utf8Start
        fourcc = UInt32(p[0]) | UInt32(p[1]) << 8 | UInt32(p[2]) << 16 | UInt32(p[3]) << 24
    }

    /// Planar YUV 4:2:0, three planes (Y, U, V). libcamera's `YUV420`.
    public static let yuv420 = PixelFormat("YU12")
    /// 32-bit XRGB, little-endian B G R X bytes. libcamera's `XRGB8888`.
    public static let xrgb8888 = PixelFormat("XR24")
    /// 24-bit RGB, B G R bytes in memory. libcamera's `RGB888` (what vimc offers).
    public static let rgb888 = PixelFormat("RG24")
    /// 24-bit BGR, R G B bytes in memory. libcamera's `BGR888`.
    public static let bgr888 = PixelFormat("BG24")
    /// 16-bit unpacked Bayer, samples in the low bits. libcamera's `SBGGR16` family uses
    /// per-order codes; this is the BGGR one.
    public static let sbggr16 = PixelFormat("BYR2")

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
        case .sbggr16: return "SBGGR16"
        default: return code
        }
    }

    /// Bytes per pixel of the first plane for packed formats, `nil` for planar or raw ones.
    public var bytesPerPixel: Int? {
        switch self {
        case .xrgb8888: return 4
        case .rgb888, .bgr888: return 3
        case .sbggr16: return 2
        default: return nil
        }
    }
}
