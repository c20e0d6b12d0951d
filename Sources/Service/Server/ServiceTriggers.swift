import Capture
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
}

/// An open trigger source and how to close it.
public struct TriggerHandle: Sendable {
    public var source: any TriggerSource
    /// Ends the source's sequence (a GPIO line released).
    public var stop: @Sendable () -> Void
    /// Edges the kernel lost (its event buffer full).
    public var kernelLost: @Sendable () -> Int
    public init(source: any TriggerSource, stop: @escaping @Sendable () -> Void, kernelLost: @escaping @Sendable () -> Int = { 0 }) {
        self.source = source
        self.stop = stop
        self.kernelLost = kernelLost
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

/// One trigger listening: its source's triggers queued, coalesced or dropped by its policy, each
/// captured through the service (exposed after the trigger's instant) and counted.
public final class ServiceTrigger: Sendable {
    public let definition: TriggerDefinition
    let progress: Mutex<TriggerStatus>
    let handle = Mutex<TriggerHandle?>(nil)
    let stopping = Mutex<String?>(nil)
    let task = Mutex<Task<Void, Never>?>(nil)
    let wake: AsyncStream<Event>.Continuation
    let events: AsyncStream<Event>

    enum Event: Sendable {
        case trigger(Trigger)
        case finished(Trigger, Result<CameraService.CaptureRecord, any Error>)
        case sourceEnded
        case stop
    }

    init(_ definition: TriggerDefinition) {
        self.definition = definition
        progress = Mutex(TriggerStatus(name: definition.name, state: .starting, options: definition.arguments))
        (events, wake) = AsyncStream<Event>.makeStream()
    }

    public var status: TriggerStatus { progress.withLock { $0 } }

    /// Stops listening; the capture in progress (and those queued) complete first.
    func stop(_ why: String) {
        stopping.withLock { $0 = $0 ?? why }
        handle.withLock { $0 }?.stop()
        wake.yield(.stop)
    }

    func wait() async { await task.withLock { $0 }?.value }

    func run(_ service: CameraService) async {
        let d = definition
        let h: TriggerHandle
        do {
            try await CameraService.checkSteps(d.bracket?.count ?? 1, session: service.session, what: "the trigger's bracket")
            h = try d.open(service.camera.now)
            handle.withLock { $0 = h }
            // Stopped before the source was open: close it now.
            if stopping.withLock({ $0 }) != nil { h.stop() }
        } catch {
            let message = (error as? ShutterbugError)?.message ?? "\(error)"
            progress.withLock {
                $0.state = .failed
                $0.message = message
            }
            service.logger.error("trigger '\(d.name)' failed: \(message)")
            return
        }
        progress.withLock {
            $0.state = .listening
            $0.source = h.source.name
        }
        service.logger.notice("trigger '\(d.name)': listening on \(h.source.name)")
        let post = wake
        let feeder = Task {
            for await t in h.source.triggers() { post.yield(.trigger(t)) }
            post.yield(.sourceEnded)
        }
        var q = (try? TriggerQueue(policy: d.policy, limit: d.queue)) ?? (try! TriggerQueue(policy: .queue))
        var lags: [Duration] = []
        var inFlight = 0
        var ended = false
        let metrics = service.metrics
        func start(_ actions: [TriggerQueue.Action]) {
            for a in actions {
                switch a {
                case .capture(let t):
                    inFlight += 1
                    let settings = PhotoSettings(bracket: d.bracket, formats: d.formats, trigger: t)
                    Task {
                        do {
                            post.yield(.finished(t, .success(try await service.capture(settings))))
                        } catch {
                            post.yield(.finished(t, .failure(error)))
                        }
                    }
                case .dropped: break
                case .coalesced: break
                }
            }
        }
        var counted = TriggerCounts()
        func count() {
            let c = q.counts
            for (outcome, now, before) in [("seen", c.seen, counted.seen), ("captured", c.captured, counted.captured), ("failed", c.failed, counted.failed),
                                           ("coalesced", c.coalesced, counted.coalesced), ("dropped", c.dropped, counted.dropped),
                                           ("kernel_dropped", c.kernelDropped, counted.kernelDropped)] where now > before {
                metrics.triggers(d.name, outcome).increment(by: now - before)
            }
            counted = c
            let dist = LagDistribution(lags)
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
        }
        for await e in events {
            let stopped = stopping.withLock { $0 } != nil
            switch e {
            case .trigger(let t):
                if !stopped { start(q.arrived(t)) }
            case .finished(let t, let result):
                inFlight -= 1
                switch result {
                case .success(let record):
                    if let ns = record.exposureStartNs {
                        let lag = SensorTime(nanoseconds: ns) - t.instant
                        lags.append(lag)
                        if lags.count > 10_000 { lags.removeFirst(lags.count - 10_000) }
                        metrics.triggerLag.record(duration: lag)
                    }
                    progress.withLock { $0.lastCapture = record }
                case .failure(let error):
                    service.logger.warning("trigger '\(d.name)' \(t.sequence): \((error as? ShutterbugError)?.message ?? "\(error)")")
                }
                let failed = if case .failure = result { true } else { false }
                start(q.finished(failed: failed, stopping: stopped))
            case .sourceEnded:
                ended = true
            case .stop:
                break
            }
            count()
            if (ended || stopped) && inFlight == 0 && q.busy == nil { break }
        }
        feeder.cancel()
        q.lostBySource(h.kernelLost())
        count()
        let why = stopping.withLock { $0 }
        if why == nil, let failure = h.source.failure {
            service.logger.error("trigger '\(d.name)' failed: \(failure)")
            progress.withLock { p in
                p.state = .failed
                p.message = failure.description
            }
            return
        }
        progress.withLock { p in
            p.state = .stopped
            p.message = why ?? "the source ended"
        }
    }
}
