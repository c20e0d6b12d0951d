import CaptureScheduler
import ShutterbugCore

/// Frame sinks beside the photo path, and waiting for held frames to come back.
extension CaptureSession {
    /// Returns once exactly `count` photos and sink frames are held (photos are handed back
    /// through a task hop, so a release is not seen at once), or when the task is cancelled.
    public func waitUntilHeld(_ count: Int) async {
        guard feeder.ledger.holders != count else { return }
        let id = fanOut.heldWaiterID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                if Task.isCancelled { c.resume() } else { fanOut.waitForHeld(id, count: count, c) }
            }
        } onCancel: {
            Task { await self.endHeldWait(id) }
        }
    }

    func endHeldWait(_ id: Int) { fanOut.endHeldWait(id) }

    func sinkReleased(_ index: Int, slot: Int) {
        fanOut.sinkReleased(index)
        returnSlot(slot)
    }
}
