import CLibcameraBridge
import ShutterbugCore
import ShutterbugPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A libcamera camera through the C bridge: the real stack on a Pi, vimc on the virtual board.
///
/// Completions: libcamera's thread copies each finished request into the bridge's queue and
/// signals an eventfd; the camera's own thread (`executor`, an `EventLoopExecutor`) waits on it
/// (poll, no sleeping) and hands the completions to `completions`. A `CaptureSession` runs on
/// that same thread, so a frame wakes it and nothing else, as `cam`'s event loop is woken.
public final class LibcameraCamera: CameraBackend, @unchecked Sendable {
    // `@unchecked Sendable`: every `handle` call but next_completion (the drain path, under
    // `drainLock`) holds `control`, so `queue` from a trigger or preview thread and `stop` or
    // `configure` from another are serialised; buffers are immutable after `allocate`.
    // (The conformance suite's queue/stop race runs on vimc in the virtual board.)
    // `release` frees the bridge's camera holding both locks, and every call after it (a
    // session still handling the completions the release's stop drained, on the camera's
    // thread) finds `released` or `freed` under its lock and never touches `handle` again.

    public let info: CameraInfo
    public let completions = CompletionQueue()

    private let manager: LibcameraManager
    private let handle: OpaquePointer
    private let control = Mutex(ControlState())
    /// Serialises the drain; holds the previous frame's timestamp (for `measuredFrameInterval`)
    /// and whether the bridge's camera has been freed.
    private let drainLock = Mutex(DrainState())
    /// The thread that drains completions, and runs a session's actor.
    private let loop: EventLoopExecutor
    /// `CameraBackend.executor`: typed as the protocol declares it, or the protocol's default
    /// (`nil`) would be the witness and a session would run on the cooperative pool, a thread
    /// woken per frame beside this one (as it did from de1db06 to 8130f2e).
    public var executor: (any CameraEventLoop)? { loop }

    private struct ControlState {
        var streams: [StreamConfiguration] = []
        var buffers: [[LibcameraFrameBuffer]] = []  // [slot][stream]
        var boxes: [[any FrameBuffer]] = []
        var running = false
        var released = false
    }

    private struct DrainState {
        var previous: SensorTime?
        var freed = false
    }

    init(manager: LibcameraManager, handle: OpaquePointer, info: CameraInfo) {
        self.manager = manager
        self.handle = handle
        self.info = info
        loop = EventLoopExecutor(name: "sb-camera")
        let eventFD = sbc_camera_event_fd(handle)
        loop.setSource(fd: eventFD) { [weak self] in self?.completionEvent(eventFD: eventFD) }
    }

    deinit { release() }

    /// A known Raspberry Pi sensor's mode for the configured size (the raw stream's, else the
    /// first's), as the Pi pipeline picks it; `nil` for other sensors.
    public var configuredMode: SensorMode? {
        guard let profile = sensorProfile else { return nil }
        let streams = control.withLock { $0.streams }
        guard let s = streams.first(where: { $0.role == .raw }) ?? streams.first else { return nil }
        return profile.mode(forWidth: s.width, height: s.height)
    }

    /// What libcamera reports after configuration: the raw stream's size and depth where the
    /// configuration has one (on the Pi it picks the sensor mode), else, for a known sensor,
    /// the mode the Pi pipeline picks for the output size; the limits always from the
    /// controls' `ControlInfo`, which the Pi pipeline updates for the mode.
    public var sensorModeReport: SensorModeReport? {
        let streams = control.withLock { $0.streams }
        guard !streams.isEmpty else { return nil }
        let limits = controlLimits
        var report = SensorModeReport(width: nil, height: nil, bitDepth: nil, frameDurationLimits: limits.frameDuration,
                                      exposureLimits: limits.exposureTime, source: "limits only")
        if let raw = streams.first(where: { $0.role == .raw }) {
            report.width = raw.width
            report.height = raw.height
            report.bitDepth = raw.pixelFormat.bayer.map { $0.packing == .pispComp1 ? (sensorProfile?.bitDepth ?? 16) : $0.bits }
            report.source = "raw stream"
        } else if let mode = configuredMode {
            report.width = mode.width
            report.height = mode.height
            report.bitDepth = sensorProfile?.bitDepth
            report.source = "Raspberry Pi mode choice for \(streams[0].width)x\(streams[0].height)"
        }
        return report
    }

    /// From the sensor's profile where Shutterbug knows it; otherwise conservative, from the
    /// limits libcamera reports.
    public var timing: CameraTiming {
        let limits = controlLimits
        guard let profile = sensorProfile, let mode = configuredMode else { return .conservative(limits: limits) }
        // The profile for what libcamera does not say (control delays, line time), and the
        // limits libcamera reports for the configured mode where it says them.
        var t = CameraTiming(profile: profile, mode: mode)
        if let f = limits.frameDuration { t.minFramePeriod = f.lowerBound }
        if let e = limits.exposureTime { t.exposureRange = e }
        return t
    }

    public var controlLimits: ControlLimits {
        var l = sbc_control_limits()
        // A released camera has no controls (and no `handle` to ask).
        _ = control.withLock { s in s.released ? -19 : sbc_camera_control_limits(handle, &l) }
        func us(_ v: Double) -> Duration { .nanoseconds(Int64(v * 1000)) }
        return ControlLimits(
            supported: ControlSet(rawValue: l.supported),
            exposureTime: l.exposure_time_us.supported && l.exposure_time_us.max > l.exposure_time_us.min ? us(l.exposure_time_us.min)...us(l.exposure_time_us.max) : nil,
            analogueGain: l.analogue_gain.supported && l.analogue_gain.max > l.analogue_gain.min ? l.analogue_gain.min...l.analogue_gain.max : nil,
            frameDuration: l.frame_duration_us.supported && l.frame_duration_us.max > l.frame_duration_us.min ? us(l.frame_duration_us.min)...us(l.frame_duration_us.max) : nil,
            lensPosition: l.lens_position.supported && l.lens_position.max > l.lens_position.min ? l.lens_position.min...l.lens_position.max : nil)
    }

    public func configure(_ requests: [StreamRequest]) throws -> CameraConfiguration {
        try control.withLock { s in
            try check(s)
            guard !s.running else { throw ShutterbugError(.invalidState, "cannot configure \(info.id) while it is running; stop it first") }
            guard !requests.isEmpty, requests.count <= Int(SBC_MAX_STREAMS) else {
                throw ShutterbugError(.invalidArgument, "a configuration has 1 to \(SBC_MAX_STREAMS) streams, not \(requests.count)")
            }
            var cfgs = requests.map { r in
                var c = sbc_stream_config()
                c.role = sbc_role(rawValue: UInt32(r.role.bridgeIndex))
                c.width = UInt32(r.width ?? 0)
                c.height = UInt32(r.height ?? 0)
                c.pixel_format = r.pixelFormat?.fourcc ?? 0
                c.pixel_modifier = r.pixelFormat?.modifier ?? 0
                c.buffer_count = UInt32(r.bufferCount ?? 0)
                return c
            }
            var status = SBC_CONFIG_VALID
            let rc = sbc_camera_configure(handle, &cfgs, cfgs.count, &status)
            guard rc == 0 else {
                if rc == -22 {
                    throw ShutterbugError(.invalidArgument, "\(info.id) cannot be configured for \(requests.map { "\($0.role)" }.joined(separator: "+"))", errno: 22)
                }
                throw ShutterbugError.fromErrno(rc, while: "configuring \(info.id)")
            }
            let settled = zip(requests, cfgs).map { r, c in
                StreamConfiguration(role: r.role, width: Int(c.width), height: Int(c.height), pixelFormat: PixelFormat(fourcc: c.pixel_format, modifier: c.pixel_modifier), stride: Int(c.stride), frameSize: Int(c.frame_size), bufferCount: Int(c.buffer_count))
            }
            s.streams = settled
            s.buffers = []
            s.boxes = []
            var notes = CameraConfiguration.adjustments(requested: requests, settled: settled)
            if status == SBC_CONFIG_ADJUSTED, notes.isEmpty { notes.append("libcamera adjusted the configuration") }
            return CameraConfiguration(streams: settled, adjustments: notes)
        }
    }

    public func allocate() throws -> Int {
        try control.withLock { s in
            try check(s)
            let rc = sbc_camera_allocate(handle)
            guard rc > 0 else { throw ShutterbugError.fromErrno(rc == 0 ? -12 : rc, while: "allocating buffers for \(info.id)") }
            var buffers: [[LibcameraFrameBuffer]] = []
            for slot in 0..<Int(rc) {
                var row: [LibcameraFrameBuffer] = []
                for (i, stream) in s.streams.enumerated() {
                    var bi = sbc_buffer_info()
                    let r = sbc_camera_buffer_info(handle, UInt32(i), UInt32(slot), &bi)
                    guard r == 0 else { throw ShutterbugError.fromErrno(r, while: "describing buffer \(slot) of stream \(i)") }
                    row.append(LibcameraFrameBuffer(stream: stream, info: bi))
                }
                buffers.append(row)
            }
            s.buffers = buffers
            s.boxes = buffers.map { $0.map { $0 as any FrameBuffer } }
            return Int(rc)
        }
    }

    public func buffer(stream: Int, slot: Int) -> any FrameBuffer {
        control.withLock { $0.buffers[slot][stream] }
    }

    @discardableResult
    public func start(controls: CameraControls) throws -> ControlSet {
        try control.withLock { s in
            try check(s)
            var c = sbc_controls(controls)
            var unsupported: UInt32 = 0
            let rc = sbc_camera_start(handle, &c, &unsupported)
            guard rc == 0 else { throw ShutterbugError.fromErrno(rc, while: "starting \(info.id)") }
            s.running = true
            return ControlSet(rawValue: unsupported)
        }
    }

    @discardableResult
    public func queue(slot: Int, cookie: UInt64, controls: CameraControls) throws -> ControlSet {
        var unsupported: UInt32 = 0
        // Under `control`: the bridge's `running` flag and libcamera's queueRequest must not
        // race a stop on another thread.
        // Not running here (stopped, or a camera whose device went, which the bridge leaves
        // running) is refused before the bridge is asked: a request queued after `stop` would
        // go to a camera that is being given up, and after `release` the bridge's camera is gone.
        var c = controls.isEmpty ? nil : sbc_controls(controls)  // the usual request: nothing to convert
        let (rc, gone) = control.withLock { s -> (Int32, Bool) in
            if s.released { return (-19, false) }
            guard s.running else { return (-13, sbc_camera_disconnected(handle)) }
            let rc = c == nil ? sbc_camera_queue(handle, UInt32(slot), cookie, nil, &unsupported)
                              : sbc_camera_queue(handle, UInt32(slot), cookie, &c!, &unsupported)
            return (rc, rc != 0 && sbc_camera_disconnected(handle))
        }
        switch rc {
        case 0: return ControlSet(rawValue: unsupported)
        case _ where gone: throw ShutterbugError(.cameraLost, "\(info.id) went away")
        case -19: throw ShutterbugError(.invalidState, "\(info.id) has been released")
        case -16: throw ShutterbugError(.busy, "request slot \(slot) is already queued", errno: 16)
        case -13: throw ShutterbugError(.invalidState, "\(info.id) is not running; start it before queueing requests", errno: 13)
        case -34: throw ShutterbugError(.invalidArgument, "request slot \(slot) is out of range", errno: 34)
        default: throw ShutterbugError.fromErrno(rc, while: "queueing a request on \(info.id)")
        }
    }

    public func stop() throws {
        let rc = control.withLock { s -> Int32 in
            guard s.running else { return 0 }
            s.running = false
            return sbc_camera_stop(handle)
        }
        // The bridge holds every cancelled request now; move them over before returning.
        drain()
        guard rc == 0 else { throw ShutterbugError.fromErrno(rc, while: "stopping \(info.id)") }
    }

    public func release() {
        let first = control.withLock { s -> Bool in
            defer { s.released = true }
            return !s.released
        }
        guard first else { return }
        try? stop()
        // After this no event calls `completionEvent`; a drain or a call still running on
        // another thread is waited for by the locks, and any later one finds `freed` or
        // `released` (set above) and leaves the bridge alone: the bridge (and its eventfd) can go.
        loop.removeSource()
        drainLock.withLock { d in
            control.withLock { _ in sbc_camera_release(handle) }
            d.freed = true
        }
        completions.finish()
    }

    // MARK: Completions

    /// On the executor's thread, when the bridge's eventfd is readable.
    private func completionEvent(eventFD: Int32) {
        var count: UInt64 = 0
        _ = read(eventFD, &count, 8)
        if drain() {
            completions.finish(throwing: ShutterbugError(.cameraLost, "\(info.id) went away"))
            loop.removeSource()
        }
    }

    /// Moves every completion from the bridge to `completions`, in order.
    ///
    /// - Returns: whether the camera has gone away (libcamera disconnected it, or the bridge
    ///   saw its device go when it was stopped).
    @discardableResult
    private func drain() -> Bool {
        drainLock.withLock { d in
            // Released: the bridge's camera is freed, and its last completions were moved
            // over by the release's own stop.
            guard !d.freed else { return false }
            var c = sbc_completion()
            while sbc_camera_next_completion(handle, &c) == 1 {
                let boxes = control.withLock { $0.boxes.indices.contains(Int(c.slot)) ? $0.boxes[Int(c.slot)] : [] }
                var r = CompletedRequest(c, buffers: boxes)
                // A camera that reports neither its exposure nor its frame duration (vimc):
                // the interval since the previous frame bounds when its exposure began.
                if r.status != .cancelled, let t = r.metadata.sensorTimestamp {
                    if r.metadata.exposureTime == nil, r.metadata.frameDuration == nil, let p = d.previous, t > p {
                        r.metadata.measuredFrameInterval = t - p
                    }
                    d.previous = t
                }
                completions.push(r)
            }
            return sbc_camera_disconnected(handle)
        }
    }

    private func check(_ s: ControlState) throws {
        if s.released { throw ShutterbugError(.invalidState, "\(info.id) has been released") }
        if sbc_camera_disconnected(handle) { throw ShutterbugError(.cameraLost, "\(info.id) went away") }
    }
}

extension StreamRole {
    /// The bridge's sbc_role value.
    var bridgeIndex: Int {
        switch self {
        case .raw: return 0
        case .still: return 1
        case .video: return 2
        case .viewfinder: return 3
        }
    }
}
