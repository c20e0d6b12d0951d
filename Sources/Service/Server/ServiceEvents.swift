import Jobs
import Synchronization

/// What the service did, as it happens: a capture done (over the API, for a trigger, or for a
/// fleet command) or failed, a job's slot taken, skipped, missed or failed. For what reports
/// them elsewhere (MQTT); the status and the metrics count them on their own.
public enum ServiceEvent: Sendable {
    case captured(CameraService.CaptureRecord)
    /// A capture that failed: its id where it had one, the trigger that asked for it, why.
    case captureFailed(id: String?, trigger: String?, reason: String)
    case slot(job: String, SlotReport)
}

/// Hands each event to every current subscriber, never waiting for one: a subscriber that
/// falls behind keeps the newest 256 events (a slow MQTT link never holds up a capture).
public final class ServiceEvents: Sendable {
    private let subscribers = Mutex<[Int: AsyncStream<ServiceEvent>.Continuation]>([:])
    private let nextID = Atomic<Int>(0)

    public init() {}

    /// The events from now on, until the stream is dropped.
    public func subscribe() -> AsyncStream<ServiceEvent> {
        let (stream, continuation) = AsyncStream<ServiceEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = nextID.add(1, ordering: .relaxed).newValue
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in self?.subscribers.withLock { _ = $0.removeValue(forKey: id) } }
        return stream
    }

    func send(_ event: ServiceEvent) {
        for c in subscribers.withLock({ Array($0.values) }) { c.yield(event) }
    }
}
