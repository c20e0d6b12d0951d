import CameraConformance
import Capture
import Foundation
import LibcameraBackend
import ShutterbugCore
import ShutterbugPosix
import Synchronization
import TestSupport
import Testing

/// The libcamera backend against the real libcamera. Without a camera (CI's unit tier) the
/// manager still starts and lists nothing; the conformance suite needs a camera and runs on the
/// virtual board (vimc) or a Pi.
@Suite("libcamera backend", .timeLimit(.minutes(3)))
struct LibcameraBackendTests {
    static let cameras: [CameraInfo] = (try? LibcameraManager.shared().cameras) ?? []
    static let hasCamera = !cameras.isEmpty

    @Test("the bridge was built against a known libcamera")
    func version() {
        let parts = LibcameraManager.libcameraVersion.split(separator: ".").compactMap { Int($0) }
        #expect(parts.count == 3)
    }

    @Test("no camera is a normal state: the manager starts and lists what is there")
    func managerStarts() throws {
        let m = try LibcameraManager.shared()
        for c in m.cameras {
            #expect(!c.id.isEmpty)
            #expect(!c.isSimulated)
        }
    }

    @Test("opening a camera that is not there names the ones that are")
    func openMissing() throws {
        let m = try LibcameraManager.shared()
        #expect {
            _ = try m.open("/base/no/such/camera")
        } throws: { error in
            guard let e = error as? ShutterbugError else { return false }
            return e.code == .noSuchCamera && e.message.contains("cameras present")
        }
    }

    static var conformance: CameraConformance {
        CameraConformance(
            stream: StreamRequest(role: .viewfinder, width: 636, height: 480),
            unsupportedControl: CameraControls(exposureTime: .milliseconds(10), analogueGain: Gain(2), lensPosition: Dioptres(1)),
            frameTimeout: .seconds(10),
            content: { c in vimcColourBars(c.buffers[0]) }
        ) {
            let m = try LibcameraManager.shared()
            guard let first = m.cameras.first else { throw ShutterbugError(.noSuchCamera, "no camera") }
            return try m.open(first.id)
        }
    }

    @Suite("conformance on a real camera", .serialized, .enabled(if: hasCamera, "needs a libcamera camera: runs on the virtual board (vimc) or a Raspberry Pi"))
    struct Conformance {
        @Test func configure() throws { try LibcameraBackendTests.conformance.configureReportsAdjustments() }
        @Test func buffers() throws { try LibcameraBackendTests.conformance.allocatesReadableBuffers() }
        @Test func capture() async throws { try await LibcameraBackendTests.conformance.capturesWithRequestReuse(frames: 100) }
        @Test func stop() async throws { try await LibcameraBackendTests.conformance.stopReturnsEveryRequest() }
        @Test func queueRacesStop() async throws { try await LibcameraBackendTests.conformance.queueRacesStop() }
        @Test func restart() async throws { try await LibcameraBackendTests.conformance.restartsAfterStop() }
        @Test func misuse() throws { try LibcameraBackendTests.conformance.rejectsMisuse() }
        @Test func unsupported() async throws { try await LibcameraBackendTests.conformance.reportsUnsupportedControls() }
        @Test func release() async throws { try await LibcameraBackendTests.conformance.releaseEndsTheSequence() }
        @Test func queueRacesRelease() async throws { try await LibcameraBackendTests.conformance.queueRacesRelease(rounds: 20) }
        @Test func reacquire() async throws { try await LibcameraBackendTests.conformance.reacquiresAfterRelease() }

        @Test("each stream role configures, with what libcamera settled on")
        func roles() throws {
            let m = try LibcameraManager.shared()
            let cam = try m.open(try #require(m.cameras.first?.id))
            defer { cam.release() }
            var configured: [StreamRole] = []
            for role in StreamRole.allCases {
                do {
                    let c = try cam.configure([StreamRequest(role: role)])
                    let s = try #require(c.streams.first)
                    #expect(s.role == role && s.width > 0 && s.height > 0 && s.bufferCount > 0 && s.frameSize >= s.stride * s.height)
                    configured.append(role)
                } catch let e as ShutterbugError {
                    // A role the pipeline cannot do is refused cleanly, never a crash.
                    #expect(e.code == .invalidArgument, "\(role): \(e)")
                }
            }
            #expect(configured.contains(.viewfinder) && configured.contains(.still) && configured.contains(.video), "configured: \(configured)")
        }

        @Test("a session on the camera runs on the camera's own thread: each frame is handled where libcamera's completion is heard, no other thread woken for it")
        func sessionOnTheCameraThread() async throws {
            let m = try LibcameraManager.shared()
            let cam = try m.open(try #require(m.cameras.first?.id))
            defer { cam.release() }
            // Through the protocol, as the session sees it (a property of another type would
            // not be the protocol's witness, and the session would fall back to the pool).
            let backend: any CameraBackend = cam
            let loop = try #require(backend.executor as? EventLoopExecutor, "the camera offers its thread to the session")
            let session = CaptureSession(backend: backend)
            _ = try await session.start(stream: StreamRequest(role: .viewfinder, width: 636, height: 480))
            let seen = Mutex((onLoop: 0, elsewhere: 0))
            let before = loop.statistics
            // Few frames, a long deadline: vimc under the Raspberry Pi fork on the emulated board
            // makes one frame in some 0.7 s.
            let done = await session.requests(count: 6) { _ in
                let here = loop.isCurrent && loop.isBetweenJobs
                seen.withLock { here ? ($0.onLoop += 1) : ($0.elsewhere += 1) }
            }
            try await withDeadline(.seconds(90), "6 frames from \(cam.info.id)") { for await _ in done {} }
            let after = loop.statistics
            await session.stop()
            let (onLoop, elsewhere) = seen.withLock { ($0.onLoop, $0.elsewhere) }
            #expect(onLoop == 6 && elsewhere == 0, "frames handled on the camera's thread between its jobs: \(onLoop), elsewhere: \(elsewhere)")
            #expect(after.sourceEvents - before.sourceEvents >= 6, "\(before) -> \(after)")
        }

        @Test("two processes cannot both acquire the camera")
        func exclusive() throws {
            let m = try LibcameraManager.shared()
            let id = try #require(m.cameras.first?.id)
            let held = try m.open(id)
            defer { held.release() }
            let exe = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("shutterbug")
            let p = Process()
            p.executableURL = exe
            p.arguments = ["stream", "--camera", id, "--frames", "1"]
            let err = Pipe()
            p.standardError = err
            p.standardOutput = Pipe()
            try p.run()
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            #expect(p.terminationStatus != 0)
            #expect(text.contains("in use by another process"), "\(text)")
        }
    }
}

/// vimc's sensor shows 75% colour bars: white, yellow, cyan, green, magenta, red, blue, black,
/// eight equal columns, with its controls' values written as text from the top left. Checks the
/// bar centres on a row near the bottom, clear of that text both where libcamera scales a third
/// of the frame up (0.0.3) and where it scales the sensor's 1920x1080 down (0.1 and later on
/// kernels from 5.16: there the text covers the top tenth).
func vimcColourBars(_ b: any FrameBuffer) -> String? {
    let bars: [(UInt8, UInt8, UInt8)] = [(191, 191, 191), (191, 191, 0), (0, 191, 191), (0, 191, 0), (191, 0, 191), (191, 0, 0), (0, 0, 191), (0, 0, 0)]
    // libcamera's BGR888 is R, G, B bytes in memory; RGB888 is B, G, R.
    guard b.pixelFormat == .bgr888 || b.pixelFormat == .rgb888 else { return "unexpected format \(b.pixelFormat)" }
    let swap = b.pixelFormat == .rgb888
    return b.withUnsafeBytes { bytes -> String? in
        let row = (b.height - 10) * b.planes[0].stride
        for (i, bar) in bars.enumerated() {
            let x = (2 * i + 1) * b.width / 16
            var px = (bytes[row + 3 * x], bytes[row + 3 * x + 1], bytes[row + 3 * x + 2])
            if swap { px = (px.2, px.1, px.0) }
            let close = { (a: UInt8, e: UInt8) in abs(Int(a) - Int(e)) <= 8 }
            if !(close(px.0, bar.0) && close(px.1, bar.1) && close(px.2, bar.2)) {
                return "bar \(i) at x=\(x) is \(px), expected \(bar)"
            }
        }
        return nil
    }
}
