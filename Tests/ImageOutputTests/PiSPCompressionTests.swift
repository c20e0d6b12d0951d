import CRawCodecs
import Foundation
import ImageOutput
import ShutterbugCore
import Testing

/// The most a PISP_COMP1 word's quantisation mode may move a sample (half its step, in 16-bit
/// units; the documented levels: mode 0 steps of 16 then 32, 1 of 64, 2 of 128, 3 of 256 then 512).
private func bound(mode: UInt8, value: Int) -> Int {
    switch mode {
    case 0: value <= 5120 + 2048 ? 8 : 16
    case 1: 32
    case 2: 64
    default: value < 24064 + 2048 ? 128 : 256
    }
}

/// Compares decoded samples with what went in: each within its word's bound, samples at or
/// below the 2048 offset back as 2048. Returns the failures and the worst error.
private func check(_ input: [UInt16], _ decoded: [UInt16], modes: [UInt8], width: Int) -> (failures: Int, worst: Int) {
    var failures = 0, worst = 0
    for (i, (a, b)) in zip(input, decoded).enumerated() {
        let x = i % width
        let mode = modes[(i / width) * 2 * ((width + 7) / 8) + (x / 8) * 2 + (x & 1)]
        let expected = max(Int(a), 2048)
        let e = abs(Int(b) - expected)
        worst = max(worst, e)
        if e > bound(mode: mode, value: expected) { failures += 1 }
    }
    return (failures, worst)
}

/// A Bayer frame of a sensor at its own depth: smooth shading, hard edges, noise, a dark
/// corner below black and a clipped highlight, so every quantisation mode is needed.
private func scene(width: Int, height: Int, bits: Int, black: Int, seed: UInt64) -> [UInt16] {
    var s = seed
    func noise() -> Int {
        s = s &* 6364136223846793005 &+ 1442695040888963407
        return Int(truncatingIfNeeded: (s >> 33) % 41) - 20
    }
    let top = (1 << bits) - 1
    return (0..<(width * height)).map { i in
        let x = i % width, y = i / width
        var v = black + (x * (top - black)) / max(1, width - 1) / 2 + (y * 200) / max(1, height)
        if (x / 13 + y / 7) % 2 == 0 { v += top / 3 }              // edges
        if x < width / 8 && y < height / 8 { v = black - 30 }      // below black (sensor noise)
        if x > width * 7 / 8 && y > height * 7 / 8 { v = top }     // clipped
        return UInt16(min(max(v + noise(), 0), top))
    }
}

@Suite("The Pi 5's compressed raw (PISP_COMP1)", .timeLimit(.minutes(3)))
struct PiSPCompressionTests {
    @Test("rows round-trip within each block's documented error, at every width, whatever the content")
    func rowRoundTrip() {
        var rng = SystemRandomNumberGenerator()
        var used = Set<UInt8>()
        for width in [1, 7, 8, 9, 15, 16, 63, 64, 100, 4056] {
            for spread in [0, 20, 300, 5000, 65535] {
                let base = Int.random(in: 0...65535, using: &rng)
                let input = (0..<width).map { _ in UInt16(clamping: base + Int.random(in: -spread...spread, using: &rng)) }
                let bytes = (width + 7) / 8 * 8
                var packed = [UInt8](repeating: 0xAA, count: bytes + 8)
                input.withUnsafeBufferPointer { i in packed.withUnsafeMutableBufferPointer { _ = sbr_pisp_compress_row(i.baseAddress!, UInt32(width), $0.baseAddress!) } }
                #expect(packed[bytes...].allSatisfy { $0 == 0xAA }, "nothing written past the row")
                var modes = [UInt8](repeating: 0, count: 2 * ((width + 7) / 8))
                packed.withUnsafeBufferPointer { p in modes.withUnsafeMutableBufferPointer { sbr_pisp_row_modes(p.baseAddress!, UInt32(width), $0.baseAddress!) } }
                used.formUnion(modes)
                var back = [UInt16](repeating: 0, count: width)
                packed.withUnsafeBufferPointer { p in back.withUnsafeMutableBufferPointer { RawUnpacker.unpack(p.baseAddress!, width: width, format: BayerFormat(cfa: .rggb, bits: 16, packing: .pispComp1), into: $0.baseAddress!) } }
                let r = check(input, back, modes: modes, width: width)
                #expect(r.failures == 0, "width \(width), spread \(spread): \(r.failures) samples beyond their mode's error (worst \(r.worst))")
            }
        }
        #expect(used == [0, 1, 2, 3], "every quantisation mode was exercised, saw \(used.sorted())")
    }

    /// One block of 8 samples (16-bit scale, offset included) compressed: its two words' modes
    /// and the samples decoded.
    func roundTrip(_ input: [UInt16]) -> (modes: [UInt8], decoded: [UInt16]) {
        let width = input.count
        var packed = [UInt8](repeating: 0, count: (width + 7) / 8 * 8)
        input.withUnsafeBufferPointer { i in packed.withUnsafeMutableBufferPointer { _ = sbr_pisp_compress_row(i.baseAddress!, UInt32(width), $0.baseAddress!) } }
        var modes = [UInt8](repeating: 0, count: 2 * ((width + 7) / 8))
        packed.withUnsafeBufferPointer { p in modes.withUnsafeMutableBufferPointer { sbr_pisp_row_modes(p.baseAddress!, UInt32(width), $0.baseAddress!) } }
        var back = [UInt16](repeating: 0, count: width)
        packed.withUnsafeBufferPointer { p in back.withUnsafeMutableBufferPointer { _ = sbr_pisp_decompress_row(p.baseAddress!, UInt32(width), $0.baseAddress!) } }
        return (modes, back)
    }

    @Test("every level mode 0 can hold is coded in mode 0: across the step change at level 320 (16 below, 32 above) a value is judged by the gap on its own side")
    func finestModeAcrossTheStepChange() {
        var refused: [Int] = []
        // Offset-removed values up to mode 0's top level (11232) and half a step past it.
        for v in 0...(11232 + 16) {
            let s = UInt16(v + 2048)
            let (modes, back) = roundTrip(Array(repeating: s, count: 8))
            if modes != [0, 0] { refused.append(v); continue }
            let step = v <= 5120 ? 16 : 32
            #expect(abs(Int(back[0]) - Int(s)) * 2 <= step, "\(v): decoded \(back[0])")
        }
        #expect(refused.isEmpty, "values mode 0 holds were coded coarser: \(refused.prefix(10))\(refused.count > 10 ? "…" : "") (\(refused.count))")
    }

    @Test("a short last block is padded with its own colour's samples: a bright colour beside a dark one does not coarsen the dark one's last word")
    func paddingKeepsTheColour() {
        for width in [2, 9, 10, 11, 12, 13, 14, 15] {
            // Even columns one colour (dark, mode 0), odd columns the other (bright, escape).
            let input = (0..<width).map { UInt16($0 % 2 == 0 ? 2048 + 1000 : 60000) }
            let (modes, back) = roundTrip(input)
            let lastEven = modes[modes.count - 2]
            #expect(lastEven == 0, "width \(width): the last block's dark samples were coded in mode \(lastEven)")
            for x in stride(from: 0, to: width, by: 2) { #expect(abs(Int(back[x]) - Int(input[x])) <= 8, "width \(width), column \(x): \(back[x])") }
        }
    }

    @Test("a known block decodes as the format describes")
    func knownBlock() {
        // Mode 1 (steps of 64): q = 10, 20, 30, 40 -> 640, 1280, 1920, 2560, plus the 2048 offset.
        // Fields: min(q1, q2) = 20, q2 - q1 + 64 = 74, q0 - max(0, q1 - 64) = 10, q3 - max(0, q2 - 64) = 40.
        let w: UInt32 = 1 | 20 << 2 | 74 << 11 | 10 << 18 | 40 << 25
        // Mode 3 escape: (q0, q1) = (100, 5), (q2, q3) = (175, 0).
        let a: UInt32 = 2816 * (100 >> 4) + 16 * 5 + (100 & 15), b: UInt32 = 2816 * (175 >> 4) + 16 * 0 + (175 & 15)
        let e: UInt32 = 3 | a << 2 | b << 17
        var bytes = [UInt8](repeating: 0, count: 8)
        for k in 0..<4 { bytes[k] = UInt8(truncatingIfNeeded: w >> (8 * k)); bytes[4 + k] = UInt8(truncatingIfNeeded: e >> (8 * k)) }
        var out = [UInt16](repeating: 0, count: 8)
        bytes.withUnsafeBufferPointer { p in out.withUnsafeMutableBufferPointer { _ = sbr_pisp_decompress_row(p.baseAddress!, 8, $0.baseAddress!) } }
        let even: [UInt16] = [out[0], out[2], out[4], out[6]]
        let odd: [UInt16] = [out[1], out[3], out[5], out[7]]
        let evenExpected: [UInt16] = [2688, 3328, 3968, 4608]
        // Level 100 of the escape is 512 * (100 - 47); 5 is 256 * 5; 175 saturates.
        let oddExpected: [UInt16] = [29184, 3328, 65535, 2048]
        #expect(even == evenExpected)
        #expect(odd == oddExpected)
    }

    @Test("a Pi 5 DNG decodes (LibRaw) to the Pi 4 path's samples within the codec's error, with 16-bit levels",
          arguments: [(12, 256), (10, 64)])
    func dngMatchesUncompressed(bits: Int, black: Int) async throws {
        let w = 203, h = 61
        let samples = scene(width: w, height: h, bits: bits, black: black, seed: UInt64(bits))
        // Pi 4: CSI-2 packed at the sensor's depth.
        let p4 = BayerFormat(cfa: .bggr, bits: bits, packing: .csi2)
        let s4 = (p4.rowBytes(width: w) + 63) & ~63
        var b4 = [UInt8](repeating: 0, count: s4 * h)
        // Pi 5: scaled to 16 bits and compressed.
        let p5 = BayerFormat(cfa: .bggr, bits: 16, packing: .pispComp1)
        let s5 = (p5.rowBytes(width: w) + 63) & ~63
        var b5 = [UInt8](repeating: 0, count: s5 * h)
        var modes: [UInt8] = []
        for y in 0..<h {
            let row = Array(samples[(y * w)..<((y + 1) * w)])
            row.withUnsafeBufferPointer { r in b4.withUnsafeMutableBufferPointer { BayerPacker.pack(r, bits: bits, packing: .csi2, into: $0.baseAddress! + y * s4) } }
            let scaled = row.map { $0 << UInt16(16 - bits) }
            scaled.withUnsafeBufferPointer { r in b5.withUnsafeMutableBufferPointer { _ = sbr_pisp_compress_row(r.baseAddress!, UInt32(w), $0.baseAddress! + y * s5) } }
            var m = [UInt8](repeating: 0, count: 2 * ((w + 7) / 8))
            b5.withUnsafeBufferPointer { p in m.withUnsafeMutableBufferPointer { sbr_pisp_row_modes(p.baseAddress! + y * s5, UInt32(w), $0.baseAddress!) } }
            modes += m
        }
        let root = NSTemporaryDirectory() + "sb-pisp-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let dir = try OutputDirectory(path: root, reserve: 0)
        let camera = CameraDescription(model: "imx", blackLevel: black, bitDepth: bits)
        func facts() -> PhotoFacts {
            PhotoFacts(camera: camera, description: "pisp", uniqueID: "0", exposureStart: nil, exposureTime: .milliseconds(10), iso: 100,
                       subjectDistance: nil, exposureBias: nil, exposureMode: 1)
        }
        let f4 = try dir.write("pi4.dng") { fd in
            try DNGEncoder.write(FrameCopy(width: w, height: h, format: .bayer(p4), planes: [PlaneLayout(offset: 0, length: s4 * h, stride: s4)], bytes: b4),
                                 facts: facts(), colourGains: ColourGains(red: 2, blue: 1.5), to: fd)
        }
        let f5 = try dir.write("pi5.dng") { fd in
            try DNGEncoder.write(FrameCopy(width: w, height: h, format: .bayer(p5), planes: [PlaneLayout(offset: 0, length: s5 * h, stride: s5)], bytes: b5),
                                 facts: facts(), colourGains: ColourGains(red: 2, blue: 1.5), to: fd)
        }
        func decode(_ path: String) async throws -> [UInt16] {
            let r = try await tool("unprocessed_raw", ["-q", path])
            #expect(r.status == 0, "\(r.err)")
            let pgm = try Data(contentsOf: URL(fileURLWithPath: path + ".pgm"))
            let header = Array("P5\n\(w) \(h)\n65535\n".utf8)
            #expect(Array(pgm.prefix(header.count)) == header)
            let body = [UInt8](pgm.dropFirst(header.count))
            return (0..<(body.count / 2)).map { UInt16(body[2 * $0]) << 8 | UInt16(body[2 * $0 + 1]) }
        }
        let d4 = try await decode(f4.path), d5 = try await decode(f5.path)
        #expect(d4 == samples, "the uncompressed path is exact")
        let r = check(d4.map { $0 << UInt16(16 - bits) }, d5, modes: modes, width: w)
        #expect(r.failures == 0, "\(r.failures) samples beyond the codec's error (worst \(r.worst))")
        // The levels are the stream's (16-bit), not the sensor's.
        let tags = String(decoding: try await tool("exiftool", ["-s3", "-BlackLevel", "-WhiteLevel", "-BitsPerSample", f5.path]).out, as: UTF8.self)
        let b16 = black << (16 - bits)
        #expect(tags.contains("\(b16) \(b16) \(b16) \(b16)") && tags.contains("65535"), "\(tags)")
    }
}
