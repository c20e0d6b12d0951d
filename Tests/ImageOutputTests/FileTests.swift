import Capture
import CaptureScheduler
import Foundation
import ImageOutput
import ShutterbugCore
import ShutterbugPosix
import SimulatedCamera
import TestSupport
import Testing

/// Runs a tool nobody here wrote (off Swift's cooperative pool); its absence is a failure that
/// says what to install.
func tool(_ name: String, _ args: [String]) async throws -> (status: Int32, out: Data, err: String) {
    let c = try await runChild("/usr/bin/env", [name] + args)
    if c.status == 127 {
        Issue.record("\(name) is not installed; board/setup-host.sh installs it (libimage-exiftool-perl, libraw-bin, libjpeg-turbo-progs)")
    }
    return (c.status, c.stdout, c.err)
}

/// exiftool's numeric view of a file: tag name to value.
func exif(_ path: String) async throws -> [String: Any] {
    let r = try await tool("exiftool", ["-j", "-n", path])
    let list = try JSONSerialization.jsonObject(with: r.out) as? [[String: Any]]
    return list?.first ?? [:]
}

/// Mean of the black-subtracted green samples of a DNG as LibRaw decodes it (unprocessed_raw's
/// 16-bit PGM of the raw data).
func greenMean(_ dng: String, cfa: CFAPattern, black: Double) async throws -> Double {
    let r = try await tool("unprocessed_raw", ["-q", dng])
    #expect(r.status == 0, "unprocessed_raw: \(r.err)")
    let data = try Data(contentsOf: URL(fileURLWithPath: dng + ".pgm"))
    try? FileManager.default.removeItem(atPath: dng + ".pgm")
    // "P5\nW H\n65535\n" then big-endian 16-bit samples.
    var fields: [String] = []
    var i = 0
    var current = ""
    while fields.count < 4 {
        let c = Character(UnicodeScalar(data[i]))
        if c.isWhitespace { if !current.isEmpty { fields.append(current); current = "" } } else { current.append(c) }
        i += 1
    }
    let w = Int(fields[1])!, h = Int(fields[2])!
    let greens = Array(cfa.rawValue).enumerated().filter { $0.element == "G" }.map { $0.offset }
    var sum = 0.0, n = 0
    data.withUnsafeBytes { raw in
        let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + i
        var y = 0
        while y < h {
            var x = 0
            while x < w {
                let site = (y & 1) * 2 + (x & 1)
                if greens.contains(site) {
                    let o = 2 * (y * w + x)
                    sum += Double(Int(p[o]) << 8 | Int(p[o + 1])) - black
                    n += 1
                }
                x += 3  // every third column and row: enough samples, both green sites
            }
            y += 3
        }
    }
    return sum / Double(n)
}

struct WrittenCapture {
    var files: [WrittenFile]
    var failures: [String]
    var resolved: ResolvedPhotoSettings?
    var photos: [(step: ResolvedStep, metadata: FrameMetadata)]
    var events: [String]
}

/// A bracket written by `PhotoFileWriter` from a simulated camera in virtual time.
func writeBracket(_ profile: SensorProfile, raw: (Int, Int), rawPacking: BayerPacking = .csi2, bracket: BracketSettings,
                  formats: Set<PhotoFormat> = [.dng, .jpeg], lens: Double? = nil, into root: String) async throws -> WrittenCapture {
    var o = SimulationOptions()
    o.clock = .virtual
    o.landing = .random
    let cam = SimulatedCamera(profile: profile, options: o)
    let session = CaptureSession(backend: cam)
    let rawFormat = PixelFormat.bayer(BayerFormat(cfa: profile.cfa, bits: profile.bitDepth, packing: rawPacking))
    let config = try await session.start(streams: [StreamRequest(role: .still, width: 640, height: 480), StreamRequest(role: .raw, width: raw.0, height: raw.1, pixelFormat: rawFormat)],
                                         preparedBracketCount: bracket.count)
    if let lens { _ = try await session.configure { $0.lockedFocus = Dioptres(lens) } }
    let writer = try PhotoFileWriter(directory: try OutputDirectory(path: root, reserve: 0), streams: config.streams,
                                     camera: CameraDescription(profile: profile), pool: ProcessingPool(workers: 2), jpegQuality: 90)
    var w = WrittenCapture(files: [], failures: [], resolved: nil, photos: [], events: [])
    for try await e in writer.capture(PhotoSettings(bracket: bracket, formats: formats), on: session) {
        switch e {
        case .settingsResolved: w.events.append("resolved")
        case .backPressure: w.events.append("backPressure")
        case .exposureStarted: w.events.append("started")
        case .exposureEnded: w.events.append("ended")
        case .photoCaptured(let s, let m): w.events.append("captured"); w.photos.append((s, m))
        case .captureFinished(let r): w.events.append("finished"); w.resolved = r
        case .fileWritten(let f): w.events.append("file"); w.files.append(f)
        case .writeFailed(_, _, let err): w.events.append("failed"); w.failures.append("\(err)")
        case .filesFinished: w.events.append("done")
        case .notice(let n): w.events.append("notice: \(n)")
        case .photoMetered: w.events.append("metered")
        }
    }
    await session.stop()
    #expect(await session.photosHeld == 0)
    return w
}

@Suite("DNG and JPEG files, read back by exiftool, LibRaw and djpeg", .serialized, .timeLimit(.minutes(5)))
struct FileTests {
    static let cases: [(SensorProfile, (Int, Int), BayerPacking, Double?)] = [
        (.imx477, (2028, 1520), .csi2, nil),
        (.imx708, (2304, 1296), .csi2, 2.0),
        (.ov5647, (1296, 972), .csi2, nil),
        (.imx219, (640, 480), .none, nil),
    ]

    @Test("every tag tells the frame's truth; raw brightness follows 2^ΔEV", arguments: 0..<4)
    func bracketFiles(index: Int) async throws {
        let (profile, raw, packing, lens) = Self.cases[index]
        let root = NSTemporaryDirectory() + "sb-files-\(UUID().uuidString)"
        defer { if ProcessInfo.processInfo.environment["KEEP"] == nil { try? FileManager.default.removeItem(atPath: root) } }
        let base = Duration.milliseconds(2)
        let bracket = BracketSettings.manualExposure([(base, Gain(1)), (base * 2, Gain(1)), (base * 4, Gain(2))])
        let w = try await writeBracket(profile, raw: raw, rawPacking: packing, bracket: bracket, lens: lens, into: root)
        #expect(w.failures.isEmpty, "\(w.failures)")
        #expect(w.files.count == 7, "\(w.files.map(\.path))")
        #expect(w.events.first == "resolved" && w.events.last == "done")
        #expect(w.events.firstIndex(of: "finished")! < w.events.lastIndex(of: "file")!, "the sidecar lands after the capture finishes")
        let resolved = try #require(w.resolved)

        var greens: [Double] = []
        for (step, m) in w.photos {
            let n = step.index + 1
            let dng = try #require(w.files.first { $0.step == n && $0.format == "dng" }).path
            let jpg = try #require(w.files.first { $0.step == n && $0.format == "jpeg" }).path
            let exposure = try #require(m.exposureTime).secondsValue
            let iso = try #require(m.totalGain).iso
            for path in [dng, jpg] {
                let t = try await exif(path)
                #expect(t["Make"] as? String == "Raspberry Pi")
                #expect(t["Model"] as? String == profile.model)
                let e = try #require(t["ExposureTime"] as? Double, "\(path): no ExposureTime")
                #expect(abs(e - exposure) / exposure < 0.001, "\(path): ExposureTime \(e) vs frame \(exposure)")
                #expect((t["ISO"] as? Double).map { abs($0 - iso.rounded()) < 0.5 } == true, "\(path): ISO \(t["ISO"] ?? "-") vs \(iso)")
                #expect(t["ExposureMode"] as? Int == 2, "auto bracket")
                #expect((t["ImageDescription"] as? String)?.contains("bracket step \(n) of 3") == true)
                #expect(t["ImageUniqueID"] as? String == PhotoFacts.uniqueID(captureID: resolved.uniqueID, step: n))
                // The frame's own clock, to the millisecond: exposure start through the
                // realtime-monotonic offset, not the time of saving.
                let subsec = try #require(t["SubSecTimeOriginal"] as? Int ?? (t["SubSecTimeOriginal"] as? String).flatMap { Int($0) })
                let original = try #require(t["DateTimeOriginal"] as? String)
                let sidecar = try sidecarFrame(w, step: n)
                let local = try #require(sidecar["exposureStartLocal"] as? String)
                #expect(local.hasPrefix(original.replacingOccurrences(of: ":", with: "-", options: [], range: original.startIndex..<original.index(original.startIndex, offsetBy: 10)).replacingOccurrences(of: " ", with: "T")))
                #expect(local.contains(".\(String(subsec).leftPad(3))"), "\(local) vs subsec \(subsec)")
                #expect(t["OffsetTimeOriginal"] is String)
                if let lens {
                    let d = try #require(t["SubjectDistance"] as? Double, "\(path): no SubjectDistance")
                    #expect(abs(d - 1 / lens) < 0.001)
                } else {
                    #expect(t["SubjectDistance"] == nil, "no lens, no distance")
                }
            }
            // DNG specifics.
            let t = try await exif(dng)
            let gains = try #require(m.colourGains)
            let neutral = (t["AsShotNeutral"] as? String)?.split(separator: " ").compactMap { Double($0) } ?? []
            #expect(neutral.count == 3 && abs(neutral[0] - 1 / gains.red) < 1e-4 && abs(neutral[2] - 1 / gains.blue) < 1e-4, "AsShotNeutral \(neutral)")
            #expect(t["WhiteLevel"] as? Int == (1 << profile.bitDepth) - 1)
            #expect((t["BlackLevel"] as? String)?.split(separator: " ").compactMap { Double($0) } == Array(repeating: Double(profile.blackLevel), count: 4))
            #expect(t["DNGVersion"] as? String == "1 4 0 0")
            #expect(t["ColorMatrix1"] is String)
            // LibRaw: size and CFA.
            let id = String(decoding: try await tool("raw-identify", ["-v", dng]).out, as: UTF8.self)
            let lines = id.split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
            #expect(lines.contains("Image size: \(raw.0) x \(raw.1)"), "\(id)")
            #expect(lines.contains("Filter pattern: \(String(repeating: profile.cfa.rawValue, count: 4))"), "\(profile.cfa) in \(id)")
            #expect(id.contains("Thumb size:"))
            // djpeg decodes the JPEG at the still stream's size.
            let d = try await tool("djpeg", ["-pnm", jpg])
            #expect(d.status == 0, "djpeg: \(d.err)")
            #expect(String(decoding: d.out.prefix(20), as: UTF8.self).hasPrefix("P6\n640 480\n"))
            let thumb = try await tool("exiftool", ["-b", "-ThumbnailImage", jpg])
            #expect(thumb.out.count > 100 && thumb.out.prefix(2) == Data([0xFF, 0xD8]), "EXIF thumbnail is a JPEG")
            greens.append(try await greenMean(dng, cfa: profile.cfa, black: Double(profile.blackLevel)))
        }
        // Steps: E, 2E, 4E at double gain = 1, 2 and 3 stops over the first.
        // Raw data carries exposure × analogue gain; digital gain is the ISP's.
        let stops = w.photos.map { p in log2(p.metadata.exposureTime!.secondsValue * p.metadata.analogueGain!.value) }
        for i in 1..<greens.count {
            let expected = pow(2, stops[i] - stops[0])
            let measured = greens[i] / greens[0]
            #expect(abs(measured / expected - 1) < 0.03, "step \(i + 1): raw ratio \(measured), 2^ΔEV \(expected); green means \(greens); frames \(w.photos.map { "\($0.metadata.exposureTime!) a\($0.metadata.analogueGain!) d\($0.metadata.digitalGain.map { "\($0)" } ?? "-")" })")
        }
    }

    @Test("the sidecar holds the request, the plan, every frame's metadata and the files")
    func sidecar() async throws {
        let root = NSTemporaryDirectory() + "sb-sidecar-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let w = try await writeBracket(.imx477, raw: (1332, 990), bracket: .exposureBias([-1, 0, 1]), formats: [.jpeg], into: root)
        #expect(w.failures.isEmpty)
        let json = try sidecarJSON(w)
        #expect(json["schema"] as? String == "shutterbug.capture/2")
        #expect(json["jpegQuality"] as? Int == 90)  // writeBracket's quality
        // Integers past 2^53 are strings of digits, which a JSON reader cannot round.
        let clock = try #require(json["clock"] as? [String: Any])
        let offset = try #require((clock["realtimeMinusMonotonicNs"] as? String).flatMap { Int64($0) })
        #expect(offset.magnitude > JSONObject.exactIntegerLimit, "the offset this test guards (\(offset)) fits a double after all")
        let bracket = try #require(json["bracket"] as? [String: Any])
        #expect(bracket["kind"] as? String == "exposureBias")
        #expect(bracket["biasesEV"] as? [Double] == [-1, 0, 1])
        let steps = try #require(json["steps"] as? [[String: Any]])
        #expect(steps.count == 3)
        for (s, p) in zip(steps, w.photos) {
            let f = try #require(s["frame"] as? [String: Any])
            #expect(f["sequence"] as? Int == Int(p.metadata.sequence))
            #expect(f["sensorTimestampNs"] as? Int64 == p.metadata.sensorTimestamp?.nanoseconds || (f["sensorTimestampNs"] as? Int).map(Int64.init) == p.metadata.sensorTimestamp?.nanoseconds)
            #expect(abs((f["exposureTimeUs"] as? Double ?? 0) - p.metadata.exposureTime!.microsecondsValue) < 0.01)
            #expect(f["colourGainRed"] as? Double == p.metadata.colourGains?.red)
            // What the Pi reports besides, carried through.
            // (Foundation's JSON reader rounds the last bit of some doubles.)
            let ccm = try #require(f["colourCorrectionMatrix"] as? [Double])
            #expect(ccm.count == 9 && zip(ccm, p.metadata.colourCorrectionMatrix ?? []).allSatisfy { abs($0 - $1) < 1e-12 })
            #expect((f["sensorBlackLevels"] as? [Double])?.map(Int.init) == p.metadata.sensorBlackLevels)
            #expect(f["sensorTemperatureC"] as? Double == p.metadata.sensorTemperature)
            #expect((f["wallClockNs"] as? String).flatMap { Int64($0) } == p.metadata.wallClock?.nanoseconds)
            #expect(p.metadata.wallClock != nil)
            // Files relative to the sidecar, with their size and quality.
            let files = try #require(s["files"] as? [[String: Any]])
            #expect(files.count == 1)
            let sidecarDir = (try #require(w.files.first { $0.format == "json" }).path as NSString).deletingLastPathComponent
            for file in files {
                let path = try #require(file["path"] as? String)
                #expect(!path.hasPrefix("/") && FileManager.default.fileExists(atPath: sidecarDir + "/" + path), "\(path) is not relative to the sidecar")
                #expect(file["width"] as? Int == 640 && file["height"] as? Int == 480 && file["quality"] as? Int == 90, "\(file)")
            }
        }
        let resolved = try #require(json["resolved"] as? [String: Any])
        // Random landing, as on a Pi: the IPA may turn late once inside the bracket, which
        // repeats one step's frame (BracketTests): N or N + 1 frames.
        #expect([3, 4].contains(resolved["framesFirstToLast"] as? Int ?? 0), "\(resolved)")
        #expect(resolved["meteredExposureUs"] is Double)
    }
}

func sidecarJSON(_ w: WrittenCapture) throws -> [String: Any] {
    let path = try #require(w.files.first { $0.format == "json" }).path
    return try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
}

func sidecarFrame(_ w: WrittenCapture, step: Int) throws -> [String: Any] {
    let steps = try #require(try sidecarJSON(w)["steps"] as? [[String: Any]])
    return try #require(steps.first { $0["step"] as? Int == step }?["frame"] as? [String: Any])
}

extension String {
    func leftPad(_ n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}

@Suite("the writer under load", .timeLimit(.minutes(3)))
struct WriterLoadTests {
    @Test("pools made and dropped at once (a writer thrown away when the camera refuses a setting) stop their threads, even those not started yet (a stress test: the race that crashed the CLI under load is timing-dependent)")
    func poolDroppedAtOnce() {
        for _ in 0..<300 {
            let pool = ProcessingPool(workers: 4)
            _ = pool.workers
        }
        // One that ran a job, dropped while idle.
        let pool = ProcessingPool(workers: 2)
        let done = ConditionLock()
        nonisolated(unsafe) var ran = false
        pool.submit(bytes: 0) { _ in done.withLock { ran = true; done.broadcast() } }
        done.withLock { while !ran { done.wait() } }
        #expect(ran)
    }

    @Test("a capture that finds the pool full waits, reports back-pressure, and still writes every file")
    func backPressure() async throws {
        let root = NSTemporaryDirectory() + "sb-load-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        var o = SimulationOptions()
        o.clock = .virtual
        let profile = SensorProfile.imx477
        let cam = SimulatedCamera(profile: profile, options: o)
        let session = CaptureSession(backend: cam)
        let config = try await session.start(streams: [StreamRequest(role: .still, width: 1332, height: 990)], preparedBracketCount: 3)
        // Room for one photo's copy at a time: the second capture must wait for the first's
        // files.
        let frame = config.streams[0].frameSize
        let writer = try PhotoFileWriter(directory: try OutputDirectory(path: root, reserve: 0), streams: config.streams,
                                         camera: CameraDescription(profile: profile), pool: ProcessingPool(workers: 1, memoryLimit: frame))
        func run(_ settings: PhotoSettings) async throws -> [String] {
            var events: [String] = []
            for try await e in writer.capture(settings, on: session) {
                switch e {
                case .backPressure: events.append("backPressure")
                case .fileWritten(let f): events.append(f.format)
                case .writeFailed(_, _, let err): events.append("failed: \(err)")
                default: break
                }
            }
            return events
        }
        async let a = run(PhotoSettings(bracket: .exposureBias([-1, 0, 1]), formats: [.jpeg]))
        async let b = run(PhotoSettings(bracket: .exposureBias([-1, 1]), formats: [.jpeg]))
        let (ea, eb) = try await (a, b)
        await session.stop()
        #expect(ea.filter { $0 == "jpeg" }.count == 3 && eb.filter { $0 == "jpeg" }.count == 2, "\(ea) \(eb)")
        #expect(ea.filter { $0 == "json" }.count == 1 && eb.filter { $0 == "json" }.count == 1)
        #expect(ea.contains("backPressure") != eb.contains("backPressure"), "exactly one of the two waited: \(ea) \(eb)")
        #expect(!(ea + eb).contains { $0.hasPrefix("failed") })
        #expect(writer.pool.load.peak <= 3 * frame, "the pool never held more than one capture: \(writer.pool.load.peak)")
    }
}

@Suite("A capture that fails part-way", .timeLimit(.minutes(2)))
struct PartialCaptureTests {
    @Test("a bracket whose camera stalls part-way still writes the steps it captured and a sidecar naming the missing ones, then fails with the cause")
    func stalledBracketKeepsItsSteps() async throws {
        let root = NSTemporaryDirectory() + "sb-partial-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        // Virtual time: the stall is judged on the camera's clock (its frames' timestamps jump
        // 30 s), so what the stall meets does not depend on how busy the machine is.
        var o = SimulationOptions()
        o.clock = .virtual
        o.faults.stallAtFrame = 40
        o.faults.stallDuration = .seconds(30)
        let profile = SensorProfile.imx708
        let cam = SimulatedCamera(profile: profile, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let config = try await session.start(streams: [StreamRequest(role: .video, width: 640, height: 480)], preparedBracketCount: 3)
        let writer = try PhotoFileWriter(directory: try OutputDirectory(path: root, reserve: 0), streams: config.streams,
                                         camera: CameraDescription(profile: profile), pool: ProcessingPool(workers: 2))
        var captured: [Int] = [], written: [WrittenFile] = []
        var thrown: ShutterbugError?
        do {
            for try await e in writer.capture(PhotoSettings(bracket: .lensPositions([0.5, 5, 10].map { Dioptres($0) }), formats: [.jpeg]), on: session) {
                switch e {
                case .photoCaptured(let s, _): captured.append(s.index + 1)
                case .fileWritten(let f): written.append(f)
                default: break
                }
            }
        } catch let e as ShutterbugError {
            thrown = e
        }
        await session.stop()
        let error = try #require(thrown, "the stalled bracket did not fail")
        // The steps before the stall are captured, the rest missing, and the files say exactly
        // that.
        let k = captured.count
        try #require((1...2).contains(k), "captured \(captured): the stall at frame 40 should fall inside the bracket")
        let missing = Array(k + 1...3)
        #expect(captured == Array(1...k))
        #expect(error.code == .timeout)
        #expect(error.message.contains("captured and written, step\(missing.count == 1 ? "" : "s") \(missing.map(String.init).joined(separator: ",")) missing"), "\(error)")
        #expect(written.filter { $0.format == "jpeg" }.compactMap(\.step).sorted() == captured)
        for f in written { #expect(FileManager.default.fileExists(atPath: f.path), "\(f.path)") }
        let sidecar = try #require(written.first { $0.format == "json" }, "no sidecar")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: sidecar.path))) as? [String: Any])
        let incomplete = try #require(json["incomplete"] as? [String: Any], "the sidecar does not say the capture is incomplete")
        #expect(incomplete["missingSteps"] as? [Int] == missing)
        #expect((json["steps"] as? [[String: Any]])?.compactMap { $0["step"] as? Int } == captured)
        #expect(await session.photosHeld == 0, "a buffer was not given back")
    }
}
