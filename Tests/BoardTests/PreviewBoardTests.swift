import Capture
import CaptureScheduler
import Foundation
@testable import KMS
import ShutterbugCore
import SimulatedCamera
import Synchronization
import Testing

/// Keeps the first frame after the start-up frames and declines the rest.
final class FirstFrame: FrameSink, @unchecked Sendable {
    let name = "first"
    let frame = Mutex<SinkFrame?>(nil)
    func process(_ f: SinkFrame) -> Bool {
        guard f.metadata.sequence >= 8 else { return false }
        return frame.withLock { kept in
            guard kept == nil else { return false }
            kept = f
            return true
        }
    }
}

extension BoardTests {
/// The DRM/KMS preview on vkms: what the display scans out is the camera's frame, on both the
/// zero-copy and the converting path, and a slow display never costs a bracket a frame.
///
/// Nested in `BoardTests`, whose traits it inherits: serialized with the other vkms test,
/// since only one open card at a time can be DRM master, and only on the virtual board.
@Suite("Preview on vkms")
struct PreviewBoardTests {
    static func vkms() throws -> Card {
        let path = try #require(Card.allPaths().first { (try? Card(path: $0))?.driverName == "vkms" }, "no vkms card")
        return try Card(path: path)
    }

    static func camera(scene: SimulationOptions.Scene = .chart) -> SimulatedCamera {
        var o = SimulationOptions()
        o.clock = .virtual
        // Controls land on the earliest frame every time, so a bracket's frames are exactly
        // consecutive (random landing may repeat one step's frame, with or without a preview).
        o.landing = .early
        o.scene = scene
        o.seed = 7
        return SimulatedCamera(profile: .imx477, options: o)
    }

    /// One settled frame of `stream` from the simulated camera.
    static func grab(_ stream: StreamRequest) async throws -> (SinkFrame, CaptureSession, SimulatedCamera) {
        let cam = camera()
        let grab = FirstFrame()
        let session = CaptureSession(backend: cam)
        _ = try await session.start(streams: [stream], preparedBracketCount: 1, sinks: [grab])
        for await _ in await session.requests(count: 100) where grab.frame.withLock({ $0 != nil }) { break }
        let frame = try #require(grab.frame.withLock { $0 }, "no settled frame")
        return (frame, session, cam)
    }

    @Test("zero-copy: a frame's dmabuf imported as a framebuffer scans out exactly as captured (writeback, unscaled)")
    func zeroCopyExact() async throws {
        let card = try Self.vkms()
        let (frame, session, cam) = try await Self.grab(StreamRequest(role: .viewfinder, width: 640, height: 480, pixelFormat: .xrgb8888))
        defer { cam.release() }
        let b = frame.buffers[0]
        let fd = try #require(b.dmabufFD, "the simulated camera allocates dmabufs where /dev/dma_heap/system exists")
        b.prepareContents()
        let fb = try Framebuffer(card: card, dmabuf: fd, width: b.width, height: b.height, format: b.pixelFormat, planes: b.planes)
        let captured = try DumbFramebuffer(card: card, width: b.width, height: b.height)
        try card.writeback(framebufferID: fb.id, width: b.width, height: b.height, into: captured)
        var differing = 0
        b.withUnsafeBytes { src in
            for y in 0..<b.height {
                for x in 0..<b.width where src.load(fromByteOffset: y * b.planes[0].stride + x * 4, as: UInt32.self) & 0xff_ffff != captured[x, y] & 0xff_ffff {
                    differing += 1
                }
            }
        }
        #expect(differing == 0, "\(differing) of \(b.width * b.height) pixels differ")
        frame.release()
        await session.stop()
    }

    @Test("converting: a YUV420 frame scaled into a dumb buffer scans out within 2 levels per channel of the source (writeback, scaled 800x600 to 1024x768)")
    func convertingScaled() async throws {
        let card = try Self.vkms()
        let (frame, session, cam) = try await Self.grab(StreamRequest(role: .still, width: 800, height: 600, pixelFormat: .yuv420))
        defer { cam.release() }
        let b = frame.buffers[0]
        let (w, h) = (1024, 768)
        let target = try DumbFramebuffer(card: card, width: w, height: h)
        let xs = (0..<w).map { $0 * b.width / w }, ys = (0..<h).map { $0 * b.height / h }
        PreviewSink.convert(b, into: target, at: (0, 0, w, h), xs: xs, ys: ys)
        let captured = try DumbFramebuffer(card: card, width: w, height: h)
        try card.writeback(target, into: captured)
        // The expected picture, worked out here in floating point from the YUV planes.
        var worst = 0
        b.withUnsafeBytes { src in
            let p = b.planes
            for y in stride(from: 0, to: h, by: 3) {
                for x in stride(from: 0, to: w, by: 3) {
                    let sx = xs[x], sy = ys[y]
                    let l = Double(src[p[0].offset + sy * p[0].stride + sx])
                    let u = Double(src[p[1].offset + (sy / 2) * p[1].stride + sx / 2]) - 128
                    let v = Double(src[p[2].offset + (sy / 2) * p[2].stride + sx / 2]) - 128
                    let rgb = [l + 1.402 * v, l - 0.344136 * u - 0.714136 * v, l + 1.772 * u].map { Int(min(max($0.rounded(), 0), 255)) }
                    let got = captured[x, y]
                    let shown = [Int(got >> 16 & 0xff), Int(got >> 8 & 0xff), Int(got & 0xff)]
                    worst = max(worst, zip(rgb, shown).map { abs($0 - $1) }.max()!)
                }
            }
        }
        #expect(worst <= 2, "largest channel difference \(worst)")
        frame.release()
        await session.stop()
    }

    @Test("the preview sink on vkms's display: zero-copy for a display-sized XRGB8888 viewfinder, converting for YUV420, frames shown and the display put back")
    func sinkOnDisplay() async throws {
        for (format, expected) in [(PixelFormat.xrgb8888, PreviewSink.Path.zeroCopy), (.yuv420, .converting)] {
            // Read with a card opened and closed again: the first opener is DRM master.
            let before = try { try Self.vkms().resources().planes.first(where: \.isPrimary) }()
            let (display, reason) = Display.open(.auto)
            let d = try #require(display, "no display: \(reason)")
            let sink = try PreviewSink(display: d)
            let cam = Self.camera(scene: .grating)
            defer { cam.release() }
            let session = CaptureSession(backend: cam)
            let stream = StreamRequest(role: format == .xrgb8888 ? .viewfinder : .still, width: d.mode.width, height: d.mode.height, pixelFormat: format)
            _ = try await session.start(streams: [stream], preparedBracketCount: 1, sinks: [sink], framesPerSink: 2)
            // Until three flips have completed, frame by frame (no sleeping; a debug build
            // renders and converts a frame in about a second).
            for await _ in await session.requests(count: 10_000_000) where sink.statistics.shown >= 3 { break }
            let s = sink.statistics
            #expect(s.path == expected, "\(format): \(s.pathReason)")
            #expect(s.shown >= 3 && s.failed == 0, "\(format): \(s)")
            await session.stop()
            sink.close()
            let after = try d.card.resources().planes.first(where: \.isPrimary)
            #expect(after?.framebufferID == before?.framebufferID && after?.crtcID == before?.crtcID, "the plane was not put back: \(String(describing: before)) -> \(String(describing: after))")
            // Closed, the sink has given the display up, though the sink, its display and the
            // session (whose sink list holds it until the session itself goes) are all still
            // here: the next preview takes it at once. (Before, DRM master went only with the
            // card's last reference, and this loop's second turn once found the display owned.)
            let (next, why) = Display.open(.auto)
            #expect(next != nil, "\(format): the display is still held after close: \(why)")
            next?.restore()
            withExtendedLifetime((sink, d, session)) {}
        }
    }

    @Test("a 9-shot bracket with a slow display (flip events read 50 ms late) and without one: 9 consecutive frames either way, no buffer kept, preview drops counted")
    func bracketWithSlowDisplay() async throws {
        let steps: [(duration: Duration, gain: Gain)] = (0..<9).map { (.microseconds(Int64(1000 + 500 * $0)), Gain(1)) }
        for slow in [true, false] {
            let sink: PreviewSink?
            if slow {
                let (display, reason) = Display.open(.auto)
                sink = try PreviewSink(display: try #require(display, "no display: \(reason)"))
                sink?.eventDelay = .milliseconds(50)
            } else {
                sink = nil
            }
            let cam = Self.camera(scene: .grating)
            defer { cam.release() }
            let session = CaptureSession(backend: cam)
            var streams = [StreamRequest(role: .still, width: 640, height: 480)]
            if let sink { streams.append(StreamRequest(role: .viewfinder, width: sink.display.mode.width, height: sink.display.mode.height, pixelFormat: .xrgb8888)) }
            _ = try await session.start(streams: streams, preparedBracketCount: 9, sinks: sink.map { [$0] } ?? [], framesPerSink: 2)
            if let sink {
                // The display is showing frames before the bracket starts.
                for await _ in await session.requests(count: 10_000_000) where sink.statistics.shown >= 1 { break }
            }
            var seqs: [UInt32] = []
            for try await event in await session.capture(PhotoSettings(bracket: .manualExposure(steps))) {
                if case .photo(let p) = event {
                    seqs.append(p.metadata.sequence)
                    p.release()
                }
            }
            #expect(seqs.count == 9 && seqs.max()! - seqs.min()! == 8, "slow display \(slow): frames \(seqs)")
            // Frames the preview could not take: declined while a flip was pending, or not
            // offered because it held all it may.
            let offeredButMissed = await session.sinkStatistics.first?.dropped ?? 0
            await session.stop()
            sink?.close()
            // Every buffer came back: nothing is held by the photos or the preview.
            await session.waitUntilHeld(0)
            if let s = sink?.statistics { #expect(s.dropped + offeredButMissed > 0 && s.shown > 0, "slow display: \(s), \(offeredButMissed) not offered") }
        }
    }
}
}
