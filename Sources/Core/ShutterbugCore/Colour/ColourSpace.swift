#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A 3x3 matrix, row-major, as libcamera's `ColourCorrectionMatrix` and DNG's `ColorMatrix1`
/// lay theirs out. A value type of nine doubles: no allocation per frame.
public struct Matrix3: Hashable, Sendable {
    public var m: (Double, Double, Double, Double, Double, Double, Double, Double, Double)

    public init(_ v: [Double]) {
        precondition(v.count == 9, "a 3x3 matrix has 9 elements, not \(v.count)")
        m = (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8])
    }

    public static let identity = Matrix3([1, 0, 0, 0, 1, 0, 0, 0, 1])

    public static func == (a: Matrix3, b: Matrix3) -> Bool { a.elements == b.elements }
    public func hash(into h: inout Hasher) { h.combine(elements) }

    public static func diagonal(_ a: Double, _ b: Double, _ c: Double) -> Matrix3 { Matrix3([a, 0, 0, 0, b, 0, 0, 0, c]) }

    public var elements: [Double] { [m.0, m.1, m.2, m.3, m.4, m.5, m.6, m.7, m.8] }

    public subscript(row: Int, col: Int) -> Double { elements[row * 3 + col] }

    public static func * (a: Matrix3, b: Matrix3) -> Matrix3 {
        let x = a.elements, y = b.elements
        var r = [Double](repeating: 0, count: 9)
        for row in 0..<3 {
            for col in 0..<3 {
                r[row * 3 + col] = x[row * 3] * y[col] + x[row * 3 + 1] * y[3 + col] + x[row * 3 + 2] * y[6 + col]
            }
        }
        return Matrix3(r)
    }

    @inline(__always)
    public func apply(_ v: RGB) -> RGB {
        RGB(m.0 * v.r + m.1 * v.g + m.2 * v.b, m.3 * v.r + m.4 * v.g + m.5 * v.b, m.6 * v.r + m.7 * v.g + m.8 * v.b)
    }

    public var inverse: Matrix3 {
        let (a, b, c, d, e, f, g, h, i) = m
        let c0 = e * i - f * h, c1 = f * g - d * i, c2 = d * h - e * g
        let det = a * c0 + b * c1 + c * c2
        return Matrix3([c0, c * h - b * i, b * f - c * e, c1, a * i - c * g, c * d - a * f, c2, b * g - a * h, a * e - b * d].map { $0 / det })
    }

    /// Elementwise interpolation: `self` at t = 0, `other` at t = 1.
    public func mix(_ other: Matrix3, _ t: Double) -> Matrix3 {
        Matrix3(zip(elements, other.elements).map { $0 + ($1 - $0) * t })
    }
}

/// Three channel values (linear RGB or XYZ).
public struct RGB: Hashable, Sendable {
    public var r, g, b: Double
    @inline(__always) public init(_ r: Double, _ g: Double, _ b: Double) {
        self.r = r
        self.g = g
        self.b = b
    }
    @inline(__always) public static func * (v: RGB, s: Double) -> RGB { RGB(v.r * s, v.g * s, v.b * s) }
    @inline(__always) public static func * (v: RGB, w: RGB) -> RGB { RGB(v.r * w.r, v.g * w.g, v.b * w.b) }
}

/// The colorimetry Shutterbug's files and simulated ISP use: sRGB (IEC 61966-2-1) primaries and
/// transfer function, CIE XYZ and L*a*b*, Bradford chromatic adaptation, and the full-range
/// BT.601 Y'CbCr of JPEG (sYCC), which libcamera's still stream uses.
public enum Colorimetry {
    /// Linear sRGB to XYZ (D65), Bruce Lindbloom's matrix (as rpicam-apps' DNG writer uses).
    public static let srgbToXYZ = Matrix3([0.4124564, 0.3575761, 0.1804375, 0.2126729, 0.7151522, 0.0721750, 0.0193339, 0.1191920, 0.9503041])
    public static let xyzToSRGB = srgbToXYZ.inverse
    /// Reference whites (XYZ, Y = 1), CIE 1931 2°.
    public static let d65 = RGB(0.95047, 1.0, 1.08883)
    public static let d50 = RGB(0.96422, 1.0, 0.82521)
    /// Bradford cone response matrix.
    static let bradford = Matrix3([0.8951, 0.2664, -0.1614, -0.7502, 1.7135, 0.0367, 0.0389, -0.0685, 1.0296])

    /// The Bradford transform taking XYZ seen under white `from` to its corresponding colour
    /// under white `to`.
    public static func adaptation(from: RGB, to: RGB) -> Matrix3 {
        let s = bradford.apply(from), d = bradford.apply(to)
        return bradford.inverse * Matrix3.diagonal(d.r / s.r, d.g / s.g, d.b / s.b) * bradford
    }

    /// CIE L*a*b* to XYZ for a reference white.
    public static func labToXYZ(_ l: Double, _ a: Double, _ b: Double, white: RGB) -> RGB {
        let fy = (l + 16) / 116, fx = fy + a / 500, fz = fy - b / 200
        func finv(_ t: Double) -> Double { t * t * t > 216.0 / 24389 ? t * t * t : (116 * t - 16) / (24389.0 / 27) }
        return RGB(white.r * finv(fx), white.g * (l > 8 ? fy * fy * fy : l / (24389.0 / 27)), white.b * finv(fz))
    }

    /// The sRGB transfer function: linear 0...1 to encoded 0...1.
    @inline(__always)
    public static func srgbEncode(_ v: Double) -> Double {
        let c = min(max(v, 0), 1)
        return c <= 0.0031308 ? 12.92 * c : 1.055 * pow(c, 1 / 2.4) - 0.055
    }

    /// The inverse of `srgbEncode`.
    public static func srgbDecode(_ e: Double) -> Double {
        e <= 0.04045 ? e / 12.92 : pow((e + 0.055) / 1.055, 2.4)
    }

    /// Linear light (0...1) of each 8-bit sRGB code.
    public static let srgbLinearOf8Bit: [Double] = (0...255).map { srgbDecode(Double($0) / 255) }

    /// The xy chromaticity of a blackbody (CIE daylight locus above 4000 K, Planckian below, by
    /// Kim et al.'s cubic fit), as XYZ with Y = 1: the white of an illuminant at `kelvin`.
    public static func white(kelvin: Double) -> RGB {
        let t = min(max(kelvin, 1667), 25000)
        let x: Double
        if t <= 4000 {
            x = -0.2661239e9 / (t * t * t) - 0.2343589e6 / (t * t) + 0.8776956e3 / t + 0.179910
        } else {
            x = -3.0258469e9 / (t * t * t) + 2.1070379e6 / (t * t) + 0.2226347e3 / t + 0.240390
        }
        let y: Double
        if t <= 2222 {
            y = -1.1063814 * x * x * x - 1.34811020 * x * x + 2.18555832 * x - 0.20219683
        } else if t <= 4000 {
            y = -0.9549476 * x * x * x - 1.37418593 * x * x + 2.09137015 * x - 0.16748867
        } else {
            y = 3.0817580 * x * x * x - 5.87338670 * x * x + 3.75112997 * x - 0.37001483
        }
        return RGB(x / y, 1, (1 - x - y) / y)
    }
}
