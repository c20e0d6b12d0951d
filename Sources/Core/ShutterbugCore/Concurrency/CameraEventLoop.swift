/// A thread that runs jobs one at a time and can say whether it is between them: what a
/// camera's completions are handled on (ShutterbugPosix's `EventLoopExecutor`, a thread polling
/// the camera's eventfd), and what a `CaptureSession` on that camera runs on.
public protocol CameraEventLoop: SerialExecutor, AnyObject, Sendable {
    /// On the loop's thread, outside any job: where a direct consumer may run.
    var isBetweenJobs: Bool { get }
    /// Runs `work` on the loop, between jobs.
    func execute(_ work: @escaping @Sendable () -> Void)
}
