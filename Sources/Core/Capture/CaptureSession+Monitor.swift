import ShutterbugCore

/// Watching requests land: a monitor that sees every request the session completes, and
/// controls sent with a chosen request, so a tool can show how many frames later a change
/// appears (on a Raspberry Pi, several).
extension CaptureSession {
    /// One completed request as the session saw it.
    public struct RequestRecord: Sendable {
        /// The session's request number: 0 is the first request after `start`.
        public var request: UInt64
        public var status: CompletedRequest.Status
        public var metadata: FrameMetadata
        /// The request number the controls of `send(_:withRequest:)` were asked for, when this
        /// request carried them (a later one than asked if a capture needed that request).
        public var carriedControlsFor: UInt64?
    }

    /// The next `count` completed requests (cancelled ones at `stop` are not counted), then
    /// the end; ends early when the session stops or fails. Call it before `start` to see
    /// the first request. On a camera that paces by demand, a monitor that still wants
    /// frames keeps them coming.
    public func requests(count: Int) -> AsyncStream<RequestRecord> {
        let (stream, c) = AsyncStream<RequestRecord>.makeStream(bufferingPolicy: .unbounded)
        guard count > 0, failure == nil else {
            c.finish()
            return stream
        }
        monitors.append((count, c))
        topUp()
        return stream
    }

    /// Sends `controls` with request number `request` (0 is the first request after `start`;
    /// call before `start` for the first few, which go out at once). A capture in progress
    /// that needs that request keeps it; the controls go with the next one it does not need,
    /// and the monitor's record says which.
    ///
    /// - Throws: `.invalidArgument` when that request has already been queued, naming the
    ///   first request still to come.
    public func send(_ controls: CameraControls, withRequest request: UInt64) throws {
        guard request >= nextCookie else {
            throw ShutterbugError(.invalidArgument, "request \(request) has already been queued; the next request to go out is \(nextCookie) (accepted \(nextCookie)...)")
        }
        scheduledControls[request] = controls
        topUp()
    }

    /// The controls the camera said it does not support, over every request so far.
    public var unsupportedControls: ControlSet { unsupported }

    /// Controls asked for this request or an earlier one, oldest first.
    func takeScheduledControls(upTo cookie: UInt64) -> (for: UInt64, controls: CameraControls)? {
        guard let key = scheduledControls.keys.filter({ $0 <= cookie }).min() else { return nil }
        return (key, scheduledControls.removeValue(forKey: key)!)
    }

    func report(_ c: CompletedRequest) {
        guard c.status != .cancelled, !monitors.isEmpty else { return }
        let record = RequestRecord(request: c.cookie, status: c.status, metadata: c.metadata,
                                   carriedControlsFor: carriedScheduled.removeValue(forKey: c.cookie))
        for i in monitors.indices {
            monitors[i].continuation.yield(record)
            monitors[i].remaining -= 1
            if monitors[i].remaining == 0 { monitors[i].continuation.finish() }
        }
        monitors.removeAll { $0.remaining == 0 }
    }

    func endMonitors() {
        for m in monitors { m.continuation.finish() }
        monitors.removeAll()
    }
}
