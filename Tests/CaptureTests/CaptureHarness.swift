import Capture
import CaptureScheduler
import ShutterbugCore
import ShutterbugPosix
import SimulatedCamera
import TestSupport
import Testing

/// A capture session on a simulated camera in virtual time.
func simulatedSession(_ profile: SensorProfile, landing: SimulationOptions.Landing = .random, drops: Double = 0, seed: UInt64 = 1,
                      stream: StreamRequest = StreamRequest(role: .still), prepared: Int = 9, sinks: [any FrameSink] = [],
                      executor: EventLoopExecutor? = nil,
                      configure: (inout SimulationOptions) -> Void = { _ in }) async throws -> (CaptureSession, SimulatedCamera) {
    var o = SimulationOptions()
    o.clock = .virtual
    o.landing = landing
    o.dropProbability = drops
    o.seed = seed
    configure(&o)
    let cam = SimulatedCamera(profile: profile, options: o)
    let session = CaptureSession(backend: cam, executor: executor)
    try await session.start(stream: stream, preparedBracketCount: prepared, sinks: sinks)
    return (session, cam)
}

/// Everything one capture produced, photos released as they arrive.
struct CaptureRecord {
    var events: [String] = []
    var photos: [(step: ResolvedStep, metadata: FrameMetadata, mean: Double?)] = []
    var resolved: ResolvedPhotoSettings?
    var started: SensorTime?
    var ended: SensorTime?
}

func record(_ stream: AsyncThrowingStream<CaptureEvent, any Error>, measure: Bool = false) async throws -> CaptureRecord {
    var r = CaptureRecord()
    for try await e in stream {
        switch e {
        case .settingsResolved: r.events.append("resolved")
        case .exposureStarted(let t): r.events.append("started"); r.started = t
        case .exposureEnded(let t): r.events.append("ended"); r.ended = t
        case .photo(let p):
            r.events.append("photo")
            // A simulated photo's pixels are rendered when first read: seconds of CPU for a
            // full-size frame, read on a thread of its own so Swift's pool (two threads on a
            // two-core machine) stays free for the tests running beside this one.
            let buffer = p.buffers[0]
            r.photos.append((p.step, p.metadata, measure ? try await offPool { meanLuma(buffer) } : nil))
            p.release()
        case .captureFinished(let s): r.events.append("finished"); r.resolved = s
        }
    }
    return r
}

/// Mean linear light of the Y plane of a YUV420 frame (the ISP's sRGB tone curve undone), sampled.
func meanLuma(_ b: any FrameBuffer) -> Double {
    b.withUnsafeBytes { bytes in
        var sum = 0.0, n = 0.0
        let stride = b.planes[0].stride
        var y = 0
        while y < b.height {
            var x = 0
            while x < b.width { sum += Colorimetry.srgbLinearOf8Bit[Int(bytes[y * stride + x])] * 255; n += 1; x += 7 }
            y += 5
        }
        return sum / n
    }
}

/// Checks the AVFoundation order: resolved, started, ended, N photos in step order, finished.
func expectOrder(_ r: CaptureRecord, steps: Int, sourceLocation: SourceLocation = #_sourceLocation) {
    let expected = ["resolved", "started", "ended"] + Array(repeating: "photo", count: steps) + ["finished"]
    #expect(r.events == expected, sourceLocation: sourceLocation)
    #expect(r.photos.map(\.step.index) == Array(0..<steps), sourceLocation: sourceLocation)
}

/// Photos are handed back to the session asynchronously: waits (up to a second) until none is
/// held, and returns how many still are.
func heldAfterRelease(_ session: CaptureSession) async -> Int {
    await held(session, settlingAt: 0)
}

/// Waits until `expected` photos or sink frames are held, or a second has passed (a leak is a
/// test failure, not a hang); returns how many are held.
func held(_ session: CaptureSession, settlingAt expected: Int) async -> Int {
    await withTaskGroup(of: Void.self) { group in
        group.addTask { await session.waitUntilHeld(expected) }
        group.addTask { try? await Task.sleep(for: .seconds(1)) }
        await group.next()
        group.cancelAll()
    }
    return await session.photosHeld
}
