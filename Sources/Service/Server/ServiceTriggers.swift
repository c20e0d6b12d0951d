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
    /// - Throws: `invalidArgument` naming the option and its accepted range.
    public init(name: String, words: [String]) throws {
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
        self.init(name: name, arguments: words, bracket: job.bracket, formats: job.formats, policy: job.policy, queue: job.queue, open: try options.source(realTime: true))
    }
}

/// A trigger's counts and lags, as `/api/triggers` reports them.
public struct TriggerStatus: Sendable, Codable {
    public enum State: String, Sendable, Codable { case starting, listening, stopped, failed }
    public var name: String
    public var source: String?
    public var state: State
    public var message: String?
    public var options: [String]
    public var seen = 0
    public var captured = 0
    public var failed = 0
    public var coalesced = 0
    public var dropped = 0
    public var kernelDropped = 0
    /// Trigger instant to the first exposure start.
    public var lagP50Us: Double?
    public var lagP99Us: Double?
    public var lastCapture: CameraService.CaptureRecord?
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
            try await CameraService.checkSteps(d.bracket?.count ?? 1, session: service.session, what: "the trigger's bracket")
        } catch {
            failed((error as? ShutterbugError)?.message ?? "\(error)")
            return
        }
        let job = TriggerJob(options: .init(bracket: d.bracket, formats: d.formats, policy: d.policy, queue: d.queue), session: service.session, camera: service.camera,
                             writer: service.writer, observe: { [weak service] e in service?.observeJob(e) }, open: d.open)
        self.job.withLock { $0 = job }
        // Stopped before the job was made: it stops at once.
        if let why = stopping.withLock({ $0 }) { job.stop(why) }
        let metrics = service.metrics
        let prefix = service.directory.path.hasSuffix("/") ? service.directory.path : service.directory.path + "/"
        async let events: Void = {
            var counted = TriggerCounts()
            for await e in job.events {
                switch e {
                case .listening(let source):
                    progress.withLock {
                        $0.state = .listening
                        $0.source = source
                    }
                    service.logger.notice("trigger '\(d.name)': listening on \(source)")
                case .notice(let n):
                    service.logger.warning("trigger '\(d.name)': \(n)")
                case .captured(let t, let c):
                    metrics.triggerLag.record(duration: c.lag.toExposureStart)
                    let record = CameraService.CaptureRecord(
                        id: String(PhotoFacts.uniqueID(captureID: c.uniqueID, step: 0).dropLast(4)),
                        kind: (c.steps > 1 ? "bracket of \(c.steps)" : "photo") + " for trigger '\(d.name)' \(t.sequence)", steps: c.steps,
                        exposureStartNs: c.exposureStart?.nanoseconds, files: c.files.map { $0.path.hasPrefix(prefix) ? String($0.path.dropFirst(prefix.count)) : $0.path },
                        adjustments: c.adjustments, failures: c.failures, trigger: d.name)
                    await service.record(record, frames: c.sequences, bytes: c.files.reduce(0) { $0 + $1.bytes })
                    progress.withLock { $0.lastCapture = record }
                case .failed(let t, let error):
                    await service.recordFailure()
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
                    let dist = LagDistribution(lags.suffix(10_000).map(\.toExposureStart))
                    progress.withLock { p in
                        p.seen = c.seen
                        p.captured = c.captured
                        p.failed = c.failed
                        p.coalesced = c.coalesced
                        p.dropped = c.dropped
                        p.kernelDropped = c.kernelDropped
                        p.lagP50Us = dist?.p50.microsecondsValue
                        p.lagP99Us = dist?.p99.microsecondsValue
                    }
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
