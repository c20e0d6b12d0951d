import CDRM
import ShutterbugCore
import ShutterbugPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The camera on a display: a `FrameSink` that shows frames with atomic, non-blocking commits
/// and never makes capture wait.
///
/// `process` only hands the frame to the sink's own thread (or declines it) and returns. The
/// thread imports the frame's dmabuf as a framebuffer, cached per buffer (zero-copy), or, where
/// the plane cannot show the stream as it is or the frame is not a dmabuf, converts it into one
/// of two dumb buffers at the mode's size (converting): chosen once, on the first frame, and
/// reported. Each commit asks for a page-flip event; the frame on screen is held until the flip
/// that replaces it completes and then given back. While a flip is pending new frames are
/// dropped and counted, never queued (libcamera's `cam` does the same).
public final class PreviewSink: FrameSink, @unchecked Sendable {
    // `@unchecked Sendable`: `state` is behind a mutex; the rest is touched by the sink thread
    // only, or fixed at init.
    public let name = "preview"
    public let display: Display

    public enum Path: String, Sendable {
        case zeroCopy = "zero-copy"
        case converting
    }

    /// What the preview did.
    public struct Statistics: Sendable, Hashable {
        /// Frames whose flip completed.
        public var shown = 0
        /// Frames declined because a flip was pending (or one was waiting to be committed).
        public var dropped = 0
        /// Commits the driver refused.
        public var failed = 0
        /// CPU time the sink's thread spent putting frames on screen (import or conversion,
        /// commit, events), not counting the camera's own work of filling the frame.
        public var cpuNanoseconds: Int64 = 0
        public var path: Path?
        /// Why this path.
        public var pathReason = ""
    }

    /// Test and benchmark knob: how long the sink's thread waits before reading each page-flip
    /// event, to model a slow display (or a busy compositor). Zero in the product.
    public var eventDelay: Duration = .zero

    private struct State {
        var statistics = Statistics()
        /// Handed over by `process`, not yet committed.
        var waiting: SinkFrame?
        var flipPending = false
        var closed = false
    }

    private let state = Mutex(State())
    private let wake: Int32
    private var thread: OSThread?
    // Sink-thread state.
    private var onScreen: SinkFrame?
    private var committed: SinkFrame?
    private var framebuffers: [Int32: Framebuffer] = [:]
    private var dumb: [DumbFramebuffer] = []
    private var nextDumb = 0
    private var path: Path?
    private var scaleMap: (x: [Int], y: [Int])?
    /// Page flips completed, counted by the event handler (the commits' user data).
    private let flips = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)

    /// Shows frames on `display`.
    public init(display: Display) throws {
        self.display = display
        let fd = sbdrm_wakeup_fd()
        guard fd >= 0 else { throw ShutterbugError.fromErrno(fd, while: "creating the preview's eventfd") }
        wake = fd
        flips.initialize(to: 0)
        thread = OSThread(name: "sb-preview") { [unowned self] in self.run() }
    }

    deinit {
        close()
        Glibc.close(wake)
        flips.deallocate()
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Stops the thread, gives back every frame held and restores the display. Idempotent.
    public func close() {
        let first = state.withLock { s -> Bool in
            defer { s.closed = true }
            return !s.closed
        }
        guard first else { return }
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
        thread?.join()
        thread = nil
        // The display first, so no framebuffer is removed while the plane scans it out.
        display.restore()
        framebuffers.removeAll()
        dumb.removeAll()
        state.withLock { $0.waiting }?.release()
        committed?.release()
        onScreen?.release()
        committed = nil
        onScreen = nil
    }

    // MARK: FrameSink

    public func process(_ frame: SinkFrame) -> Bool {
        let taken = state.withLock { s -> Bool in
            guard !s.closed, s.waiting == nil, !s.flipPending else {
                s.statistics.dropped += 1
                return false
            }
            s.waiting = frame
            return true
        }
        if taken {
            var one: UInt64 = 1
            _ = write(wake, &one, 8)
        }
        return taken
    }

    // MARK: The sink's thread

    private func run() {
        var fds = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0), pollfd(fd: display.card.fd, events: Int16(POLLIN), revents: 0)]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            let n = poll(&fds, 2, 1000)
            if n < 0 && errno != EINTR { break }
            if state.withLock({ $0.closed }) { break }
            if fds[1].revents & Int16(POLLIN) != 0 {
                if eventDelay > .zero { sleepFor(eventDelay) }
                let cpuStart = Self.threadCPU()
                let before = flips.pointee
                if sbdrm_read_flips(display.card.fd) == 0, flips.pointee != before { flipped() }
                let spent = Self.threadCPU() - cpuStart
                state.withLock { $0.statistics.cpuNanoseconds += spent }
            }
            if fds[0].revents & Int16(POLLIN) != 0 {
                var count: UInt64 = 0
                _ = read(wake, &count, 8)
                if let frame = state.withLock({ s -> SinkFrame? in defer { s.waiting = nil }; return s.waiting }) {
                    show(frame)
                }
            }
        }
    }

    /// The committed frame reached the screen: the one it replaced goes back to the camera.
    private func flipped() {
        onScreen?.release()
        onScreen = committed
        committed = nil
        state.withLock {
            $0.flipPending = false
            $0.statistics.shown += 1
        }
    }

    /// The buffer to show: the XRGB8888 (viewfinder) stream, else the YUV420 one.
    private func pick(_ frame: SinkFrame) -> (any FrameBuffer)? {
        frame.buffers.first { $0.pixelFormat == .xrgb8888 } ?? frame.buffers.first { $0.pixelFormat == .yuv420 }
    }

    private func show(_ frame: SinkFrame) {
        guard let buffer = pick(frame) else {
            frame.release()
            state.withLock { $0.statistics.dropped += 1 }
            return
        }
        // The camera's work (the simulated camera renders here) is not the preview's.
        buffer.prepareContents()
        let cpuStart = Self.threadCPU()
        defer {
            let spent = Self.threadCPU() - cpuStart
            state.withLock { $0.statistics.cpuNanoseconds += spent }
        }
        if path == nil { choosePath(for: buffer) }
        do {
            let r = AtomicRequest(card: display.card)
            if path == .zeroCopy, let fd = buffer.dmabufFD {
                let fb = try framebuffers[fd] ?? Framebuffer(card: display.card, dmabuf: fd, width: buffer.width, height: buffer.height,
                                                             format: buffer.pixelFormat, planes: buffer.planes)
                framebuffers[fd] = fb
                try display.place(r, framebuffer: fb.id, source: (buffer.width, buffer.height), destination: display.fit(width: buffer.width, height: buffer.height))
                try r.commit(nonBlocking: true, pageFlipEvent: true, userData: UnsafeMutableRawPointer(flips))
                committed = frame
            } else {
                let target = dumb[nextDumb]
                convert(buffer, into: target)
                frame.release()
                try display.place(r, framebuffer: target.framebufferID, source: (target.width, target.height),
                                  destination: (0, 0, display.mode.width, display.mode.height))
                try r.commit(nonBlocking: true, pageFlipEvent: true, userData: UnsafeMutableRawPointer(flips))
                nextDumb ^= 1
            }
            state.withLock { $0.flipPending = true }
        } catch {
            if committed === frame { committed = nil }
            frame.release()
            state.withLock { $0.statistics.failed += 1 }
        }
    }

    /// Zero-copy when the frame is a dmabuf the card imports and the plane shows at the
    /// fitted size (checked with a test-only commit); otherwise converting.
    private func choosePath(for buffer: any FrameBuffer) {
        let fit = display.fit(width: buffer.width, height: buffer.height)
        var reason: String
        if let fd = buffer.dmabufFD {
            if display.plane.formats.contains(buffer.pixelFormat) {
                do {
                    let fb = try Framebuffer(card: display.card, dmabuf: fd, width: buffer.width, height: buffer.height, format: buffer.pixelFormat, planes: buffer.planes)
                    let r = AtomicRequest(card: display.card)
                    try display.place(r, framebuffer: fb.id, source: (buffer.width, buffer.height), destination: fit)
                    try r.commit(testOnly: true)
                    framebuffers[fd] = fb
                    path = .zeroCopy
                    reason = "\(buffer.width)x\(buffer.height) \(buffer.pixelFormat) dmabufs shown as they are at \(fit.w)x\(fit.h)"
                } catch let e as ShutterbugError {
                    reason = "the plane cannot show \(buffer.width)x\(buffer.height) \(buffer.pixelFormat) at \(fit.w)x\(fit.h) (\(e.message))"
                } catch {
                    reason = "\(error)"
                }
            } else {
                reason = "the plane does not take \(buffer.pixelFormat)"
            }
        } else {
            reason = "the frames are not dmabufs"
        }
        if path == nil {
            path = .converting
            reason = "converting into dumb buffers at \(display.mode.width)x\(display.mode.height): " + reason
            do {
                dumb = try (0..<2).map { _ in try DumbFramebuffer(card: display.card, width: display.mode.width, height: display.mode.height) }
                for d in dumb { for y in 0..<d.height { for x in 0..<d.width { d[x, y] = 0xff00_0000 } } }
            } catch {
                reason += "; no dumb buffers either (\(error))"
            }
            let xs = (0..<fit.w).map { min(buffer.width - 1, $0 * buffer.width / max(fit.w, 1)) }
            let ys = (0..<fit.h).map { min(buffer.height - 1, $0 * buffer.height / max(fit.h, 1)) }
            scaleMap = (xs, ys)
        }
        state.withLock {
            $0.statistics.path = path
            $0.statistics.pathReason = reason
        }
    }

    private func convert(_ buffer: any FrameBuffer, into target: DumbFramebuffer) {
        guard let (xs, ys) = scaleMap else { return }
        Self.convert(buffer, into: target, at: display.fit(width: buffer.width, height: buffer.height), xs: xs, ys: ys)
    }

    /// Scales `buffer` (nearest sample: destination column i takes source column `xs[i]`, row
    /// j row `ys[j]`) into the rectangle `fit` of `target`, converting YUV420 (full-range
    /// BT.601) to XRGB8888.
    static func convert(_ buffer: any FrameBuffer, into target: DumbFramebuffer, at fit: (x: Int, y: Int, w: Int, h: Int), xs: [Int], ys: [Int]) {
        let planes = buffer.planes
        buffer.withUnsafeBytes { src in
            for (dy, sy) in ys.enumerated() {
                let out = target.pixels + (fit.y + dy) * target.pitch + fit.x * 4
                let row = out.assumingMemoryBound(to: UInt32.self)
                switch buffer.pixelFormat {
                case .xrgb8888:
                    let line = src.baseAddress! + planes[0].offset + sy * planes[0].stride
                    for (dx, sx) in xs.enumerated() { row[dx] = line.load(fromByteOffset: sx * 4, as: UInt32.self) | 0xff00_0000 }
                default:
                    let yl = src.baseAddress! + planes[0].offset + sy * planes[0].stride
                    let ul = src.baseAddress! + planes[1].offset + (sy / 2) * planes[1].stride
                    let vl = src.baseAddress! + planes[2].offset + (sy / 2) * planes[2].stride
                    for (dx, sx) in xs.enumerated() {
                        let l = Int(yl.load(fromByteOffset: sx, as: UInt8.self))
                        let u = Int(ul.load(fromByteOffset: sx / 2, as: UInt8.self)) - 128
                        let v = Int(vl.load(fromByteOffset: sx / 2, as: UInt8.self)) - 128
                        // Fixed point, 16 fractional bits.
                        let r = min(max(l + (91881 * v + 32768) >> 16, 0), 255)
                        let g = min(max(l - (22554 * u + 46802 * v - 32768) >> 16, 0), 255)
                        let b = min(max(l + (116130 * u + 32768) >> 16, 0), 255)
                        row[dx] = 0xff00_0000 | UInt32(r) << 16 | UInt32(g) << 8 | UInt32(b)
                    }
                }
            }
        }
    }

    static func threadCPU() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    private func sleepFor(_ d: Duration) {
        var ts = timespec(tv_sec: Int(d.components.seconds), tv_nsec: Int(d.components.attoseconds / 1_000_000_000))
        nanosleep(&ts, nil)
    }
}
