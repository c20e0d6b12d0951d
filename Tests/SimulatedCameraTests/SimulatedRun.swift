import ShutterbugCore
import SimulatedCamera
import Testing

/// Runs a simulated camera in virtual time: configures one stream, starts with `start`, queues
/// request `cookie` with `plan(cookie)`, and returns the first `frames` completed requests.
/// `inspect` sees each completion while its buffers are still lent (before re-queueing).
func simulatedRun(
    _ profile: SensorProfile, options: SimulationOptions = SimulationOptions(),
    stream: StreamRequest = StreamRequest(role: .viewfinder, width: 640, height: 480),
    frames: Int, start: CameraControls = .none,
    plan: (UInt64) -> CameraControls = { _ in .none },
    inspect: (CompletedRequest) -> Void = { _ in }
) async throws -> [CompletedRequest] {
    var o = options
    o.clock = .virtual
    let cam = SimulatedCamera(profile: profile, options: o)
    defer { cam.release() }
    _ = try cam.configure([stream])
    let slots = try cam.allocate()
    try cam.start(controls: start)
    var cookie: UInt64 = 0
    for s in 0..<slots {
        try cam.queue(slot: s, cookie: cookie, controls: plan(cookie))
        cookie += 1
    }
    var out: [CompletedRequest] = []
    while out.count < frames {
        guard let c = try await cam.completions.next(timeout: .seconds(10)) else { break }
        inspect(c)
        out.append(c)
        try cam.queue(slot: c.slot, cookie: cookie, controls: plan(cookie))
        cookie += 1
    }
    try cam.stop()
    return out
}

extension Array where Element == CompletedRequest {
    /// The frame that was paired with request `cookie`.
    func frame(ofRequest cookie: UInt64) -> FrameMetadata? { first { $0.cookie == cookie }?.metadata }

    /// The first frame from `sequence` on whose metadata satisfies `carries`.
    func firstFrame(from sequence: UInt32, where carries: (FrameMetadata) -> Bool) -> FrameMetadata? {
        first { $0.metadata.sequence >= sequence && carries($0.metadata) }?.metadata
    }
}

/// Whether a frame reports `exposure` (within one line) and `gain` (within quantisation).
func reports(_ m: FrameMetadata, exposure: Duration, gain: Double, line: Duration) -> Bool {
    guard let e = m.exposureTime, let g = m.analogueGain else { return false }
    return abs((e - exposure).nanosecondsValue) <= line.nanosecondsValue && abs(g.value - gain) <= 0.02 * gain
}

/// Mean and standard deviation of one channel of an XRGB8888 frame in linear light (the ISP's
/// sRGB tone curve undone), on the 0...255 scale.
func channelStatistics(_ buffer: any FrameBuffer, channel: Int = 1) -> (mean: Double, sd: Double) {
    buffer.withUnsafeBytes { bytes in
        let stride = buffer.planes[0].stride
        var sum = 0.0, sq = 0.0
        for y in 0..<buffer.height {
            for x in 0..<buffer.width {
                // Linear light, undoing the ISP's tone curve: the scene's levels.
                let v = Colorimetry.srgbLinearOf8Bit[Int(bytes[y * stride + x * 4 + channel])] * 255
                sum += v
                sq += v * v
            }
        }
        let n = Double(buffer.width * buffer.height)
        let mean = sum / n
        return (mean, (sq / n - mean * mean).squareRoot())
    }
}
