import ShutterbugCore

/// Every way a completed frame leaves the session besides a capture, a lock or a trigger:
/// metadata observers (`frames()`), request monitors (`requests(count:)`), frame sinks (each
/// holding at most its quota of frames), and the waiters for a number of held frames. One value
/// the session owns; nothing here reaches back into the session (a sink's lease is made by the
/// caller).
struct FrameFanOut {
    private var observers: [AsyncStream<FrameMetadata>.Continuation] = []
    private var monitors: [Monitor] = []
    private var sinks: [SinkEntry] = []
    private var heldWaiters: [(id: Int, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var nextHeldWaiter = 0

    /// A monitor still wants requests: a camera that paces by demand keeps making frames.
    var wantsFrames: Bool { !monitors.isEmpty }
    /// Whether a completed request is recorded for a monitor (which then takes the request's
    /// carried-controls note).
    func records(_ status: CompletedRequest.Status) -> Bool { status != .cancelled && !monitors.isEmpty }
    var sinkCount: Int { sinks.count }
    var sinkStatistics: [SinkStatistics] { sinks.map(\.statistics) }

    mutating func setSinks(_ new: [any FrameSink], quota: Int) {
        sinks = new.map { SinkEntry(sink: $0, quota: quota) }
    }

    mutating func observe(_ c: AsyncStream<FrameMetadata>.Continuation) { observers.append(c) }

    mutating func monitor(_ m: Monitor) { monitors.append(m) }

    /// A frame to the observers (complete ones) and the monitors (all but cancelled ones).
    mutating func publish(_ c: CompletedRequest, carriedControlsFor: UInt64?) {
        if c.status == .complete {
            for o in observers { o.yield(c.metadata) }
        }
        guard c.status != .cancelled, !monitors.isEmpty else { return }
        let record = CaptureSession.RequestRecord(request: c.cookie, status: c.status, metadata: c.metadata, carriedControlsFor: carriedControlsFor)
        var ended = false
        // In place: no copy of each monitor (and its closure) per frame.
        monitors.withUnsafeMutableBufferPointer { all in
            for i in all.indices {
                all[i].deliver(record)
                all[i].remaining -= 1
                if all[i].remaining == 0 {
                    all[i].finish()
                    ended = true
                }
            }
        }
        if ended { monitors.removeAll { $0.remaining == 0 } }
    }

    /// Offers a complete frame to each sink with room for it; returns how many kept it.
    /// `lease(i)` makes the lease that gives sink `i`'s hold back.
    mutating func offerToSinks(_ c: CompletedRequest, lease: (Int) -> BufferLease) -> Int {
        guard c.status == .complete else { return 0 }
        var kept = 0
        for i in sinks.indices {
            sinks[i].statistics.offered += 1
            guard sinks[i].held < sinks[i].quota else {
                sinks[i].statistics.dropped += 1
                continue
            }
            let l = lease(i)
            if sinks[i].sink.process(SinkFrame(metadata: c.metadata, buffers: c.buffers, lease: l)) {
                sinks[i].held += 1
                sinks[i].statistics.kept += 1
                kept += 1
            } else {
                // Declined: the frame going away must not give back a hold never taken.
                l.disarm()
            }
        }
        return kept
    }

    mutating func sinkReleased(_ index: Int) { sinks[index].held -= 1 }

    /// An id for a waiter for held frames, which `endHeldWait` ends early.
    mutating func heldWaiterID() -> Int {
        defer { nextHeldWaiter += 1 }
        return nextHeldWaiter
    }

    /// `c` resumes when exactly `count` frames are held.
    mutating func waitForHeld(_ id: Int, count: Int, _ c: CheckedContinuation<Void, Never>) {
        heldWaiters.append((id, count, c))
    }

    mutating func endHeldWait(_ id: Int) {
        heldWaiters.removeAll { w in
            guard w.id == id else { return false }
            w.continuation.resume()
            return true
        }
    }

    /// The frames held changed: the waiters for this many go on.
    mutating func held(_ holders: Int) {
        guard !heldWaiters.isEmpty else { return }
        heldWaiters.removeAll { w in
            guard w.count == holders else { return false }
            w.continuation.resume()
            return true
        }
    }

    mutating func endMonitors() {
        for m in monitors { m.finish() }
        monitors.removeAll()
    }

    /// A monitor and how many requests it still wants.
    struct Monitor {
        enum Delivery {
            case stream(AsyncStream<CaptureSession.RequestRecord>.Continuation)
            case handler(@Sendable (CaptureSession.RequestRecord) -> Void, done: AsyncStream<Void>.Continuation)
        }
        var remaining: Int
        let delivery: Delivery

        func deliver(_ r: CaptureSession.RequestRecord) {
            switch delivery {
            case .stream(let c): c.yield(r)
            case .handler(let h, _): h(r)
            }
        }

        func finish() {
            switch delivery {
            case .stream(let c): c.finish()
            case .handler(_, let done): done.finish()
            }
        }
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
