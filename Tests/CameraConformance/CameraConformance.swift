import ShutterbugCore
import ShutterbugPosix
import Testing

/// The behaviour every `CameraBackend` must show, whatever is behind it: the simulated camera
/// in the unit tier, libcamera (vimc) on the virtual board. Each check opens its own camera
/// from `make` and releases it.
public struct CameraConformance: Sendable {
    public let make: @Sendable () throws -> any CameraBackend
    /// The stream the checks capture from.
    public let stream: StreamRequest
    /// A control the camera does not support, to check it is reported (nil: supports all).
    public let unsupportedControl: CameraControls?
    /// How long to wait for one frame before calling it a failure.
    public let frameTimeout: Duration
    /// Checks a captured frame's pixels are what this camera produces; returns a complaint or
    /// nil. Run on every 10th frame of the capture check.
    public let content: @Sendable (CompletedRequest) -> String?

    public init(stream: StreamRequest, unsupportedControl: CameraControls?, frameTimeout: Duration = .seconds(5),
                content: @escaping @Sendable (CompletedRequest) -> String?,
                make: @escaping @Sendable () throws -> any CameraBackend) {
        self.make = make
        self.stream = stream
        self.unsupportedControl = unsupportedControl
        self.frameTimeout = frameTimeout
        self.content = content
    }

    /// Configures, allocates and starts; queues every slot. Returns the slot count.
    private func startStreaming(_ cam: any CameraBackend, firstCookie: UInt64 = 0) throws -> Int {
        _ = try cam.configure([stream])
        let slots = try cam.allocate()
        try cam.start(controls: .none)
        for s in 0..<slots { try cam.queue(slot: s, cookie: firstCookie + UInt64(s), controls: .none) }
        return slots
    }

    /// Configure reports what it settled on, and an odd size comes back adjusted and says so.
    public func configureReportsAdjustments() throws {
        let cam = try make()
        defer { cam.release() }
        let plain = try cam.configure([stream])
        let s = try #require(plain.streams.first)
        #expect(s.role == stream.role)
        #expect(s.width > 0 && s.height > 0 && s.stride >= s.width && s.frameSize > 0 && s.bufferCount >= 1)

        var odd = stream
        odd.width = s.width - 1
        odd.height = s.height - 1
        let adjusted = try cam.configure([odd])
        let a = try #require(adjusted.streams.first)
        if a.width != s.width - 1 || a.height != s.height - 1 {
            #expect(adjusted.isAdjusted, "a size change must be reported as an adjustment")
        }
    }

    /// Buffers are allocated once with readable memory covering the frame.
    public func allocatesReadableBuffers() throws {
        let cam = try make()
        defer { cam.release() }
        let config = try cam.configure([stream])
        let slots = try cam.allocate()
        #expect(slots >= 1)
        for slot in 0..<slots {
            let b = cam.buffer(stream: 0, slot: slot)
            #expect(b.width == config.streams[0].width && b.height == config.streams[0].height)
            #expect(!b.planes.isEmpty)
            let bytes = b.withUnsafeBytes { $0.count }
            #expect(bytes >= b.planes[0].length)
        }
    }

    /// Captures `frames` frames reusing requests: every cookie once, sequences and timestamps
    /// rising, no request lost.
    public func capturesWithRequestReuse(frames: Int) async throws {
        let cam = try make()
        defer { cam.release() }
        let slots = try startStreaming(cam)
        var cookies = Set<UInt64>()
        var next = UInt64(slots)
        var last: FrameMetadata?
        var received = 0
        var settled = false
        while received < frames {
            let c = try #require(try await cam.completions.next(timeout: frameTimeout))
            // Start-up frames (libcamera 0.5.2 on the Pi) come only first, before any settled one.
            #expect(c.status == .complete || (c.status == .startup && !settled), "frame \(c.metadata.sequence): \(c.status)")
            if c.status == .complete { settled = true }
            #expect(cookies.insert(c.cookie).inserted, "cookie \(c.cookie) came back twice")
            if let last {
                #expect(c.metadata.sequence > last.sequence, "sequence must rise")
                if let a = last.sensorTimestamp, let b = c.metadata.sensorTimestamp { #expect(b > a, "timestamps must rise") }
            }
            #expect(c.buffers.count == 1)
            if received % 10 == 0, let complaint = content(c) {
                Issue.record("frame \(c.metadata.sequence): \(complaint)")
            }
            last = c.metadata
            received += 1
            try cam.queue(slot: c.slot, cookie: next, controls: .none)
            next += 1
        }
        try cam.stop()
        var cancelled = 0
        while let c = cam.completions.tryNext() {
            #expect(cookies.insert(c.cookie).inserted, "cookie \(c.cookie) came back twice")
            cancelled += 1
        }
        #expect(cookies.count == Int(next), "every queued request comes back exactly once")
        #expect(cancelled <= slots)
    }

    /// Stop with requests in flight returns every one of them before it returns.
    public func stopReturnsEveryRequest() async throws {
        let cam = try make()
        defer { cam.release() }
        let slots = try startStreaming(cam)
        _ = try #require(try await cam.completions.next(timeout: frameTimeout))
        try cam.stop()
        var returned = 1
        while cam.completions.tryNext() != nil { returned += 1 }
        #expect(returned == slots, "queued \(slots) requests, \(returned) came back by the time stop returned")
    }

    /// `queue` from the consumer's thread races `stop` from another (a trigger or preview
    /// thread will do this): every request queued comes back exactly once, a queue refused
    /// because the camera stopped says so (`.invalidState`), and nothing else fails.
    public func queueRacesStop() async throws {
        let cam = try make()
        defer { cam.release() }
        let slots = try startStreaming(cam)
        var outstanding = Set((0..<UInt64(slots)))
        var nextCookie = UInt64(slots)
        let gate = OneShot()
        let stopper = OSThread {
            gate.wait()
            try? cam.stop()
            gate.markStopped()
        }
        // Also on a failed expectation or a throw: the stopper is let go before it is joined.
        defer {
            gate.open()
            stopper.join()
        }
        var completed = 0
        while !(gate.stopped && outstanding.isEmpty) {
            let next: CompletedRequest?
            if gate.stopped {
                next = cam.completions.tryNext()
            } else {
                do {
                    next = try await cam.completions.next(timeout: frameTimeout)
                } catch let e as ShutterbugError where e.code == .timeout && gate.stopped {
                    // Stop came while this waited, and took every request back already.
                    continue
                }
            }
            guard let c = next else { break }
            #expect(outstanding.remove(c.cookie) != nil, "cookie \(c.cookie) came back twice or was never queued")
            completed += 1
            if completed == 20 { gate.open() }
            guard c.status != .cancelled else { continue }
            do {
                try cam.queue(slot: c.slot, cookie: nextCookie, controls: .none)
                outstanding.insert(nextCookie)
                nextCookie += 1
            } catch let e as ShutterbugError {
                #expect(e.code == .invalidState, "a queue racing stop failed with \(e)")
            }
        }
        gate.open()
        stopper.join()
        // Whatever stop cancelled is in the queue once stop has returned.
        while let c = cam.completions.tryNext() { #expect(outstanding.remove(c.cookie) != nil, "cookie \(c.cookie) twice") }
        #expect(outstanding.isEmpty, "requests never returned: \(outstanding.sorted())")
    }

    /// The camera starts again after a stop and frames flow.
    public func restartsAfterStop() async throws {
        let cam = try make()
        defer { cam.release() }
        let slots = try startStreaming(cam)
        _ = try #require(try await cam.completions.next(timeout: frameTimeout))
        try cam.stop()
        while cam.completions.tryNext() != nil {}
        try cam.start(controls: .none)
        for s in 0..<slots { try cam.queue(slot: s, cookie: 100 + UInt64(s), controls: .none) }
        let c = try #require(try await cam.completions.next(timeout: frameTimeout))
        #expect(c.status == .complete || c.status == .startup)
        #expect(c.cookie >= 100)
        try cam.stop()
    }

    /// A slot cannot be queued twice, nor queued while stopped.
    public func rejectsMisuse() throws {
        let cam = try make()
        defer { cam.release() }
        _ = try cam.configure([stream])
        _ = try cam.allocate()
        #expect(throws: ShutterbugError.self) { try cam.queue(slot: 0, cookie: 0, controls: .none) }
        try cam.start(controls: .none)
        try cam.queue(slot: 0, cookie: 1, controls: .none)
        do {
            try cam.queue(slot: 0, cookie: 2, controls: .none)
            // A very fast camera may have completed slot 0 already; then it was legal.
        } catch let e as ShutterbugError {
            #expect(e.code == .busy)
        }
        try cam.stop()
    }

    /// Controls the camera does not support are reported, not silently dropped.
    /// A camera with a control it lacks (`unsupportedControl`) names it when asked for it; a camera
    /// that has every control (an IMX708 with its focus motor) names none, asked for them all.
    public func reportsUnsupportedControls() async throws {
        let cam = try make()
        defer { cam.release() }
        _ = try cam.configure([stream])
        _ = try cam.allocate()
        try cam.start(controls: .none)
        if let unsupportedControl {
            let reported = try cam.queue(slot: 0, cookie: 0, controls: unsupportedControl)
            #expect(!reported.isEmpty)
            #expect(reported.isSubset(of: unsupportedControl.set))
            #expect(cam.controlLimits.supported.intersection(reported).isEmpty)
        } else {
            let every = CameraControls(aeEnabled: false, exposureTime: .milliseconds(10), analogueGain: Gain(2), exposureValue: 0, awbEnabled: false,
                                       colourGains: ColourGains(red: 2, blue: 1.5), frameDurationLimits: .milliseconds(33)...(.milliseconds(33)),
                                       afMode: .manual, lensPosition: Dioptres(1))
            #expect(every.set == .all, "the request asks for every control there is")
            #expect(cam.controlLimits.supported == .all, "a camera given no unsupported control to try says it supports them all")
            let reported = try cam.queue(slot: 0, cookie: 0, controls: every)
            #expect(reported.isEmpty, "reported \(reported) as unsupported")
        }
        try cam.stop()
    }

    /// A released camera can be acquired again and streams.
    public func reacquiresAfterRelease() async throws {
        let first = try make()
        _ = try startStreaming(first)
        _ = try #require(try await first.completions.next(timeout: frameTimeout))
        first.release()
        let second = try make()
        defer { second.release() }
        _ = try startStreaming(second)
        let c = try #require(try await second.completions.next(timeout: frameTimeout))
        #expect(c.status == .complete || c.status == .startup)
        try second.stop()
    }

    /// After release the handle refuses work, saying it was released, and the completion
    /// sequence ends; a stop or a look at its limits after it is harmless. (A session still
    /// handling the completions the release's own stop returned queues them again: on
    /// libcamera such a call reached the freed camera, a use after free.)
    public func releaseEndsTheSequence() async throws {
        let cam = try make()
        let slots = try startStreaming(cam)
        cam.release()
        let calls: [(String, () throws -> Void)] = [
            ("configure", { _ = try cam.configure([stream]) }),
            ("allocate", { _ = try cam.allocate() }),
            ("start", { try cam.start(controls: .none) }),
            ("queue", { try cam.queue(slot: slots - 1, cookie: 1000, controls: .none) }),
        ]
        for (name, call) in calls {
            do {
                try call()
                Issue.record("\(name) after release was accepted")
            } catch let e as ShutterbugError {
                #expect(e.code == .invalidState && e.message.contains("released"), "\(name) after release: \(e)")
            }
        }
        try? cam.stop()
        _ = cam.controlLimits
        while let _ = try await cam.completions.next(timeout: frameTimeout) {}
    }

    /// A consumer queueing each completion again on another thread while the camera is
    /// released (a session on the camera's thread as a job gives the camera up after its device
    /// went): every queue after the release is refused as released, went away or not running,
    /// and none reaches the camera given back.
    public func queueRacesRelease(rounds: Int) async throws {
        for round in 0..<rounds {
            let cam = try make()
            _ = try startStreaming(cam, firstCookie: UInt64(round) << 32)
            for _ in 0..<3 {
                let c = try #require(try await cam.completions.next(timeout: frameTimeout))
                try cam.queue(slot: c.slot, cookie: c.cookie &+ 1_000, controls: .none)
            }
            let timeout = frameTimeout
            let consumer = Task.detached { () -> [String] in
                var refusals: [String] = []
                // Ends when release ends the sequence (or the camera stops delivering).
                while let c = try? await cam.completions.next(timeout: timeout) {
                    do {
                        try cam.queue(slot: c.slot, cookie: c.cookie &+ 1_000, controls: .none)
                    } catch {
                        refusals.append("\(error)")
                    }
                }
                return refusals
            }
            cam.release()
            for r in await consumer.value {
                #expect(r.contains("released") || r.contains("went away") || r.contains("not running"), "round \(round): a queue racing release failed with \(r)")
            }
        }
    }
}

/// Opens once, and says when the stop it guards has happened (for the queue/stop race).
final class OneShot: @unchecked Sendable {
    // `@unchecked Sendable`: every field is read and written under `lock`.
    private let lock = ConditionLock()
    private var isOpen = false
    private var isStopped = false
    func open() { lock.withLock { isOpen = true; lock.broadcast() } }
    func wait() { lock.withLock { while !isOpen { lock.wait() } } }
    func markStopped() { lock.withLock { isStopped = true } }
    var stopped: Bool { lock.withLock { isStopped } }
}
