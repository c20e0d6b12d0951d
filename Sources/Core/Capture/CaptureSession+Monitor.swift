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
    /// the end; ends early when the session stops or fails. A reader more than 1024 requests
    /// behind loses the oldest (memory stays bounded over a long run; the handler form below
    /// loses none). Call it before `start` to see
    /// the first request. On a camera that paces by demand, a monitor that still wants
    /// frames keeps them coming.
    public func requests(count: Int) -> AsyncStream<RequestRecord> {
        let (stream, c) = AsyncStream<RequestRecord>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        guard count > 0, life.failure == nil else {
            c.finish()
            return stream
        }
        fanOut.monitor(FrameFanOut.Monitor(remaining: count, delivery: .stream(c)))
        topUp()
        return stream
    }

    /// Like `requests(count:)`, but calls `handler` for each completed request right where the
    /// session handles it, in order, without waking another task per frame: for a consumer that
    /// only records or prints. `handler` runs on the session's executor and must return at once.
    /// The returned stream finishes when `count` requests were seen or the session stops.
    public func requests(count: Int, handler: @escaping @Sendable (RequestRecord) -> Void) -> AsyncStream<Void> {
        let (stream, done) = AsyncStream<Void>.makeStream()
        guard count > 0, life.failure == nil else {
            done.finish()
            return stream
        }
        fanOut.monitor(FrameFanOut.Monitor(remaining: count, delivery: .handler(handler, done: done)))
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
        try feeder.schedule(controls, withRequest: request)
        topUp()
    }

    /// The controls the camera said it does not support, over every request so far.
    public var unsupportedControls: ControlSet { feeder.unsupported }
}
