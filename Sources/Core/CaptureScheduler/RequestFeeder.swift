import ShutterbugCore

/// What goes out with each request, as a pure value: the request slots (`SlotLedger`), the
/// request numbers, controls asked for a chosen request and which request carried them,
/// controls waiting for the next request (a configuration with the locks it carries, the
/// restore after a capture), and the warm-up frames still to come. A capture's own controls
/// come from the capture machine (`CaptureMachine`); these fill the requests between captures.
public struct RequestFeeder: Sendable {
    /// Request slots beyond a bracket's photos, so the sensor never starves while photos are
    /// held: the pipeline depth.
    public static let pipelineDepth = 4
    /// A camera that paces by demand (virtual time) takes frames only while something waits on
    /// them: the first `warmUpFrames` after start (AE, AWB and the metadata a capture plans
    /// from), then what is asked for. Start-up frames do not count.
    public static let warmUpFrames = 8

    public private(set) var ledger = SlotLedger(slots: 0, depth: pipelineDepth)
    /// The number the next request goes out with: 0 is the first after start.
    public private(set) var nextRequest: UInt64 = 0
    public private(set) var warmUpLeft = 0
    /// The controls the camera said it does not support, over every request so far.
    public private(set) var unsupported = ControlSet()
    private var scheduled: [UInt64: CameraControls] = [:]
    private var carried: [UInt64: UInt64] = [:]
    private var waiting = Ring<(controls: CameraControls, locks: [Int])>(capacity: 8)

    public init() {}

    /// Streaming starts over `slots` slots, with the warm-up frames to come (none on a sensor
    /// that makes frames only when triggered: there is nothing to warm up on).
    public mutating func start(slots: Int, warmUp: Bool) {
        ledger = SlotLedger(slots: slots, depth: Self.pipelineDepth)
        warmUpLeft = warmUp ? Self.warmUpFrames : 0
    }

    /// Something here still wants a frame: the warm-up, or controls still to go out.
    public var wantsFrames: Bool { warmUpLeft > 0 || !waiting.isEmpty || !scheduled.isEmpty }

    /// The next spare slot to queue and its request number, while fewer than the pipeline
    /// depth are queued.
    public mutating func nextToQueue() -> (slot: Int, request: UInt64)? {
        guard let slot = ledger.nextToQueue() else { return nil }
        defer { nextRequest += 1 }
        return (slot, nextRequest)
    }

    /// The camera refused a slot: spare again.
    public mutating func queueFailed(_ slot: Int) { ledger.queueFailed(slot) }

    /// What a request between captures carries: controls asked for this request or an earlier
    /// one (oldest first; the carrier is noted), else the oldest waiting controls and the
    /// locks they carry; nil for a filler.
    public mutating func betweenCaptures(_ request: UInt64) -> (controls: CameraControls, locks: [Int])? {
        // Per request: nothing to look through (and no array made) in the usual case.
        if !scheduled.isEmpty, let key = scheduled.keys.filter({ $0 <= request }).min() {
            carried[request] = key
            return (scheduled.removeValue(forKey: key)!, [])
        }
        return waiting.popFirst()
    }

    /// Sends `controls` with request number `request`, still to go out.
    ///
    /// - Throws: `.invalidArgument` when that request has already been queued.
    public mutating func schedule(_ controls: CameraControls, withRequest request: UInt64) throws {
        guard request >= nextRequest else {
            throw ShutterbugError(.invalidArgument, "request \(request) has already been queued; the next request to go out is \(nextRequest) (accepted \(nextRequest)...)")
        }
        scheduled[request] = controls
    }

    /// Controls for the next request between captures, with the locks they carry.
    public mutating func enqueue(_ controls: CameraControls, locks: [Int] = []) { waiting.append((controls, locks)) }

    /// Which request's scheduled controls `request` carried, if it carried any (asked once).
    public mutating func carriedControls(_ request: UInt64) -> UInt64? {
        carried.isEmpty ? nil : carried.removeValue(forKey: request)
    }

    public mutating func refused(_ controls: ControlSet) {
        if !controls.isEmpty { unsupported.formUnion(controls) }
    }

    /// A request came back with `holders` keeping its buffers (none: its slot is spare
    /// again). Returns whether the warm-up just ended.
    public mutating func completed(_ c: CompletedRequest, holders: Int) -> Bool {
        ledger.completed(c.slot, holders: holders)
        guard warmUpLeft > 0 else { return false }
        if c.status != .startup { warmUpLeft -= 1 }
        return warmUpLeft == 0
    }

    /// One holder of `slot` let go; false when it was not held.
    public mutating func released(_ slot: Int) -> Bool { ledger.released(slot) }
}
