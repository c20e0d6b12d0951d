/// A sensor's colour calibration as the Raspberry Pi IPA's tuning file gives it: the AWB's
/// colour-temperature curve (`rpi.awb` `ct_curve`: the R/G and B/G of a grey under each
/// temperature) and the colour correction matrices (`rpi.ccm` `ccms`: white-balanced camera RGB
/// to linear sRGB, at the temperature each was measured under). The Pi interpolates both
/// linearly in colour temperature and holds the end values outside the table; so does this.
public struct ColourTuning: Hashable, Sendable {
    public struct CurvePoint: Hashable, Sendable {
        public var kelvin: Double
        /// R/G and B/G of a grey: the white-balance gains are their reciprocals.
        public var r: Double
        public var b: Double
    }

    public struct CCM: Hashable, Sendable {
        public var kelvin: Double
        public var matrix: Matrix3
    }

    public var curve: [CurvePoint]
    public var ccms: [CCM]
    /// Where the numbers come from.
    public var source: String

    /// `curve` as the tuning file lists it: kelvin, r, b, kelvin, r, b, ...; `ccms` as
    /// (kelvin, nine coefficients).
    public init(curve flat: [Double], ccms: [(Double, [Double])], source: String) {
        precondition(flat.count % 3 == 0 && !flat.isEmpty && !ccms.isEmpty)
        curve = stride(from: 0, to: flat.count, by: 3).map { CurvePoint(kelvin: flat[$0], r: flat[$0 + 1], b: flat[$0 + 2]) }
        self.ccms = ccms.map { CCM(kelvin: $0.0, matrix: Matrix3($0.1)) }
        self.source = source
    }

    /// The temperatures the tuning covers.
    public var range: ClosedRange<Double> { curve.first!.kelvin...curve.last!.kelvin }

    /// Piecewise-linear interpolation over sorted knots, held at the ends.
    private static func interpolate<T>(_ knots: [T], at x: Double, key: (T) -> Double, mix: (T, T, Double) -> T) -> T {
        if x <= key(knots[0]) { return knots[0] }
        for i in 1..<knots.count where x <= key(knots[i]) {
            let a = knots[i - 1], b = knots[i]
            let span = key(b) - key(a)
            return mix(a, b, span > 0 ? (x - key(a)) / span : 1)
        }
        return knots[knots.count - 1]
    }

    /// The white-balance gains that make a grey neutral under `kelvin`.
    public func gains(kelvin: Double) -> ColourGains {
        let p = Self.interpolate(curve, at: kelvin, key: \.kelvin) { a, b, t in
            CurvePoint(kelvin: 0, r: a.r + (b.r - a.r) * t, b: a.b + (b.b - a.b) * t)
        }
        return ColourGains(red: 1 / p.r, blue: 1 / p.b)
    }

    /// The temperature whose grey the red gain balances (the Pi's inverse CT curve, used to
    /// pick the matrix when the gains are set by hand).
    public func kelvin(forRedGain gain: Double) -> Double {
        let r = 1 / gain
        // r falls as temperature rises.
        if r >= curve[0].r { return curve[0].kelvin }
        for i in 1..<curve.count where r >= curve[i].r {
            let a = curve[i - 1], b = curve[i]
            let span = a.r - b.r
            return span > 0 ? a.kelvin + (b.kelvin - a.kelvin) * (a.r - r) / span : b.kelvin
        }
        return curve[curve.count - 1].kelvin
    }

    /// The colour correction matrix for `kelvin`.
    public func correction(kelvin: Double) -> Matrix3 {
        Self.interpolate(ccms, at: kelvin, key: \.kelvin) { a, b, t in CCM(kelvin: 0, matrix: a.matrix.mix(b.matrix, t)) }.matrix
    }
}
