import ShutterbugCore
import Synchronization

/// A job's hold on a camera that paces by demand (virtual time), so that the camera's clock
/// passes while the job does its work as it would in real time, where the job wakes on time:
/// - waiting for a slot, the clock is let run to the slot's wake and held there (`hold(until:)`);
/// - while the slot's capture takes its frames, it is let run in short steps, each taken only
///   once this task has seen the last (`pace()`): another task that asks for frames far ahead
///   (a trigger's, the API's) cannot carry it seconds on while this one waits its turn to run;
/// - while the files are written and journalled, which takes no camera time, it runs no further
///   than the next slot's wake (`settle(before:)`).
/// Each is a no-op on a real camera, whose clock is not ours.
public final class SlotClockHold: Sendable {
    let camera: any CameraBackend
    let holder: UInt64
    private let pacing = Mutex<Task<Void, Never>?>(nil)
    /// How far a step of `pace()` lets the clock run.
    static let step = Duration.milliseconds(100)
    /// Holders' numbers, unique in the process (each pacing task has one of its own: one that
    /// ends lifts its own hold, never a newer one's).
    private static let holders = Atomic<UInt64>(0)
    static func nextHolder() -> UInt64 { (1 << 60) + holders.add(1, ordering: .relaxed).newValue }

    public init(camera: any CameraBackend) {
        self.camera = camera
        holder = Self.nextHolder()
    }

    public var active: Bool { camera.pacesByDemand }

    /// Lets the clock run to `target` and holds it there, in steps of at most half a second so
    /// that `interrupt` (or a stop) is taken promptly.
    ///
    /// - Returns: whether the clock reached `target` (false: interrupted first).
    public func hold(until target: SensorTime, interrupt: () -> Bool) async -> Bool {
        stopPacing()
        var reached = camera.now
        while !interrupt() {
            let step = min(target, max(reached, camera.now) + .milliseconds(500))
            await camera.holdFrames(holder, until: step)
            if step == target { return true }
            reached = step
        }
        return false
    }

    /// Lets the clock run in steps of `step`, each after this process has seen the last, until
    /// `settle(before:)` or `lift()`.
    public func pace() {
        guard active else { return }
        stopPacing()
        let (camera, pacer) = (camera, Self.nextHolder())
        // The pacer's hold first, then the job's own gives way to it.
        camera.setFrameHold(pacer, at: camera.now + Self.step)
        pacing.withLock {
            $0 = Task {
                while !Task.isCancelled {
                    await camera.holdFrames(pacer, until: camera.now + Self.step)
                }
                // (A cancelled `holdFrames` may have set its hold before it saw the cancellation.)
                camera.setFrameHold(pacer, at: nil)
            }
        }
        camera.setFrameHold(holder, at: nil)
    }

    /// Lets the clock run to the next slot's wake `next` and holds it there, once the slot's
    /// frames are in: its files are made meanwhile (no camera time in real time). Never less
    /// than two seconds ahead: the few frames the job itself still waits for (white balance
    /// measured for the next slot, a frame dropped among them) are never held back.
    public func settle(before next: SensorTime) {
        guard active else { return }
        camera.setFrameHold(holder, at: max(next, camera.now + .seconds(2)))
        stopPacing()
    }

    /// Gives the clock back.
    public func lift() {
        stopPacing()
        camera.setFrameHold(holder, at: nil)
    }

    /// Ends the pacing task; it lifts its own hold as it ends.
    private func stopPacing() {
        pacing.withLock { p in
            p?.cancel()
            p = nil
        }
    }

    deinit { lift() }
}
