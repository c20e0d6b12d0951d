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
