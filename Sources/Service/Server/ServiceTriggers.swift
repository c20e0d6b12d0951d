import Capture
import ImageOutput
import JobOptions
import Jobs
import CaptureScheduler
import Logging
import ShutterbugCore
import Synchronization

/// A trigger as the configuration (`triggers:`) declares it: `shutterbug trigger`'s options, a
/// source (a GPIO line, a simulated pattern) and the capture each trigger asks for.
public struct TriggerDefinition: Sendable {
    public var name: String
    /// The options as command-line words: what makes it the same trigger on a reload.
    public var arguments: [String]
    public var bracket: BracketSettings?
    public var formats: Set<PhotoFormat>
    public var policy: TriggerPolicy
    public var queue: Int
    /// Each photo the frame exposing at the trigger's instant (`--zsl`), from the frames the
    /// service's session holds: `held` of them, which the session is started with (the largest
    /// any trigger asks for; a reload cannot change it).
    public var zeroShutterLag = false
    public var held = HeldFrames.none
    /// Pre-capture (`pre`, `post`): a burst around each trigger.
    public var burst: BurstRequest?
    /// Opens the source, on the camera's clock (`now` is the camera's time).
    public var open: @Sendable (_ now: SensorTime) throws -> TriggerHandle

    public init(name: String, arguments: [String], bracket: BracketSettings?, formats: Set<PhotoFormat>, policy: TriggerPolicy, queue: Int,
                open: @escaping @Sendable (SensorTime) throws -> TriggerHandle) {
        self.name = name
        self.arguments = arguments
        self.bracket = bracket
        self.formats = formats
        self.policy = policy
        self.queue = queue
        self.open = open
    }

    /// A trigger from its name and `shutterbug trigger`'s options as command-line words (a GPIO
    /// line or a simulated pattern, the capture's bracket and formats, the queue policy), as the
    /// configuration's `triggers:` give them.
    ///
    /// - Parameter realTime: a simulated pattern's triggers come at their instants on the
    ///   monotonic clock; false for a camera in virtual time (each comes when the camera's
    ///   clock reaches it).
    /// - Throws: `invalidArgument` naming the option and its accepted range.
    public init(name: String, words: [String], realTime: Bool = true) throws {
        let options: TriggerOptions
        do {
            options = try TriggerOptions.parse(words)
        } catch {
            throw ShutterbugError(.invalidArgument, TriggerOptions.plainMessage(for: error))
        }
        guard options.gpio != nil || options.simulated != nil else {
            throw ShutterbugError(.invalidArgument, "a trigger in the service has a gpio line or a simulated pattern")
        }
        let job = try options.jobOptions()
        self.init(name: name, arguments: words, bracket: job.bracket, formats: job.formats, policy: job.policy, queue: job.queue, open: try options.source(realTime: realTime))
        zeroShutterLag = job.zeroShutterLag
        held = try options.heldFrames()
        burst = job.burst
    }
}

/// A trigger's state, counts and lags, as `/api/triggers` reports them: its name, state and
/// options, and beside them the counts and lags in the words of `shutterbug trigger --json`'s
/// summary (one `TriggerSummaryReport`, its keys at the same level).
public struct TriggerStatus: Sendable, Codable {
    public enum State: String, Sendable, Codable { case starting, listening, stopped, failed }
    public var name: String
    public var state: State
    public var message: String?
    public var options: [String]
    /// The source, the counts and the lags so far (the lags over the last 10,000 captures).
    public var report = TriggerSummaryReport()
    public var lastCapture: CameraService.CaptureRecord?

    init(name: String, state: State, options: [String]) {
        self.name = name
        self.state = state
        self.options = options
    }

    private enum CodingKeys: String, CodingKey { case name, state, message, options, lastCapture }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        state = try c.decode(State.self, forKey: .state)
        message = try c.decodeIfPresent(String.self, forKey: .message)
        options = try c.decode([String].self, forKey: .options)
        lastCapture = try c.decodeIfPresent(CameraService.CaptureRecord.self, forKey: .lastCapture)
        report = try TriggerSummaryReport(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        try report.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(state, forKey: .state)
        try c.encodeIfPresent(message, forKey: .message)
        try c.encode(options, forKey: .options)
        try c.encodeIfPresent(lastCapture, forKey: .lastCapture)
    }
}

/// One trigger of the service: the library's `TriggerJob` on the service's session, its
/// events turned into status, metrics, the service's capture records and log lines.
public final class ServiceTrigger: Sendable {
    public let definition: TriggerDefinition
    let progress: Mutex<TriggerStatus>
    let job = Mutex<TriggerJob?>(nil)
    let stopping = Mutex<String?>(nil)
    let task = Mutex<Task<Void, Never>?>(nil)

    init(_ definition: TriggerDefinition) {
        self.definition = definition
        progress = Mutex(TriggerStatus(name: definition.name, state: .starting, options: definition.arguments))
    }

    public var status: TriggerStatus { progress.withLock { $0 } }

    /// Stops listening; the captures in flight complete first.
    func stop(_ why: String) {
        stopping.withLock { $0 = $0 ?? why }
        job.withLock { $0 }?.stop(why)
    }

    func wait() async { await task.withLock { $0 }?.value }

    func run(_ service: CameraService) async {
        let d = definition
        func failed(_ message: String) {
            progress.withLock {
                $0.state = .failed
                $0.message = message
            }
            service.logger.error("trigger '\(d.name)' failed: \(message)")
        }
        do {
            let fastest = await service.session.timing.everyFramePeriod
            try d.burst?.check(fastest: fastest)
            let what = d.burst.map { b in b.hasWindow ? "the trigger's burst (\(b), at this mode's fastest frame period, \(fastest.millisecondsDescription))" : "the trigger's burst" } ?? "the trigger's bracket"
            try await CameraService.checkSteps(d.burst?.largest(fastest: fastest).count ?? d.bracket?.count ?? 1, session: service.session, what: what)
        } catch {
            failed((error as? ShutterbugError)?.message ?? "\(error)")
            return
        }
        if d.zeroShutterLag, await service.session.heldFramesCapacity == 0 {
            service.logger.warning("trigger '\(d.name)': --zsl, but the service holds no frames (it started without a --zsl trigger; restart it to hold them): each photo is the frame exposing at the trigger only when that frame comes back after the trigger is heard")
        }
        let job = TriggerJob(options: .init(bracket: d.bracket, formats: d.formats, policy: d.policy, queue: d.queue, zeroShutterLag: d.zeroShutterLag, burst: d.burst),
                             session: service.session, camera: service.camera,
                             writer: service.writer, observe: { [weak service] e in service?.observeJob(e) }, open: d.open)
        self.job.withLock { $0 = job }
        // Stopped before the job was made: it stops at once.
        if let why = stopping.withLock({ $0 }) { job.stop(why) }
        let metrics = service.metrics
        async let events: Void = {
            var counted = TriggerCounts()
            for await e in job.events {
                switch e {
                case .listening(let source):
                    progress.withLock {
                        $0.state = .listening
                        $0.report.source = source
                    }
                    service.logger.notice("trigger '\(d.name)': listening on \(source)")
                case .notice(let n):
                    service.logger.warning("trigger '\(d.name)': \(n)")
                case .captured(let t, let c):
                    metrics.triggerLag.record(duration: c.lag.toExposureStart)
                    let record = CameraService.CaptureRecord(
                        id: String(PhotoFacts.uniqueID(captureID: c.uniqueID, step: 0).dropLast(4)),
                        kind: (d.burst != nil ? "burst of \(c.steps)" : c.steps > 1 ? "bracket of \(c.steps)" : "photo") + " for trigger '\(d.name)' \(t.sequence)", steps: c.steps,
                        exposureStartNs: c.exposureStart?.nanoseconds, files: c.files.map { relativePath($0.path, under: service.directory.path) },
                        adjustments: c.adjustments, failures: c.failures, trigger: d.name, zeroShutterLag: c.zeroShutterLag?.covered)
                    await service.record(record, frames: c.sequences, bytes: c.files.reduce(0) { $0 + $1.bytes })
                    progress.withLock { $0.lastCapture = record }
                case .failed(let t, let error):
                    await service.recordFailure(trigger: d.name, reason: error.message)
                    service.logger.warning("trigger '\(d.name)' \(t.sequence): \(error.message)")
                case .dropped, .coalesced:
                    break
                case .progress(let c, let lags):
                    for (outcome, now, before) in [("seen", c.seen, counted.seen), ("captured", c.captured, counted.captured), ("failed", c.failed, counted.failed),
                                                   ("coalesced", c.coalesced, counted.coalesced), ("dropped", c.dropped, counted.dropped),
                                                   ("kernel_dropped", c.kernelDropped, counted.kernelDropped)] where now > before {
                        metrics.triggers(d.name, outcome).increment(by: now - before)
                    }
                    counted = c
                    let report = TriggerSummaryReport(source: progress.withLock { $0.report.source }, counts: c, lags: lags.suffix(10_000))
                    progress.withLock { $0.report = report }
                case .finished(let s):
                    if let failure = s.sourceFailure {
                        service.logger.error("trigger '\(d.name)' failed: \(failure)")
                        progress.withLock { p in
                            p.state = .failed
                            p.message = failure.description
                        }
                    } else {
                        progress.withLock { p in
                            p.state = .stopped
                            p.message = s.stoppedBy
                            p.report.stoppedBy = s.stoppedBy
                        }
                    }
                }
            }
        }()
        do {
            try await job.run()
            await events
        } catch {
            await events
            failed((error as? ShutterbugError)?.message ?? "\(error)")
        }
    }
}
