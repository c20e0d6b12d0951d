import ShutterbugCore
import Synchronization

/// A job's hold on a camera that paces by demand (virtual time), so that the camera's clock
/// passes while the job does its work as it would in real time, where the job wakes on time:
/// - waiting for a slot, the clock is let run to the slot's wake and held there (`hold(until:)`);
/// - once the slot's capture is queued on the session, the hold is lifted (`lift()`): the
///   session's own demand takes the clock on, frame by frame, as the capture's plan asks (a
///   hold would make frames come whether the plan is ready for them or not);
/// - while the files are written and journalled, which takes no camera time, it stands still
///   (`freeze()`), whatever others ask.
/// Each is a no-op on a real camera, whose clock is not ours.
public final class SlotClockHold: Sendable {
    let camera: any CameraBackend
    let holder: UInt64
    /// Holders' numbers, unique in the process.
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
        var reached = camera.now
        while !interrupt() {
            let step = min(target, max(reached, camera.now) + .milliseconds(500))
            await camera.holdFrames(holder, until: step)
            if step == target { return true }
            reached = step
        }
        return false
    }

    /// Holds the clock where it is, once the slot's frames are in: its files are made and
    /// journalled meanwhile, which takes no camera time (in real time, next to none). Frames
    /// the job itself waits for after it (white balance measured for the next slot) are taken
    /// with the hold lifted, and it is frozen again after them.
    public func freeze() {
        guard active else { return }
        camera.setFrameHold(holder, at: camera.now)
    }

    /// Gives the clock back.
    public func lift() {
        camera.setFrameHold(holder, at: nil)
    }

    deinit { lift() }
}
