import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Testing

@Suite("Triggers: captures exposed after an instant", .timeLimit(.minutes(2)))
struct TriggerTests {
    @Test("pattern sources: regular, seeded Poisson (repeatable, mean near the asked one) and bursts, on the clock given")
    func patterns() {
        let t0 = SensorTime(nanoseconds: 5_000_000_000)
        let regular = PatternTriggerSource(.regular(period: .milliseconds(200)), count: 4, start: t0, realTime: false).instants
        #expect(regular == [0, 200, 400, 600].map { t0 + .milliseconds($0) })
        let p1 = PatternTriggerSource(.poisson(mean: .milliseconds(100), seed: 9), count: 2000, start: t0, realTime: false).instants
        let p2 = PatternTriggerSource(.poisson(mean: .milliseconds(100), seed: 9), count: 2000, start: t0, realTime: false).instants
        #expect(p1 == p2)
        let mean = (p1.last! - p1.first!).secondsValue / Double(p1.count - 1)
        #expect(abs(mean - 0.1) < 0.01, "mean gap \(mean)")
        #expect(zip(p1, p1.dropFirst()).allSatisfy { $0 <= $1 })
        let burst = PatternTriggerSource(.burst(count: 3, spacing: .milliseconds(10), pause: .seconds(1)), count: 6, start: t0, realTime: false).instants
        #expect(burst.map { ($0 - t0).nanosecondsValue / 1_000_000 } == [0, 10, 20, 1020, 1030, 1040])
    }

    @Test("each trigger's photo is the first frame exposed after its instant; a bracket's every step is exposed after it, on consecutive frames")
    func exposedAfter() async throws {
        let (session, cam) = try await simulatedSession(.imx219, landing: .early, stream: StreamRequest(role: .viewfinder, width: 640, height: 480))
        defer { cam.release() }
        let frames = await session.frames(buffering: 4096)
        let start = try #require(await session.latestFrame?.sensorTimestamp) + .milliseconds(500)
        let source = PatternTriggerSource(.regular(period: .milliseconds(170)), count: 5, start: start, realTime: false)
        var photos: [(Trigger, FrameMetadata)] = []
        for await t in source.triggers() {
            let r = try await record(await session.capture(PhotoSettings(exposedAfter: t.instant)))
            photos.append((t, r.photos[0].metadata))
        }
        let steps: [(duration: Duration, gain: Gain)] = [(.microseconds(1000), Gain(1)), (.microseconds(3000), Gain(2)), (.microseconds(6000), Gain(1))]
        let bracketAt = photos.last!.1.sensorTimestamp! + .seconds(2)
        let bracket = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(steps), exposedAfter: bracketAt)))
        expectOrder(bracket, steps: 3)
        let seqs = bracket.photos.map(\.metadata.sequence)
        #expect(seqs.max()! - seqs.min()! == 2, "frames \(seqs)")
        for p in bracket.photos { #expect(p.metadata.exposureStart! >= bracketAt) }

        // Every frame up to the last photo is in the observer's buffer.
        var byFrame: [UInt32: FrameMetadata] = [:]
        let last = bracket.photos.map(\.metadata.sequence).max()!
        for await m in frames {
            byFrame[m.sequence] = m
            if m.sequence >= last { break }
        }
        // The bracket starts close to its instant: within the pipeline and the latest landing
        // of the first frame exposed after it.
        let firstAfter = byFrame.values.filter { $0.exposureStart.map { $0 >= bracketAt } ?? false }.map(\.sequence).min()!
        let lag = Int(seqs.min()!) - Int(firstAfter)
        #expect(lag >= 0 && lag <= CaptureSession.pipelineDepth + 5, "the bracket began \(lag) frames after the first frame exposed after its instant")
        for (t, m) in photos {
            #expect(m.exposureStart! >= t.instant, "trigger \(t.sequence)")
            // No earlier frame would have qualified: the one before began before the instant.
            let previous = try #require(byFrame[m.sequence - 1], "frame before \(m.sequence)")
            #expect(previous.exposureStart! < t.instant, "trigger \(t.sequence): frame \(previous.sequence) also qualified")
        }
    }
}
