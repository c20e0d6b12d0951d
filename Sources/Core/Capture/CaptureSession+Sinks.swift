import CaptureScheduler
import ShutterbugCore

/// Frame sinks beside the photo path, and waiting for held frames to come back.
extension CaptureSession {
    /// Returns once exactly `count` photos and sink frames are held (photos are handed back
    /// through a task hop, so a release is not seen at once), or when the task is cancelled.
    public func waitUntilHeld(_ count: Int) async {
        guard ledger.holders != count else { return }
        let id = nextHeldWaiter
        nextHeldWaiter += 1
        await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                if Task.isCancelled { c.resume() } else { heldWaiters.append((id, count, c)) }
            }
        } onCancel: {
            Task { await self.endHeldWait(id) }
        }
    }

    func endHeldWait(_ id: Int) {
        heldWaiters.removeAll { w in
            guard w.id == id else { return false }
            w.continuation.resume()
            return true
        }
    }

    func resumeHeldWaiters() {
        guard !heldWaiters.isEmpty else { return }
        let holders = ledger.holders
        heldWaiters.removeAll { w in
            guard w.count == holders else { return false }
            w.continuation.resume()
            return true
        }
    }

    /// Offers a frame to each sink with room for it; returns how many kept it.
    func offerToSinks(_ c: CompletedRequest) -> Int {
        var kept = 0
        for i in sinks.indices {
            sinks[i].statistics.offered += 1
            guard sinks[i].held < sinks[i].quota else {
                sinks[i].statistics.dropped += 1
                continue
            }
            let slot = c.slot
            let lease = BufferLease { [weak self] in Task { await self?.sinkReleased(i, slot: slot) } }
            if sinks[i].sink.process(SinkFrame(metadata: c.metadata, buffers: c.buffers, lease: lease)) {
                sinks[i].held += 1
                sinks[i].statistics.kept += 1
                kept += 1
            } else {
                // Declined: the frame going away must not give back a hold never taken.
                lease.disarm()
            }
        }
        return kept
    }

    func sinkReleased(_ index: Int, slot: Int) {
        sinks[index].held -= 1
        returnSlot(slot)
    }
}

/// What a sink was offered, kept, and missed because it held all the frames it may.
public struct SinkStatistics: Sendable, Hashable {
    public var name: String
    public var offered = 0
    public var kept = 0
    public var dropped = 0
}

struct SinkEntry {
    let sink: any FrameSink
    let quota: Int
    var held = 0
    var statistics: SinkStatistics

    init(sink: any FrameSink, quota: Int) {
        self.sink = sink
        self.quota = quota
        statistics = SinkStatistics(name: sink.name)
    }
}
