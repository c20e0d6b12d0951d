import ShutterbugCore

/// The simulated colour scene: a 24-patch ColorChecker Classic filling the frame.
///
/// Reference colours are X-Rite's published CIE L*a*b* values (D50, 2° observer) for the
/// ColorChecker Classic made before November 2014, as X-Rite published them and Imatest and
/// BabelColor tabulate them ("ColorChecker2005" in OpenCV's mcc module; "Before Nov 2014" in
/// colour-science). Tests compare against the same table, written out independently in
/// `Tests/colour/colorchecker.py`.
///
/// How a patch reaches the sensor: its XYZ under D50 is Bradford-adapted to D65 and taken to
/// linear sRGB, which is what a perfectly white-balanced, colour-corrected camera should
/// report for it under any light. The sensor's white-balanced RGB is then the inverse of the
/// tuning's colour correction matrix at the light's temperature applied to that, and its raw
/// RGB that times the light's raw grey (R/G, 1, B/G from the tuning's CT curve). So the sensor
/// is exactly as the Raspberry Pi tuning describes it: an ISP using the right gains and matrix
/// reproduces the chart, and one using wrong ones shows how wrong they are.
public enum ColourChart {
    /// Columns and rows of patches; patch i is at column i % 6, row i / 6.
    public static let columns = 6, rows = 4
    /// The chart fills the frame less this margin on each side (fraction of width/height).
    public static let margin = 0.04
    /// A patch fills this fraction of its cell (width and height), centred; the rest is the
    /// chart's black body.
    public static let patchFill = 0.76

    public static let names = [
        "dark skin", "light skin", "blue sky", "foliage", "blue flower", "bluish green",
        "orange", "purplish blue", "moderate red", "purple", "yellow green", "orange yellow",
        "blue", "green", "red", "yellow", "magenta", "cyan",
        "white 9.5", "neutral 8", "neutral 6.5", "neutral 5", "neutral 3.5", "black 2",
    ]

    /// L*, a*, b* (D50) of each patch.
    public static let referenceLab: [(Double, Double, Double)] = [
        (37.986, 13.555, 14.059), (65.711, 18.130, 17.810), (49.927, -4.880, -21.925),
        (43.139, -13.095, 21.905), (55.112, 8.844, -25.399), (70.719, -33.397, -0.199),
        (62.661, 36.067, 57.096), (40.020, 10.410, -45.964), (51.124, 48.239, 16.248),
        (30.325, 22.976, -21.587), (72.532, -23.709, 57.255), (71.941, 19.363, 67.857),
        (28.778, 14.179, -50.297), (55.261, -38.342, 31.370), (42.101, 53.378, 28.190),
        (81.733, 4.039, 79.819), (51.935, 49.986, -14.574), (51.038, -28.631, -28.638),
        (96.539, -0.425, 1.186), (81.257, -0.638, -0.335), (66.766, -0.734, -0.504),
        (50.867, -0.153, -0.270), (35.656, -0.421, -1.231), (20.461, -0.079, -0.973),
    ]

    /// Linear sRGB (D65) of each patch, from the reference.
    public static let linearSRGB: [RGB] = {
        let adapt = Colorimetry.adaptation(from: Colorimetry.d50, to: Colorimetry.d65)
        return referenceLab.map { Colorimetry.xyzToSRGB.apply(adapt.apply(Colorimetry.labToXYZ($0.0, $0.1, $0.2, white: Colorimetry.d50))) }
    }()

    /// The chart's body between and around the patches: a dark neutral (about L* 10, darker than the black patch).
    public static let body = RGB(0.012, 0.012, 0.012)

    /// The patch index of each position along one axis (-1: the body), for `cells` cells.
    static func cellIndex(length: Int, cells: Int) -> [Int8] {
        let n = Double(length)
        let start = n * margin, span = n * (1 - 2 * margin)
        return (0..<length).map { i in
            let f = (Double(i) + 0.5 - start) / span * Double(cells)
            guard f >= 0, f < Double(cells) else { return -1 }
            let cell = f.rounded(.down)
            let within = f - cell
            let edge = (1 - patchFill) / 2
            return within >= edge && within < 1 - edge ? Int8(cell) : -1
        }
    }
}
