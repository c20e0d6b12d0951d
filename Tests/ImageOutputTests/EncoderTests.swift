import Capture
import Foundation
import ImageOutput
import ShutterbugCore
import ShutterbugPosix
import Testing

@Suite("Bayer packing, file names, durable writes, the pool", .timeLimit(.minutes(3)))
struct OutputUnitTests {
    @Test("CSI-2 RAW10/RAW12 and unpacked rows round-trip (simulator's packer, DNG writer's unpacker) at every width", arguments: [10, 12])
    func packRoundTrip(bits: Int) {
        var rng = SystemRandomNumberGenerator()
        for packing in [BayerPacking.csi2, .none] {
            for width in 1...67 {
                let format = BayerFormat(cfa: .rggb, bits: bits, packing: packing)
                let samples = (0..<width).map { _ in UInt16.random(in: 0...UInt16((1 << bits) - 1), using: &rng) }
                var packed = [UInt8](repeating: 0xAA, count: format.rowBytes(width: width) + 8)
                samples.withUnsafeBufferPointer { s in packed.withUnsafeMutableBufferPointer { BayerPacker.pack(s, bits: bits, packing: packing, into: $0.baseAddress!) } }
                // Nothing written past the row.
                #expect(packed[format.rowBytes(width: width)...].allSatisfy { $0 == 0xAA })
                var back = [UInt16](repeating: 0, count: width)
                packed.withUnsafeBufferPointer { p in back.withUnsafeMutableBufferPointer { RawUnpacker.unpack(p.baseAddress!, width: width, format: format, into: $0.baseAddress!) } }
                #expect(back == samples, "width \(width) \(packing)")
            }
        }
    }

    @Test("CSI-2 RAW10 byte layout: four high bytes, then the low bits of all four")
    func raw10Layout() {
        let s: [UInt16] = [0x3FF, 0x001, 0x202, 0x103]
        var out = [UInt8](repeating: 0, count: 5)
        s.withUnsafeBufferPointer { p in out.withUnsafeMutableBufferPointer { BayerPacker.pack(p, bits: 10, packing: .csi2, into: $0.baseAddress!) } }
        #expect(out == [0xFF, 0x00, 0x80, 0x40, 0b11_10_01_11])
    }

    @Test("Bayer formats map to libcamera's fourccs and back")
    func bayerFourcc() {
        for cfa in [CFAPattern.rggb, .grbg, .gbrg, .bggr] {
            for bits in [8, 10, 12, 16] {
                for packing in bits == 8 || bits == 16 ? [BayerPacking.none] : [.none, .csi2] {
                    let b = BayerFormat(cfa: cfa, bits: bits, packing: packing)
                    #expect(PixelFormat.bayer(b).bayer == b)
                }
            }
        }
        #expect(PixelFormat.bayer(BayerFormat(cfa: .rggb, bits: 12, packing: .csi2)).description == "SRGGB12_CSI2P")
        // libcamera's codes (formats.h): SRGGB16 is 'RGB6'; CSI2P is vendor 11, PISP_COMP1 vendor 12.
        #expect(PixelFormat.bayer(BayerFormat(cfa: .rggb, bits: 16, packing: .none)) == PixelFormat(fourcc: 0x3642_4752))
        #expect(PixelFormat.bayer(BayerFormat(cfa: .rggb, bits: 12, packing: .csi2)).modifier == 11 << 56 | 1)
        let pisp = BayerFormat(cfa: .bggr, bits: 16, packing: .pispComp1)
        #expect(PixelFormat.bayer(pisp).bayer == pisp && PixelFormat.bayer(pisp).modifier == 12 << 56 | 1)
        #expect(PixelFormat.bayer(pisp).description == "BGGR_PISP_COMP1")
        #expect(PixelFormat(fourcc: PixelFormat.bayer(pisp).fourcc, modifier: 7 << 56 | 3).bayer == nil, "an unknown modifier is not read as plain samples")
        #expect(PixelFormat.yuv420.bayer == nil)
    }

    @Test("a DNG's raw samples decode (LibRaw) to exactly what the sensor delivered", arguments: [(BayerPacking.csi2, 12), (.csi2, 10), (.none, 10)])
    func dngSamplesExact(packing: BayerPacking, bits: Int) async throws {
        let w = 98, h = 37  // a partial CSI-2 group, a partial strip
        let format = BayerFormat(cfa: .gbrg, bits: bits, packing: packing)
        let stride = (format.rowBytes(width: w) + 63) & ~63
        var bytes = [UInt8](repeating: 0, count: stride * h)
        var expected: [UInt16] = []
        for y in 0..<h {
            let limit = 1 << bits
            let row: [UInt16] = (0..<w).map { (x: Int) -> UInt16 in UInt16((x * 37 + y * 101 + x * y) % limit) }
            expected += row
            row.withUnsafeBufferPointer { r in bytes.withUnsafeMutableBufferPointer { BayerPacker.pack(r, bits: bits, packing: packing, into: $0.baseAddress! + y * stride) } }
        }
        let frame = FrameCopy(width: w, height: h, format: .bayer(format), planes: [PlaneLayout(offset: 0, length: stride * h, stride: stride)], bytes: bytes)
        let facts = PhotoFacts(camera: CameraDescription(model: "test", blackLevel: 0, bitDepth: bits), description: "exact", uniqueID: "0", exposureStart: nil,
                               exposureTime: .milliseconds(10), iso: 100, subjectDistance: nil, exposureBias: nil, exposureMode: 1)
        let root = NSTemporaryDirectory() + "sb-dng-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let file = try OutputDirectory(path: root, reserve: 0).write("exact.dng") { fd in
            try DNGEncoder.write(frame, facts: facts, colourGains: ColourGains(red: 2, blue: 1.5), to: fd)
        }
        let r = try await tool("unprocessed_raw", ["-q", file.path])
        #expect(r.status == 0, "\(r.err)")
        let pgm = try Data(contentsOf: URL(fileURLWithPath: file.path + ".pgm"))
        let header = Array("P5\n\(w) \(h)\n65535\n".utf8)
        #expect(Array(pgm.prefix(header.count)) == header)
        let body = [UInt8](pgm.dropFirst(header.count))
        let decoded: [UInt16] = (0..<(body.count / 2)).map { (i: Int) -> UInt16 in UInt16(body[2 * i]) << 8 | UInt16(body[2 * i + 1]) }
        #expect(decoded.count == w * h)
        let wrong = zip(decoded, expected).enumerated().filter { $0.element.0 != $0.element.1 }
        #expect(wrong.isEmpty, "\(wrong.count) samples differ, first at \(wrong.first.map { ($0.offset % w, $0.offset / w) }.map { "\($0)" } ?? "-")")
    }

    @Test("name templates: tokens render, unknown tokens and escapes are refused")
    func templates() throws {
        let t = try FileNameTemplate(validating: "{date}/{camera}-{capture}-{step}of{steps}")
        let time = LocalTime(unixNanoseconds: 1_795_000_000_123_000_000)
        let name = t.render(time: time, capture: 7, id: 42, step: 2, steps: 3, camera: "imx477")
        #expect(name == "\(time.date)/imx477-0007-2of3")
        #expect(t.render(time: time, capture: 7, id: 42, step: nil, steps: 3, camera: "imx477").hasSuffix("-0007-captureof3"))
        #expect(throws: ShutterbugError.self) { try FileNameTemplate(validating: "{nope}/{step}") }
        #expect(throws: ShutterbugError.self) { try FileNameTemplate(validating: "../{step}") }
        #expect(throws: ShutterbugError.self) { try FileNameTemplate(validating: "/abs/{step}") }
        #expect(throws: ShutterbugError.self) { try FileNameTemplate(validating: "{date}/same") }
    }

    @Test("a name already taken gets -2, never replacing the file; a failed write leaves nothing")
    func durableWrites() throws {
        let root = NSTemporaryDirectory() + "sb-out-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let dir = try OutputDirectory(path: root, reserve: 0)
        let a = try dir.write("d/x.jpg") { try OutputDirectory.writeAll($0, Array("first".utf8)) }
        let b = try dir.write("d/x.jpg") { try OutputDirectory.writeAll($0, Array("second".utf8)) }
        #expect(a.path == root + "/d/x.jpg")
        #expect(b.path == root + "/d/x-2.jpg")
        #expect(try String(contentsOfFile: a.path, encoding: .utf8) == "first")
        #expect(try String(contentsOfFile: b.path, encoding: .utf8) == "second")
        #expect(b.bytes == 6)

        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try dir.write("d/y.dng") { fd in
                try OutputDirectory.writeAll(fd, [UInt8](repeating: 1, count: 4096))
                throw Boom()
            }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: root + "/d").sorted()
        #expect(names == ["x-2.jpg", "x.jpg"], "a failed write left \(names)")

        // A dead writer's temporary file (from a filesystem without O_TMPFILE) is swept; a
        // live one's (this process's) is not: another run may be writing it right now.
        let dead = root + "/d/\(OutputDirectory.temporaryPrefix)\(Int32.max)-4-0.tmp"
        let live = root + "/d/\(OutputDirectory.temporaryPrefix)\(getpid())-5-0.tmp"
        _ = FileManager.default.createFile(atPath: dead, contents: Data([1, 2, 3]))
        _ = FileManager.default.createFile(atPath: live, contents: Data([4, 5, 6]))
        #expect(dir.removeStaleTemporaries() == 1)
        #expect(!FileManager.default.fileExists(atPath: dead))
        #expect(FileManager.default.fileExists(atPath: live))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/d").count == 3)
    }

    @Test("the free-space check names the free space, the need and the reserve")
    func spaceCheck() throws {
        let root = NSTemporaryDirectory() + "sb-space-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let free = try OutputDirectory(path: root, reserve: 0).freeBytes()
        #expect(free > 0)
        let tight = try OutputDirectory(path: root, reserve: free)
        do {
            try tight.checkSpace(for: 1 << 20)
            Issue.record("a capture that eats into the reserve was allowed")
        } catch let e as ShutterbugError {
            #expect(e.code == .noSpace)
            #expect(e.message.contains("free") && e.message.contains("reserve"))
        }
        try OutputDirectory(path: root, reserve: 0).checkSpace(for: 1 << 20)
    }

    @Test("a full pool makes the next capture wait until a job finishes (back-pressure)")
    func backPressure() async throws {
        let pool = ProcessingPool(workers: 1, memoryLimit: 100)
        defer { pool.shutdown() }
        let gate = Gate()
        #expect(await pool.reserve(80) == .zero)
        pool.submit(bytes: 80) { _ in gate.wait() }
        let order = Order()
        let second = Task {
            let waited = await pool.reserve(80)
            order.append("admitted")
            return waited
        }
        // Once the second reservation is waiting (a condition, not a guess at time), free room.
        while pool.waitingReservations == 0 { await Task.yield() }
        order.append("job released")
        gate.open()
        let waited = await second.value
        #expect(order.items == ["job released", "admitted"])
        #expect(waited > .zero)
        pool.unreserve(80)
        #expect(pool.load.reserved == 0)
        #expect(pool.load.peak == 80)
    }
}

final class Gate: @unchecked Sendable {
    private let lock = ConditionLock()
    private var isOpen = false
    func wait() { lock.withLock { while !isOpen { lock.wait() } } }
    func open() { lock.withLock { isOpen = true; lock.broadcast() } }
}

final class Order: @unchecked Sendable {
    private let lock = ConditionLock()
    private var list: [String] = []
    func append(_ s: String) { lock.withLock { list.append(s) } }
    var items: [String] { lock.withLock { list } }
}

@Suite("The DNG's embedded preview")
struct DNGPreviewTests {
    /// A 16-bit RGGB frame of two flat colours (linear, 0...1 per channel) meeting at row (or,
    /// `vertical`, column) `edge`: before it `a`, from it on `b`.
    func frame(width: Int, height: Int, edge: Int, vertical: Bool = false, a: (Double, Double, Double), b: (Double, Double, Double)) -> FrameCopy {
        let format = BayerFormat(cfa: .rggb, bits: 16, packing: .none)
        let stride = width * 2
        var bytes = [UInt8](repeating: 0, count: stride * height)
        for y in 0..<height {
            for x in 0..<width {
                let c = (vertical ? x : y) < edge ? a : b
                let v = (y & 1) == 0 ? ((x & 1) == 0 ? c.0 : c.1) : ((x & 1) == 0 ? c.1 : c.2)
                let s = UInt16((v * 65535).rounded())
                bytes[y * stride + 2 * x] = UInt8(s & 0xff)
                bytes[y * stride + 2 * x + 1] = UInt8(s >> 8)
            }
        }
        return FrameCopy(width: width, height: height, format: .bayer(format), planes: [PlaneLayout(offset: 0, length: stride * height, stride: stride)], bytes: bytes)
    }

    @Test("a pixel straddling an edge between two colours is a blend of the two, whichever row or column the edge falls on: red and blue take the same share of each side, within 1/16 (a site's reach either side of the edge), not 1/8 (the fringe a chart's patches showed)",
          arguments: Array(0..<16), [false, true])
    func noFringe(offset: Int, vertical: Bool) throws {
        let a = (0.6, 0.1, 0.05), b = (0.05, 0.3, 0.6)
        let f = frame(width: 64, height: 64, edge: 16 + offset, vertical: vertical, a: a, b: b)
        let facts = PhotoFacts(camera: CameraDescription(model: "test", blackLevel: 0, bitDepth: 16), description: "edge", uniqueID: "0", exposureStart: nil,
                               exposureTime: .milliseconds(10), iso: 100, subjectDistance: nil, exposureBias: nil, exposureMode: 1)
        let p = try DNGEncoder.preview(f, facts: facts, colourGains: ColourGains(red: 1, blue: 1))
        // The pixel of the block holding the edge, back to linear light: each channel's share
        // of the way from a to b must be the same (a blend), within 1/16 (half a site's weight
        // of sixteen, where the edge falls between a red and a blue site) and the rounding.
        let pixel = (1 * p.width + 1) * 3
        let lin = (0..<3).map { Colorimetry.srgbDecode(Double(p.rgb[pixel + $0]) / 255) }
        let shares = [(lin[0] - a.0) / (b.0 - a.0), (lin[2] - a.2) / (b.2 - a.2)]
        #expect(abs(shares[0] - shares[1]) <= 0.0625 + 0.02, "edge \(offset) \(vertical ? "columns" : "rows") into the block: red is \(shares[0]) of the way to the other side, blue \(shares[1])")
        // And a blend: the true share is the block's part past the edge.
        let truth = Double(16 - offset) / 16
        #expect(abs((shares[0] + shares[1]) / 2 - truth) <= 0.05, "edge \(offset): shares \(shares), the block is \(truth) past it")
    }
}
