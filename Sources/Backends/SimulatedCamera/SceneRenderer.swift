import CRawCodecs
import ShutterbugCore

/// Renders the synthetic scene: a grey grating whose pixel values scale with exposure × gain
/// (with noise and clipping) and whose contrast falls as the lens moves away from the subject,
/// so a test can check EV steps and focus from the pixels alone; or a colour chart
/// (`ColourChart`) under the scene's light.
///
/// Raw frames are what the sensor saw: the scene's colours through the sensor's response under
/// the light (`FrameRecipe.rawWhite`, `sceneCorrection`), black level added. Processed frames
/// go through the simulated ISP as the Pi's does: the frame's colour gains, its colour
/// correction matrix, the sRGB tone curve, and full-range BT.601 Y'CbCr (sYCC, the colour
/// space of libcamera's still stream), chroma averaged over each 2x2 block.
///
/// The grating's mean over whole periods is the scene signal: an unclipped frame's mean
/// linear value is `signal` independent of focus; a chart patch of luminance Y has linear
/// value `signal × Y / 0.18` (the AGC exposes for an 18% grey).
struct SceneRenderer: Sendable {
    static let period = 16
    /// Grating amplitude at perfect focus, as a fraction of the mean.
    static let amplitude = 0.8
    /// Defocus (dioptres) at which contrast falls to 1/e.
    static let blurScale = 0.6
    /// Linear values the tone-curve table resolves.
    static let toneSteps = 16384

    /// sin(2πx/period) for one period; rows and columns index it modulo the period.
    private let wave: [Double] = (0..<period).map { sin(2 * Double.pi * Double($0) / Double(period)) }
    /// The sRGB tone curve, linear 0...1 in `toneSteps` steps to 8 bits.
    private let tone: [UInt8] = (0...toneSteps).map { UInt8((Colorimetry.srgbEncode(Double($0) / Double(toneSteps)) * 255).rounded()) }

    /// Contrast of the grating for a defocus in dioptres.
    static func contrast(defocus: Double) -> Double {
        let d = defocus / blurScale
        return exp(-d * d)
    }

    /// The linear value (fraction of full scale) of pixel (x, y), before noise and clipping.
    @inline(__always)
    func value(x: Int, y: Int, signal: Double, modulation: Double) -> Double {
        signal * (1 + modulation * wave[x & (Self.period - 1)] * wave[y & (Self.period - 1)])
    }

    /// What one frame shows, worked out once per frame.
    private struct Palette {
        /// Raw RGB per unit of scene signal: patches 0..<24, then the chart body (chart), or
        /// the grey (grating, one entry).
        var raw: [RGB]
        /// The same after the ISP's white-balance gains.
        var balanced: [RGB]
        /// Where each balanced channel saturates: the sensor clips at full scale before the
        /// gains, and the ISP clips at full scale after them (so a clipped highlight is white,
        /// not magenta).
        var ceiling: RGB
        /// The ISP's colour correction matrix.
        var correction: Matrix3
        /// The grating's grey comes out neutral: Y only, chroma 128.
        var neutral: Bool
        var columns: [Int8] = []
        var rows: [Int8] = []

        init(_ recipe: SimulatedPipeline.FrameRecipe, width: Int, height: Int) {
            let g = RGB(recipe.colourGains.red, 1, recipe.colourGains.blue)
            let sensor = recipe.sceneCorrection.inverse
            switch recipe.scene {
            case .grating:
                raw = [recipe.rawWhite]
            case .chart:
                // Colours relative to the 18% grey the exposure is set for.
                raw = (ColourChart.linearSRGB + [ColourChart.body]).map { sensor.apply($0 * (1 / 0.18)) * recipe.rawWhite }
                columns = ColourChart.cellIndex(length: width, cells: ColourChart.columns)
                rows = ColourChart.cellIndex(length: height, cells: ColourChart.rows)
            }
            balanced = raw.map { $0 * g }
            ceiling = RGB(min(g.r, 1), 1, min(g.b, 1))
            correction = recipe.correction
            let p = correction.apply(balanced[0])
            neutral = recipe.scene == .grating && abs(p.r - 1) < 1e-3 && abs(p.g - 1) < 1e-3 && abs(p.b - 1) < 1e-3
        }

        /// Linear sRGB out of the ISP for entry `i` at scene level `level`, with sensor noise
        /// `noise` (in raw units) added before the sensor clips.
        @inline(__always)
        func processed(_ i: Int, level: Double, noise: Double) -> RGB {
            let b = balanced[i]
            let c = RGB(min(max(b.r * level + noise, 0), ceiling.r), min(max(b.g * level + noise, 0), ceiling.g), min(max(b.b * level + noise, 0), ceiling.b))
            return correction.apply(c)
        }

        /// The entry for pixel (x, y).
        @inline(__always)
        func index(x: Int, y: Int) -> Int {
            guard !rows.isEmpty else { return 0 }
            let r = rows[y], c = columns[x]
            return r < 0 || c < 0 ? raw.count - 1 : Int(r) * ColourChart.columns + Int(c)
        }
    }

    /// Fills `memory` with the frame in `layout`'s format.
    func render(_ recipe: SimulatedPipeline.FrameRecipe, into memory: UnsafeMutableRawBufferPointer, layout: SimulatedBufferLayout, profile: SensorProfile) {
        var noise = SplitMix64(seed: recipe.sequence &* 0x9E37_79B9 &+ 17)
        let modulation = recipe.scene == .grating ? Self.amplitude * Self.contrast(defocus: recipe.defocus) : 0
        // Noise: shot noise grows with the signal's square root, read noise with gain.
        let readNoise = 0.002 * recipe.totalGain.squareRoot()
        let gainRoot = recipe.totalGain.squareRoot()
        /// Zero-mean noise for a linear level `v`.
        @inline(__always) func noiseFor(_ v: Double) -> Double {
            let sigma = (readNoise * readNoise + 0.0004 * max(v, 0) * gainRoot).squareRoot()
            let u = noise.unit() + noise.unit() - 1  // triangular, mean 0
            return u * sigma * 2.45
        }
        let palette = Palette(recipe, width: layout.width, height: layout.height)
        let base = memory.baseAddress!
        let w = layout.width, h = layout.height
        let steps = Double(Self.toneSteps)
        switch layout.format {
        case .yuv420:
            let yPlane = layout.planes[0], cb = layout.planes[1], cr = layout.planes[2]
            let bytes = base.assumingMemoryBound(to: UInt8.self)
            if palette.neutral {
                // A grey balanced by the ISP: luma through the tone curve, chroma zero.
                tone.withUnsafeBufferPointer { t in
                    for row in 0..<h {
                        let line = bytes + yPlane.offset + row * yPlane.stride
                        for col in 0..<w {
                            let v = value(x: col, y: row, signal: recipe.signal, modulation: modulation)
                            let lin = min(max(v + noiseFor(v), 0), 1)
                            line[col] = t[Int(lin * steps + 0.5)]
                        }
                    }
                }
                for p in [cb, cr] { (base + p.offset).initializeMemory(as: UInt8.self, repeating: 128, count: p.length) }
                return
            }
            tone.withUnsafeBufferPointer { t in
                for row2 in stride(from: 0, to: h, by: 2) {
                    let cbLine = bytes + cb.offset + (row2 / 2) * cb.stride
                    let crLine = bytes + cr.offset + (row2 / 2) * cr.stride
                    for col2 in stride(from: 0, to: w, by: 2) {
                        var sr = 0.0, sg = 0.0, sb = 0.0, n = 0.0
                        for dy in 0..<min(2, h - row2) {
                            let row = row2 + dy
                            let line = bytes + yPlane.offset + row * yPlane.stride
                            for dx in 0..<min(2, w - col2) {
                                let col = col2 + dx
                                let level = value(x: col, y: row, signal: recipe.signal, modulation: modulation)
                                let i = palette.index(x: col, y: row)
                                let c = palette.processed(i, level: level, noise: noiseFor(palette.balanced[i].g * level))
                                let r = Double(t[Int(min(max(c.r, 0), 1) * steps + 0.5)])
                                let g = Double(t[Int(min(max(c.g, 0), 1) * steps + 0.5)])
                                let b = Double(t[Int(min(max(c.b, 0), 1) * steps + 0.5)])
                                // Spelt out for Swift 6.2's type checker (one long sum times out).
                                let luma: Double = 0.299 * r + 0.587 * g + 0.114 * b
                                line[col] = UInt8(min(max(luma + 0.5, 0), 255))
                                sr += r
                                sg += g
                                sb += b
                                n += 1
                            }
                        }
                        sr /= n
                        sg /= n
                        sb /= n
                        let cbValue: Double = 128 - 0.168736 * sr - 0.331264 * sg + 0.5 * sb
                        let crValue: Double = 128 + 0.5 * sr - 0.418688 * sg - 0.081312 * sb
                        cbLine[col2 / 2] = UInt8(min(max(cbValue + 0.5, 0), 255))
                        crLine[col2 / 2] = UInt8(min(max(crValue + 0.5, 0), 255))
                    }
                }
            }
        case .xrgb8888, .rgb888, .bgr888:
            let bpp = layout.format.bytesPerPixel!
            // XRGB8888 and RGB888 are stored B, G, R in memory, BGR888 R, G, B (DRM fourcc
            // names, little-endian), as libcamera names them.
            let redFirst = layout.format == .bgr888
            tone.withUnsafeBufferPointer { t in
                for row in 0..<h {
                    let line = base.assumingMemoryBound(to: UInt8.self) + row * layout.planes[0].stride
                    for col in 0..<w {
                        let level = value(x: col, y: row, signal: recipe.signal, modulation: modulation)
                        let i = palette.index(x: col, y: row)
                        let c = palette.processed(i, level: level, noise: noiseFor(palette.balanced[i].g * level))
                        let r = t[Int(min(max(c.r, 0), 1) * steps + 0.5)]
                        let g = t[Int(min(max(c.g, 0), 1) * steps + 0.5)]
                        let b = t[Int(min(max(c.b, 0), 1) * steps + 0.5)]
                        let px = line + col * bpp
                        px[0] = redFirst ? r : b
                        px[1] = g
                        px[2] = redFirst ? b : r
                        if bpp == 4 { px[3] = 0xff }
                    }
                }
            }
        default:
            renderRaw(recipe, base: base, layout: layout, profile: profile, palette: palette, modulation: modulation, noise: noiseFor)
        }
    }

    /// A Bayer mosaic at the sensor's bit depth, black level added, in the layout's packing
    /// (16-bit containers, or CSI-2 RAW10/RAW12).
    private func renderRaw(_ recipe: SimulatedPipeline.FrameRecipe, base: UnsafeMutableRawPointer, layout: SimulatedBufferLayout, profile: SensorProfile,
                           palette: Palette, modulation: Double, noise: (Double) -> Double) {
        let bayer = layout.format.bayer ?? BayerFormat(cfa: profile.cfa, bits: 16, packing: .none)
        let black = Double(profile.blackLevel)
        let range = Double((1 << profile.bitDepth) - 1) - black
        // Channel of each 2x2 site: 0 red, 1 green, 2 blue.
        let sites = Array(bayer.cfa.rawValue).map { $0 == "R" ? 0 : $0 == "G" ? 1 : 2 }
        var line = [UInt16](repeating: 0, count: layout.width)
        for row in 0..<layout.height {
            for col in 0..<layout.width {
                let level = value(x: col, y: row, signal: recipe.signal, modulation: modulation)
                let c = palette.raw[palette.index(x: col, y: row)]
                let channel = sites[(row & 1) * 2 + (col & 1)]
                let v = level * (channel == 0 ? c.r : channel == 1 ? c.g : c.b)
                let s = min(max(v + noise(v), 0), 1)
                line[col] = UInt16(black + s * range + 0.5)
            }
            let out = (base + row * layout.planes[0].stride).assumingMemoryBound(to: UInt8.self)
            if bayer.packing == .pispComp1 {
                // The Pi 5 front end: samples scaled to 16 bits, then compressed.
                let shift = UInt16(16 - profile.bitDepth)
                for i in line.indices { line[i] <<= shift }
                line.withUnsafeBufferPointer { _ = sbr_pisp_compress_row($0.baseAddress!, UInt32($0.count), out) }
            } else {
                line.withUnsafeBufferPointer { BayerPacker.pack($0, bits: bayer.bits, packing: bayer.packing, into: out) }
            }
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
