import CRawCodecs
import ShutterbugCore

/// Renders the synthetic scene: a grating whose pixel values scale with exposure × gain (with
/// noise and clipping) and whose contrast falls as the lens moves away from the subject, so a
/// test can check EV steps and focus from the pixels alone.
///
/// The ISP here has no tone curve: processed values are linear in exposure × gain. The mean of
/// the grating over whole periods is the scene signal, so the mean pixel value of an unclipped
/// frame is `signal × 255` (8-bit) independent of focus.
struct SceneRenderer: Sendable {
    static let period = 16
    /// Grating amplitude at perfect focus, as a fraction of the mean.
    static let amplitude = 0.8
    /// Defocus (dioptres) at which contrast falls to 1/e.
    static let blurScale = 0.6

    /// sin(2πx/period) for one period; rows and columns index it modulo the period.
    private let wave: [Double] = (0..<period).map { sin(2 * Double.pi * Double($0) / Double(period)) }

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

    /// Fills `memory` with the frame in `layout`'s format.
    func render(_ recipe: SimulatedPipeline.FrameRecipe, into memory: UnsafeMutableRawBufferPointer, layout: SimulatedBufferLayout, profile: SensorProfile) {
        var noise = SplitMix64(seed: recipe.sequence &* 0x9E37_79B9 &+ 17)
        let modulation = Self.amplitude * Self.contrast(defocus: recipe.defocus)
        // Noise: shot noise grows with the signal's square root, read noise with gain.
        let readNoise = 0.002 * recipe.totalGain.squareRoot()
        @inline(__always) func sample(_ v: Double) -> Double {
            let sigma = (readNoise * readNoise + 0.0004 * v * recipe.totalGain.squareRoot()).squareRoot()
            let u = noise.unit() + noise.unit() - 1  // triangular, mean 0
            return min(max(v + u * sigma * 2.45, 0), 1)
        }
        let base = memory.baseAddress!
        let w = layout.width, h = layout.height
        switch layout.format {
        case .yuv420:
            let y = base.assumingMemoryBound(to: UInt8.self)
            for row in 0..<h {
                let line = y + layout.planes[0].offset + row * layout.planes[0].stride
                for col in 0..<w {
                    line[col] = UInt8(sample(value(x: col, y: row, signal: recipe.signal, modulation: modulation)) * 255 + 0.5)
                }
            }
            // A neutral scene balanced by the ISP: chroma is zero.
            for p in 1...2 {
                let plane = layout.planes[p]
                (base + plane.offset).initializeMemory(as: UInt8.self, repeating: 128, count: plane.length)
            }
        case .xrgb8888, .rgb888, .bgr888:
            let bpp = layout.format.bytesPerPixel!
            for row in 0..<h {
                let line = base.assumingMemoryBound(to: UInt8.self) + row * layout.planes[0].stride
                for col in 0..<w {
                    let v = UInt8(sample(value(x: col, y: row, signal: recipe.signal, modulation: modulation)) * 255 + 0.5)
                    let px = line + col * bpp
                    px[0] = v
                    px[1] = v
                    px[2] = v
                    if bpp == 4 { px[3] = 0xff }
                }
            }
        default:
            renderRaw(recipe, base: base, layout: layout, profile: profile, sample: sample)
        }
    }

    /// A Bayer mosaic at the sensor's bit depth, black level added, in the layout's packing
    /// (16-bit containers, or CSI-2 RAW10/RAW12). A neutral scene under a 5000 K illuminant:
    /// red and blue sites see less than green by the white-balance gains the ISP would apply.
    private func renderRaw(_ recipe: SimulatedPipeline.FrameRecipe, base: UnsafeMutableRawPointer, layout: SimulatedBufferLayout, profile: SensorProfile, sample: (Double) -> Double) {
        let bayer = layout.format.bayer ?? BayerFormat(cfa: profile.cfa, bits: 16, packing: .none)
        let black = Double(profile.blackLevel)
        let range = Double((1 << profile.bitDepth) - 1) - black
        let neutral = SimulatedPipeline.sceneNeutralGains
        let pattern = Array(bayer.cfa.rawValue)
        let modulation = Self.amplitude * Self.contrast(defocus: recipe.defocus)
        var line = [UInt16](repeating: 0, count: layout.width)
        for row in 0..<layout.height {
            for col in 0..<layout.width {
                let colour = pattern[(row & 1) * 2 + (col & 1)]
                let scale = colour == "R" ? 1 / neutral.red : colour == "B" ? 1 / neutral.blue : 1
                let v = sample(value(x: col, y: row, signal: recipe.signal * scale, modulation: modulation))
                line[col] = UInt16(black + v * range + 0.5)
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
