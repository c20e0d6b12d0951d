import ShutterbugCore
import SimulatedCamera
import Testing

/// Drops, errors, stalls and a vanishing camera: the pipeline's bad days.
@Suite("Simulated pipeline faults", .timeLimit(.minutes(3)))
struct PipelineFaultTests {
    @Test("dropped frames leave sequence gaps and every request still comes back once")
    func drops() async throws {
        var o = SimulationOptions()
        o.dropProbability = 0.2
        o.seed = 5
        let frames = try await simulatedRun(.imx219, options: o, frames: 300)
        var gaps = 0
        for (a, b) in zip(frames, frames.dropFirst()) {
            #expect(b.metadata.sequence > a.metadata.sequence)
            let missing = Int(b.metadata.sequence - a.metadata.sequence) - 1
            gaps += missing
            // Timestamps keep the sensor's pace across the gap.
            let gap = b.metadata.sensorTimestamp! - a.metadata.sensorTimestamp!
            #expect(gap == b.metadata.frameDuration! * (missing + 1))
        }
        let dropRate = Double(gaps) / Double(gaps + frames.count)
        #expect(dropRate > 0.12 && dropRate < 0.28, "drop rate \(dropRate)")
        #expect(Set(frames.map(\.cookie)).count == frames.count)
        #expect(frames.map(\.cookie) == (0..<UInt64(300)).map { $0 }, "requests complete in queue order")
    }

    @Test("injected request errors come back flagged, not lost")
    func requestErrors() async throws {
        var o = SimulationOptions()
        o.faults.requestErrorProbability = 0.3
        let frames = try await simulatedRun(.imx477, options: o, frames: 100)
        let errors = frames.filter { $0.status == .error }.count
        #expect(errors > 10 && errors < 50)
        #expect(frames.count == 100)
    }

    @Test("a stall leaves a gap in time and in sequence")
    func stall() async throws {
        var o = SimulationOptions()
        o.faults.stallAtFrame = 10
        o.faults.stallDuration = .seconds(1)
        let frames = try await simulatedRun(.imx477, options: o, frames: 20)
        let gaps = zip(frames, frames.dropFirst()).map { $1.metadata.sensorTimestamp! - $0.metadata.sensorTimestamp! }
        #expect(gaps.contains { $0 >= .seconds(1) })
        #expect(gaps.filter { $0 > .milliseconds(40) }.count == 1)
    }

    @Test("a stall in real time makes a waiting consumer time out")
    func stallTimesOut() async throws {
        var o = SimulationOptions()
        o.clock = .realTime
        o.faults.stallAtFrame = 2
        o.faults.stallDuration = .seconds(120)  // far longer than any scheduling hiccup; stop() cuts it short
        let cam = SimulatedCamera(profile: .imx219, options: o)
        defer { cam.release() }
        _ = try cam.configure([StreamRequest(role: .viewfinder, width: 320, height: 240)])
        let slots = try cam.allocate()
        try cam.start(controls: .none)
        for s in 0..<slots { try cam.queue(slot: s, cookie: UInt64(s), controls: .none) }
        // The two frames before the stall: on a loaded machine the sensor's thread may wait
        // its turn for seconds, so these waits are long (the stall is longer still).
        _ = try await cam.completions.next(timeout: .seconds(30))
        _ = try await cam.completions.next(timeout: .seconds(30))
        await #expect(throws: ShutterbugError.self) { _ = try await cam.completions.next(timeout: .milliseconds(300)) }
        try cam.stop()
    }

    @Test("a camera that disappears returns its queued requests, then reports it is gone")
    func disconnect() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        o.faults.disconnectAtFrame = 15
        let cam = SimulatedCamera(profile: .imx477, options: o)
        defer { cam.release() }
        _ = try cam.configure([StreamRequest(role: .viewfinder)])
        let slots = try cam.allocate()
        try cam.start(controls: .none)
        var next = UInt64(0)
        for s in 0..<slots { try cam.queue(slot: s, cookie: next, controls: .none); next += 1 }
        var seen = Set<UInt64>()
        var cancelled = 0
        do {
            while let c = try await cam.completions.next(timeout: .seconds(5)) {
                #expect(seen.insert(c.cookie).inserted)
                if c.status == .cancelled { cancelled += 1; continue }
                do { try cam.queue(slot: c.slot, cookie: next, controls: .none); next += 1 } catch {}
            }
            Issue.record("the sequence ended without reporting the lost camera")
        } catch let e as ShutterbugError {
            #expect(e.code == .cameraLost)
        }
        #expect(seen.count == Int(next), "every queued request came back")
        // Whatever was queued when it went (the consumer may not have re-queued yet).
        #expect(cancelled <= slots)
        #expect(throws: ShutterbugError.self) { try cam.queue(slot: 0, cookie: 99, controls: .none) }
    }

    @Test("the same seed replays the same frames; another seed does not")
    func reproducible() async throws {
        var o = SimulationOptions()
        o.dropProbability = 0.1
        o.landing = .random
        let plan: (UInt64) -> CameraControls = { $0 % 5 == 0 ? .manualExposure(.microseconds(1000 + 500 * Int64($0 % 3)), gain: Gain(2)) : .none }
        func signature(_ seed: UInt64) async throws -> [String] {
            o.seed = seed
            return try await simulatedRun(.imx708, options: o, frames: 60, plan: plan).map { "\($0.metadata.sequence) \($0.metadata.exposureTime!) \($0.metadata.analogueGain!)" }
        }
        let a = try await signature(3), b = try await signature(3), c = try await signature(4)
        #expect(a == b)
        #expect(a != c)
    }
}
