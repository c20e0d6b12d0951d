import Capture
import CaptureScheduler
import Foundation
import ImageOutput
import Jobs
import ProcessTriggers
import ShutterbugCore
import SimulatedCamera
import Synchronization
import Testing

/// `TriggerJob` in process, on the simulated camera in virtual time: the trigger loop the
/// command line and the service both run.
@Suite("A trigger job as a library service, in virtual time", .timeLimit(.minutes(3)))
struct TriggerJobTests {
    static func camera() async throws -> (SimulatedCamera, CaptureSession) {
        var o = SimulationOptions()
        o.clock = .virtual
        o.seed = 9
        // Requests land a fixed number of frames later: with `.random` the IPA turns late now
        // and then, as on a Pi, and a bracket under way then takes a retry (frames proven each,
        // not consecutive), which is the bracket tests' to show, not these.
        o.landing = .early
        let cam = SimulatedCamera(profile: .imx477, options: o)
        let session = CaptureSession(backend: cam)
        _ = try await session.start(stream: StreamRequest(role: .still, width: 640, height: 480), preparedBracketCount: 3)
        return (cam, session)
    }

    static func run(_ job: TriggerJob, onEvent: @escaping @Sendable (TriggerJob.Event) -> Void = { _ in }) async -> ([TriggerJob.Event], (any Error)?) {
        await collect(job.events, onEvent: onEvent) { try await job.run() }
    }

    static func summary(_ events: [TriggerJob.Event]) -> TriggerJob.Summary? {
        events.lazy.compactMap { if case .finished(let s) = $0 { return s } else { return nil } }.first
    }

    static func pattern(_ p: PatternTriggerSource.Pattern, count: Int) -> @Sendable (SensorTime) throws -> TriggerHandle {
        { start in TriggerHandle(source: PatternTriggerSource(p, count: count, start: start + .milliseconds(100), realTime: false), stop: {}) }
    }

    @Test("triggers every 250 ms: each captured on the first frame exposed after its instant (less than a frame late), files written, counted, the busy line held and let go once per capture")
    func regularTriggers() async throws {
        let (cam, session) = try await Self.camera()
        defer { cam.release() }
        let dir = NSTemporaryDirectory() + "sb-trigger-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = await session.configuration
        let writer = try PhotoFileWriter(directory: try OutputDirectory(path: dir, reserve: 0), streams: try #require(config).streams, camera: CameraDescription(profile: .imx477))
        let busy = Busy()
        let job = TriggerJob(options: .init(count: 6), session: session, camera: cam, writer: writer, busy: busy, open: Self.pattern(.regular(period: .milliseconds(250)), count: 100))
        let (events, thrown) = await Self.run(job)
        #expect(thrown == nil, "\(String(describing: thrown))")
        let captured = events.compactMap { if case .captured(let t, let c) = $0 { return (t, c) } else { return nil } }
        #expect(captured.count == 6)
        for (t, c) in captured {
            #expect(c.lag.toExposureStart >= .zero && c.lag.toExposureStart < .milliseconds(100), "trigger \(t.sequence) at \(t.instant): \(c.lag.toExposureStart), frames \(c.sequences)")
            #expect(c.files.contains { $0.format == "jpeg" } && c.files.contains { $0.format == "json" }, "\(c.files.map(\.path))")
        }
        let s = try #require(Self.summary(events))
        #expect(s.stoppedBy == "--count" && s.counts.captured == 6 && s.counts.failed == 0 && s.sourceFailure == nil, "\(s)")
        #expect(busy.counts == (6, 6), "held and released \(busy.counts)")
        await session.stop()
    }

    @Test("a burst faster than a capture, with --policy drop: what comes while busy is dropped and counted, never captured late")
    func dropWhileBusy() async throws {
        let (cam, session) = try await Self.camera()
        defer { cam.release() }
        let job = TriggerJob(options: .init(bracket: .exposureBias([-1, 0, 1]), policy: .drop, count: 3), session: session, camera: cam, writer: nil,
                             open: Self.pattern(.burst(count: 5, spacing: .milliseconds(5), pause: .seconds(1)), count: 100))
        let (events, _) = await Self.run(job)
        let s = try #require(Self.summary(events))
        #expect(s.counts.captured == 3, "\(s.counts)")
        #expect(s.counts.dropped > 0, "\(s.counts)")
        #expect(s.counts.seen == s.counts.captured + s.counts.dropped + s.counts.failed + s.counts.coalesced, "every trigger is accounted for: \(s.counts)")
        for e in events { if case .captured(_, let c) = e { #expect(c.sequences.count == 3 && c.sequences[2] == c.sequences[0] + 2, "\(c.sequences)") } }

        // The reports `--json` prints (and the API serves): the same counts and lags, one line
        // each, that read back as what was written.
        let report = TriggerSummaryReport(s)
        let line = CaptureReport.jsonText(report)
        #expect(!line.contains("\n") && !line.contains("null") && line.contains("\"dropped\":\(s.counts.dropped)"), "\(line)")
        #expect(try JSONDecoder().decode(TriggerSummaryReport.self, from: Data(line.utf8)) == report)
        #expect(report.summary == true && report.lagToExposureStart?.count == 3 && report.lagToFiles == nil, "no writer: no files lag; \(line)")
        #expect((report.lagToDelivered?.count ?? 0) == s.lags.compactMap(\.toDelivered).count, "\(line)")
        let lags = s.lags.map(\.toExposureStart.microsecondsValue)
        #expect(report.lagToExposureStart?.maxUs == lags.max() && (report.lagToExposureStart?.p50Us ?? -1) >= (lags.min() ?? 0), "\(lags) \(line)")
        for e in events {
            guard case .captured(let t, let c) = e else { continue }
            let r = TriggerCaptureReport(t, c)
            #expect(r.trigger == Int(t.sequence) && r.frames == c.sequences && r.lagToExposureStartUs == c.lag.toExposureStart.microsecondsValue && r.files.isEmpty)
            #expect(try JSONDecoder().decode(TriggerCaptureReport.self, from: Data(CaptureReport.jsonText(r).utf8)) == r)
        }
        await session.stop()
    }

    /// What a run left: each capture's trigger, frames and lag to exposure start, then the counts.
    static func answer(_ events: [TriggerJob.Event]) -> String {
        var out = events.compactMap { e -> String? in
            switch e {
            case .captured(let t, let c): return "\(t.sequence):\(c.sequences):\(c.lag.toExposureStart.nanosecondsValue)"
            case .failed(let t, let error): return "\(t.sequence) failed: \(error.message)"
            default: return nil
            }
        }
        if let s = summary(events) { out.append("\(s.counts)") }
        return out.joined(separator: " ")
    }

    static func seededRun(_ options: TriggerJob.Options, _ triggers: PatternTriggerSource.Pattern, stallAt: (frame: UInt64, duration: Duration)? = nil) async throws -> [TriggerJob.Event] {
        var o = SimulationOptions()
        o.clock = .virtual
        o.seed = 3
        if let stallAt {
            o.faults.stallAtFrame = stallAt.frame
            o.faults.stallDuration = stallAt.duration
        }
        let cam = SimulatedCamera(profile: .imx477, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        _ = try await session.start(stream: StreamRequest(role: .video, width: 640, height: 480), preparedBracketCount: 3)
        let job = TriggerJob(options: options, session: session, camera: cam, writer: nil, open: pattern(triggers, count: 200))
        let (events, thrown) = await run(job)
        #expect(thrown == nil, "\(String(describing: thrown))")
        await session.stop()
        return events
    }

    @Test("in virtual time a capture under way is busy to the triggers that come during it, as in real time, and the same seed gives the same answer every run",
          arguments: [TriggerPolicy.drop, .queue, .coalesce])
    func seededRunsAgree(policy: TriggerPolicy) async throws {
        // Bursts of 4 triggers 5 ms apart: a capture takes a frame ~23 ms after the first, so
        // the other three come while it is under way.
        let burst = PatternTriggerSource.Pattern.burst(count: 4, spacing: .milliseconds(5), pause: .milliseconds(600))
        var answers: Set<String> = []
        var first: [TriggerJob.Event] = []
        for _ in 0..<5 {
            let events = try await Self.seededRun(.init(policy: policy, count: 6), burst)
            if first.isEmpty { first = events }
            answers.insert(Self.answer(events))
        }
        #expect(answers.count == 1, "\(answers.count) answers: \(answers.sorted().joined(separator: "\n"))")
        let captured = first.compactMap { if case .captured(let t, _) = $0 { return t.sequence } else { return nil } }
        switch policy {
        case .drop:
            // As in real time: the first of each burst, the other three dropped as busy.
            #expect(captured == [1, 5, 9, 13, 17, 21], "\(Self.answer(first))")
        case .coalesce:
            // The first of each burst, then the last of it (the three that waited, as one).
            #expect(captured == [1, 4, 5, 8, 9, 12], "\(Self.answer(first))")
        case .queue:
            #expect(captured == [1, 2, 3, 4, 5, 6], "\(Self.answer(first))")
        }
    }

    @Test("in virtual time, one trigger every three frames keeps up: each on the first frame exposed after it, as in real time")
    func keepsUpInVirtualTime() async throws {
        let events = try await Self.seededRun(.init(count: 30), .regular(period: .milliseconds(100)))
        let lags = events.compactMap { if case .captured(_, let c) = $0 { return c.lag.toExposureStart } else { return nil } }
        #expect(lags.count == 30)
        // A frame is 33 ms at 640x480 video; a capture's frame is at most two frames after the
        // instant (the one exposing then, and the next), never seconds behind.
        #expect(lags.allSatisfy { $0 >= .zero && $0 < .milliseconds(100) }, "\(lags.map(\.millisecondsDescription))")
    }

    @Test("in virtual time, a stall fails the captures it holds up at the stall limit, as real time's ticks do, rather than taking the frame that comes 30 s later")
    func stallInVirtualTime() async throws {
        let events = try await Self.seededRun(.init(count: 5), .regular(period: .milliseconds(300)), stallAt: (24, .seconds(30)))
        let failures = events.compactMap { if case .failed(_, let e) = $0 { return e.message } else { return nil } }
        let lags = events.compactMap { if case .captured(_, let c) = $0 { return c.lag.toExposureStart } else { return nil } }
        #expect(!failures.isEmpty && failures.allSatisfy { $0.contains("no frame came back for 2.") && $0.contains("the camera stalled") }, "\(failures)")
        #expect(lags.allSatisfy { $0 < .seconds(1) }, "no capture taken long after its trigger: \(lags.map(\.millisecondsDescription))")
    }

    @Test("zero-shutter-lag triggers during a long bracket (a timelapse slot's): each takes the frame at its edge as it comes, none waits out the bracket and finds its frame gone")
    func zeroShutterLagBesideALongCapture() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        o.seed = 5
        let cam = SimulatedCamera(profile: .imx477, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        _ = try await session.start(stream: StreamRequest(role: .video, width: 640, height: 480), preparedBracketCount: 3, holding: .frames(3))
        // A job's bracket of long exposures, asked for first: the session takes captures in
        // order, so every trigger's capture is queued behind it for a second or more.
        let bracket = Task { () -> Int in
            var photos = 0
            for try await e in await session.capture(PhotoSettings(bracket: .manualExposure([(.milliseconds(400), Gain(1)), (.milliseconds(300), Gain(1)), (.milliseconds(200), Gain(1))]))) {
                if case .photo(let p) = e { photos += 1; p.release() }
            }
            return photos
        }
        let job = TriggerJob(options: .init(count: 8, zeroShutterLag: true), session: session, camera: cam, writer: nil,
                             open: Self.pattern(.regular(period: .milliseconds(120)), count: 8))
        let (events, thrown) = await Self.run(job)
        #expect(thrown == nil, "\(String(describing: thrown))")
        #expect(try await bracket.value == 3)
        let failures = events.compactMap { if case .failed(let t, let e) = $0 { return "\(t.sequence): \(e.message)" } else { return nil } }
        #expect(failures.isEmpty, "\(failures)")
        let captured = events.compactMap { if case .captured(let t, let c) = $0 { return (t, c) } else { return nil } }
        #expect(captured.count == 8)
        for (t, c) in captured {
            let z = try #require(c.zeroShutterLag, "trigger \(t.sequence)")
            // Its frame covered the instant, or the frame exposing then was one of the
            // bracket's (or the instant fell between two exposures), and it says so.
            if z.covered {
                #expect(c.lag.toExposureStart <= .zero, "trigger \(t.sequence): \(c.lag.toExposureStart), \(z)")
            } else {
                #expect(z.fallback.map { $0.contains("went to an earlier capture") || $0.contains("between two exposures") } == true, "trigger \(t.sequence): \(z)")
            }
        }
        await session.stop()
    }

    @Test("stop(): the job ends saying why, with no capture lost (each one started is finished)")
    func stop() async throws {
        let (cam, session) = try await Self.camera()
        defer { cam.release() }
        let job = TriggerJob(options: .init(), session: session, camera: cam, writer: nil, open: Self.pattern(.regular(period: .milliseconds(100)), count: 1000))
        let (events, thrown) = await Self.run(job) { e in
            if case .captured(let t, _) = e, t.sequence >= 3 { job.stop("the test") }
        }
        #expect(thrown == nil)
        let s = try #require(Self.summary(events))
        #expect(s.stoppedBy == "the test")
        #expect(s.counts.captured + s.counts.failed + s.counts.dropped + s.counts.coalesced == s.counts.seen, "\(s.counts)")
        #expect(s.counts.captured >= 3)
        await session.stop()
    }

    @Test("a source that breaks down ends the job with its failure in the summary")
    func sourceFailure() async throws {
        let (cam, session) = try await Self.camera()
        defer { cam.release() }
        let job = TriggerJob(options: .init(), session: session, camera: cam, writer: nil) { _ in TriggerHandle(source: Broken(), stop: {}) }
        let (events, thrown) = await Self.run(job)
        #expect(thrown == nil)
        let s = try #require(Self.summary(events))
        #expect(s.sourceFailure?.message == "the line went away", "\(s)")
        await session.stop()
    }
}

/// A busy line that counts.
final class Busy: BusyLine {
    private let n = Mutex((0, 0))
    func hold() throws { n.withLock { $0.0 += 1 } }
    func release() throws { n.withLock { $0.1 += 1 } }
    var counts: (Int, Int) { n.withLock { $0 } }
}

/// A source whose sequence ends at once, broken.
struct Broken: TriggerSource {
    var name: String { "broken" }
    func triggers() -> AsyncStream<Trigger> { AsyncStream { $0.finish() } }
    var failure: ShutterbugError? { ShutterbugError(.cameraLost, "the line went away") }
}
