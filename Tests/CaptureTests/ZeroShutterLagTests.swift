import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import TestSupport
import Testing

/// Zero shutter lag in the capture machine alone: a model sensor with a known frame timing
/// (readout starts every frame period, each exposure ends there), start-up, failed and
/// dropped frames, and zero-shutter-lag captures asked for some time after their instants, as
/// a trigger's edge is heard after it happened.
@Suite("Zero shutter lag: the frame exposing at the instant")
struct ZeroShutterLagTests {
    static let timing = CameraTiming(landingOffsets: 2...3, lineTime: .microseconds(20), margin: .milliseconds(1), minFramePeriod: .milliseconds(16),
                                     ipaMinInterval: .milliseconds(16), gainRange: 1...16, exposureRange: .microseconds(100)...(.seconds(1)), readoutTime: .milliseconds(10))

    /// A model run: what the machine handed out, and every frame it was shown.
    struct Run {
        var frames: [Int: CompletedRequest] = [:]
        /// Capture id → its instant, and what it got.
        var instants: [Int64: SensorTime] = [:]
        var asked: [Int64: SensorTime] = [:]
        var photos: [Int64: (frame: FrameMetadata, zsl: ZeroShutterLag?)] = [:]
        var failed: [Int64: ShutterbugError] = [:]
        var holdsTaken = 0
        var holdsEnded = 0
        var mostHeld = 0
        /// Copies made into the pool, and those given back (pushed out, or handed out as photos).
        var pooled = 0
        var poolEnded = 0
        var mostPooled = 0
    }

    /// Frames every `period`, each exposed for a random part of it; `drop` of them never come
    /// back, the first `startup` are start-up frames, a few fail. `triggers` instants at random,
    /// each asked for `0...lateBy` after it.
    static func run(seed: Int, frames count: Int, triggers: Int, ring: Int, inPlace: Int? = nil, lateBy: Double, startup: Int = 3) -> Run {
        var rng = SplitMix64(seed: UInt64(seed) &* 0x9E37_79B9 &+ 11)
        var machine = CaptureMachine(timing: timing, limits: ControlLimits(supported: [.exposureTime, .analogueGain]), ringFrames: ring, ringFramesInPlace: inPlace)
        var inPool: Set<Int> = []
        let period = Duration.milliseconds(Int64(16 + rng.next() % 85))
        let t0 = SensorTime(nanoseconds: 1_000_000_000)
        var out = Run()
        // Instants spread over the run, each asked for up to `lateBy` frame periods after it.
        var asks: [(at: SensorTime, settings: PhotoSettings)] = (0..<triggers).map { _ in
            let instant = t0 + period * (Double(rng.next() % 1_000_000) / 1_000_000 * Double(count - 2))
            let ask = instant + period * (Double(rng.next() % 1000) / 1000 * lateBy)
            return (ask, PhotoSettings(exposedAfter: instant, zeroShutterLag: true))
        }
        asks.sort { $0.at < $1.at }
        for a in asks {
            out.instants[a.settings.uniqueID] = a.settings.exposedAfter!
            out.asked[a.settings.uniqueID] = a.at
        }
        func take(_ actions: [CaptureMachine.Action]) {
            for a in actions {
                switch a {
                case .photo(let id, _, let frame):
                    if ExposureRing.isPooled(frame.slot) {
                        #expect(inPool.remove(frame.slot) != nil, "seed \(seed): a photo from pool copy \(frame.slot), not held")
                        out.poolEnded += 1
                    } else {
                        out.holdsEnded += 1
                    }
                    #expect(out.photos[id] == nil, "seed \(seed): capture \(id) got two photos")
                    out.photos[id] = (frame.metadata, nil)
                case .finished(let id, let r):
                    out.photos[id]?.zsl = r.zeroShutterLag
                case .failed(let id, let e): out.failed[id] = e
                case .release(let slot):
                    if ExposureRing.isPooled(slot) {
                        #expect(inPool.remove(slot) != nil, "seed \(seed): pool copy \(slot) given back twice")
                        out.poolEnded += 1
                    } else {
                        out.holdsEnded += 1
                    }
                case .pool(let frame, let id):
                    // The slot's hold ends once copied; the copy is held under its id.
                    #expect(!ExposureRing.isPooled(frame.slot) && inPool.insert(id).inserted, "seed \(seed): pool copy \(id) of slot \(frame.slot)")
                    out.holdsEnded += 1
                    out.pooled += 1
                    out.mostPooled = max(out.mostPooled, inPool.count)
                default: break
                }
            }
        }
        var next = 0
        for k in 0..<count {
            let ts = t0 + period * k
            // Captures asked for before this frame comes back.
            while next < asks.count, asks[next].at < ts {
                machine.add(asks[next].settings, now: asks[next].at)
                take(machine.takeActions())
                next += 1
            }
            if rng.next() % 12 == 0 { continue }  // dropped: never comes back
            let exposure = max(.microseconds(100), (period - timing.margin) * (Double(1 + rng.next() % 100) / 100))
            let status: CompletedRequest.Status = k < startup ? .startup : (rng.next() % 40 == 0 ? .error : .complete)
            let m = FrameMetadata(sequence: UInt32(k), sensorTimestamp: ts, exposureTime: exposure, analogueGain: Gain(1), frameDuration: period)
            let c = CompletedRequest(slot: k % 64, cookie: UInt64(k), status: status, metadata: m, buffers: [])
            out.frames[k] = c
            out.holdsTaken += machine.frame(c, now: ts)
            take(machine.takeActions())
            out.mostHeld = max(out.mostHeld, machine.heldFrames.count)
        }
        // Asked for after the last frame: they wait, and fail with the rest.
        for a in asks[next...] { machine.add(a.settings, now: a.at) }
        take(machine.takeActions())
        machine.failAll(ShutterbugError(.invalidState, "the run ended"))
        take(machine.takeActions())
        for slot in machine.dropRetained() {
            if ExposureRing.isPooled(slot) {
                #expect(inPool.remove(slot) != nil)
                out.poolEnded += 1
            } else {
                out.holdsEnded += 1
            }
        }
        #expect(inPool.isEmpty, "seed \(seed): pool copies \(inPool.sorted()) never given back")
        return out
    }

    @Test("property: each photo's exposure covers its instant whenever a complete frame did and no earlier capture took it; otherwise it is the first frame exposed after that nobody took, saying why; no frame twice; every hold given back once",
          arguments: 0..<300)
    func coversTheInstant(seed: Int) {
        // Every third seed: the camera's buffers spare only 1 or 2 of the 4 frames held, the
        // rest are copies in the pool; the choice of frame is the same.
        let r = Self.run(seed: seed, frames: 200, triggers: 40, ring: 4, inPlace: seed % 3 == 0 ? 1 + seed % 2 : nil, lateBy: 1.5)
        if seed % 3 == 0 {
            #expect(r.pooled > 0 && r.pooled == r.poolEnded && r.mostPooled <= 4 - (1 + seed % 2), "seed \(seed): \(r.pooled) copies, \(r.poolEnded) given back, at most \(r.mostPooled) at once")
        } else {
            #expect(r.pooled == 0)
        }
        var taken: [UInt32: Int64] = [:]
        for (id, p) in r.photos {
            #expect(taken[p.frame.sequence] == nil, "seed \(seed): frame \(p.frame.sequence) handed out twice")
            taken[p.frame.sequence] = id
        }
        for (id, instant) in r.instants {
            guard let (m, zsl) = r.photos[id] else {
                // Only the last instants may go unanswered (no frame after them came).
                #expect(r.failed[id] != nil, "seed \(seed): capture at \(instant) neither photo nor failure")
                continue
            }
            guard let zsl else { Issue.record("seed \(seed): no zero-shutter-lag report"); continue }
            #expect(zsl.instant == instant)
            let complete = r.frames.values.filter { $0.status == .complete }.map(\.metadata)
            let covering = complete.first { $0.exposure(against: instant) == .covering }
            if zsl.covered {
                #expect(m.exposure(against: instant) == .covering, "seed \(seed): said covered, but frame \(m.sequence) \(m.exposureStart!)...\(m.sensorTimestamp!) does not hold \(instant)")
                #expect(zsl.fallback == nil)
            } else {
                #expect(m.exposed(after: instant), "seed \(seed): a fallback exposed before its instant")
                #expect(zsl.fallback?.isEmpty == false, "seed \(seed): a fallback without its reason")
                if let covering {
                    #expect(taken[covering.sequence] != nil && taken[covering.sequence] != id,
                            "seed \(seed): frame \(covering.sequence) \(covering.exposureStart!)...\(covering.sensorTimestamp!) covered \(instant) (asked \(r.asked[id]!)) and nobody else took it, yet frame \(m.sequence) was taken (\(zsl.fallback ?? ""))")
                }
                // Every complete frame exposed after the instant and before this one went to someone.
                for f in complete where f.exposed(after: instant) && f.sequence < m.sequence {
                    #expect(taken[f.sequence] != nil, "seed \(seed): frame \(f.sequence) was exposed after \(instant) before frame \(m.sequence), untaken")
                }
            }
        }
        #expect(r.holdsTaken == r.holdsEnded, "seed \(seed): \(r.holdsTaken) holds taken, \(r.holdsEnded) given back or handed out")
        // Asked for within a frame and a half of its instant, with four frames held: the frame
        // for it is always still held, never "gone".
        let late = r.failed.filter { $0.value.code == .late }
        #expect(late.isEmpty, "seed \(seed): \(late.map { "\(r.instants[$0.key]!) asked \(r.asked[$0.key]!): \($0.value.message)" })")
    }

    @Test("memory stays flat: 10,000 zero-shutter-lag captures over 40,000 frames never hold more than the ring's frames, and every hold comes back")
    func tenThousandTriggers() {
        let r = Self.run(seed: 7, frames: 40_000, triggers: 10_000, ring: 3, lateBy: 1)
        #expect(r.mostHeld <= 3)
        // The same with one frame in place and two copies: the pool never holds more than two.
        let p = Self.run(seed: 7, frames: 40_000, triggers: 10_000, ring: 3, inPlace: 1, lateBy: 1)
        #expect(p.mostHeld <= 3 && p.mostPooled <= 2 && p.pooled == p.poolEnded && p.holdsTaken == p.holdsEnded, "\(p.mostPooled) pooled at most, \(p.pooled) copies, \(p.poolEnded) back")
        #expect(r.photos.count + r.failed.count == 10_000)
        #expect(r.holdsTaken == r.holdsEnded, "\(r.holdsTaken) holds taken, \(r.holdsEnded) given back or handed out")
        let covered = r.photos.values.filter { $0.zsl?.covered == true }.count
        // Exposures take 1 to 100% of each period and one frame in twelve is dropped: most
        // instants fall inside an exposure, not all.
        #expect(covered > 3_000 && covered < r.photos.count, "\(covered) of \(r.photos.count) covered")
    }

    static func frame(_ k: Int, ts: SensorTime, exposure: Duration, period: Duration = .milliseconds(33), status: CompletedRequest.Status = .complete) -> CompletedRequest {
        CompletedRequest(slot: k, cookie: UInt64(k), status: status,
                         metadata: FrameMetadata(sequence: UInt32(k), sensorTimestamp: ts, exposureTime: exposure, analogueGain: Gain(1), frameDuration: period),
                         buffers: [])
    }

    /// One capture at `instant`, asked for once `frames` have come: what it resolved to.
    static func one(at instant: SensorTime, after frames: [CompletedRequest], ring: Int = 4, bracket: BracketSettings? = nil) -> (ResolvedPhotoSettings?, ShutterbugError?, [UInt32]) {
        var machine = CaptureMachine(timing: timing, limits: ControlLimits(supported: [.exposureTime, .analogueGain]), ringFrames: ring)
        for f in frames { _ = machine.frame(f, now: f.metadata.sensorTimestamp!) }
        _ = machine.takeActions()
        let s = PhotoSettings(bracket: bracket, exposedAfter: instant, zeroShutterLag: true)
        machine.add(s, now: frames.last?.metadata.sensorTimestamp ?? instant)
        var resolved: ResolvedPhotoSettings?, error: ShutterbugError?, photos: [UInt32] = []
        for a in machine.takeActions() {
            switch a {
            case .resolved(_, let r), .finished(_, let r): resolved = r
            case .failed(_, let e): error = e
            case .photo(_, _, let f): photos.append(f.metadata.sequence)
            default: break
            }
        }
        return (resolved, error, photos)
    }

    @Test("a zero-shutter-lag photo asked for while another capture is under way takes the frame exposing at its instant then, not when its turn comes (by when that frame has left the frames held); one whose frame is still to come takes it as it comes back")
    func queuedBehindAnotherCapture() {
        var machine = CaptureMachine(timing: Self.timing, limits: ControlLimits(supported: [.exposureTime, .analogueGain]), ringFrames: 3)
        let t0 = SensorTime(nanoseconds: 5_000_000_000)
        let period = Duration.milliseconds(33)
        var k = 0
        var photos: [Int64: (UInt32, ZeroShutterLag?)] = [:]
        var failures: [Int64: String] = [:]
        var holds = 0, ended = 0
        func take(_ actions: [CaptureMachine.Action]) {
            for a in actions {
                switch a {
                case .photo(let id, _, let f):
                    photos[id] = (f.metadata.sequence, nil)
                    ended += 1
                case .finished(let id, let r): photos[id]?.1 = r.zeroShutterLag
                case .failed(let id, let e): failures[id] = e.message
                case .release: ended += 1
                default: break
                }
            }
        }
        func feed(_ n: Int) {
            for _ in 0..<n {
                let ts = t0 + period * k
                holds += machine.frame(Self.frame(k, ts: ts, exposure: .milliseconds(20)), now: ts)
                take(machine.takeActions())
                k += 1
            }
        }
        feed(5)
        // The head: a photo exposed after an instant a second away (a trigger's, a job's slot).
        let head = PhotoSettings(exposedAfter: t0 + .milliseconds(1200))
        machine.add(head, now: t0 + period * 4)
        // Behind it: one at an instant inside frame 3's exposure (held now), and one inside
        // frame 8's (still to come).
        let held = PhotoSettings(exposedAfter: t0 + period * 3 - .milliseconds(10), zeroShutterLag: true)
        let coming = PhotoSettings(exposedAfter: t0 + period * 8 - .milliseconds(5), zeroShutterLag: true)
        machine.add(held, now: t0 + period * 4)
        machine.add(coming, now: t0 + period * 4)
        take(machine.takeActions())
        // 60 frames: the head waits 36 of them; the ring of 3 turns over many times meanwhile.
        feed(60)
        #expect(failures.isEmpty, "\(failures)")
        #expect(photos[held.uniqueID]?.0 == 3 && photos[held.uniqueID]?.1?.covered == true, "\(String(describing: photos[held.uniqueID]))")
        #expect(photos[coming.uniqueID]?.0 == 8 && photos[coming.uniqueID]?.1?.covered == true, "\(String(describing: photos[coming.uniqueID]))")
        #expect(photos[head.uniqueID]?.0 == 37, "the head's own photo, the first frame exposed after its instant: \(String(describing: photos[head.uniqueID]))")
        machine.failAll(ShutterbugError(.invalidState, "the run ended"))
        take(machine.takeActions())
        ended += machine.dropRetained().count
        #expect(holds == ended, "\(holds) holds taken, \(ended) given back or handed out")
    }

    @Test("an instant between two exposures takes the next frame and says it fell in the gap, naming both frames")
    func betweenExposures() {
        let t = SensorTime(nanoseconds: 5_000_000_000)
        // Frames every 33 ms exposed for 10 ms: 23 ms of each period is dark.
        let frames = (0..<4).map { Self.frame($0, ts: t + .milliseconds(33 * $0), exposure: .milliseconds(10)) }
        let (covered, _, p1) = Self.one(at: t + .milliseconds(33 + 28), after: frames)
        #expect(p1 == [2] && covered?.zeroShutterLag?.covered == true && covered?.zeroShutterLag?.fromHeldFrames == true)
        let instant = t + .milliseconds(33 + 10)
        let (r, _, photos) = Self.one(at: instant, after: frames)
        #expect(photos == [2])
        #expect(r?.zeroShutterLag?.covered == false)
        let why = r?.zeroShutterLag?.fallback ?? ""
        #expect(why.contains("between two exposures") && why.contains("frame 1") && why.contains("frame 2"), "\(why)")
        #expect(r?.adjustments.contains { $0.contains("zero shutter lag") } == true)
    }

    @Test("dropped and start-up frames are named as the reason no frame covered the instant")
    func droppedAndStartup() {
        let t = SensorTime(nanoseconds: 5_000_000_000)
        // Frames 1 and 2 never came back.
        let frames = [0, 3, 4].map { Self.frame($0, ts: t + .milliseconds(33 * $0), exposure: .milliseconds(30)) }
        let (r, _, photos) = Self.one(at: t + .milliseconds(33 + 10), after: frames)
        #expect(photos == [3])
        #expect(r?.zeroShutterLag?.fallback?.contains("2 frames between 0 and 3") == true, "\(r?.zeroShutterLag?.fallback ?? "")")
        let startup = [0, 1].map { Self.frame($0, ts: t + .milliseconds(33 * $0), exposure: .milliseconds(30), status: .startup) } +
            [Self.frame(2, ts: t + .milliseconds(66), exposure: .milliseconds(30))]
        let (s, _, p2) = Self.one(at: t + .milliseconds(20), after: startup)
        #expect(p2 == [2])
        #expect(s?.zeroShutterLag?.fallback?.contains("no frame before it was seen") == true, "\(s?.zeroShutterLag?.fallback ?? "")")
    }

    @Test("an instant older than every frame held fails as late, naming how far back the ring reaches; one not yet exposed waits for its frame")
    func tooOldAndFuture() {
        let t = SensorTime(nanoseconds: 5_000_000_000)
        let frames = (0..<10).map { Self.frame($0, ts: t + .milliseconds(33 * $0), exposure: .milliseconds(30)) }
        let (_, error, photos) = Self.one(at: t + .milliseconds(20), after: frames, ring: 3)
        #expect(photos.isEmpty && error?.code == .late && error?.message.contains("--hold") == true, "\(String(describing: error))")
        // The instant is after the newest frame's exposure ended: the capture waits for the next.
        var machine = CaptureMachine(timing: Self.timing, limits: ControlLimits(supported: [.exposureTime, .analogueGain]), ringFrames: 3)
        for f in frames { _ = machine.frame(f, now: f.metadata.sensorTimestamp!) }
        let instant = t + .milliseconds(33 * 9 + 10)
        let s = PhotoSettings(exposedAfter: instant, zeroShutterLag: true)
        machine.add(s, now: instant)
        #expect(!machine.takeActions().contains { if case .photo = $0 { true } else { false } })
        #expect(machine.frame(Self.frame(10, ts: t + .milliseconds(330), exposure: .milliseconds(30)), now: t + .milliseconds(330)) == 1)
        let got = machine.takeActions().compactMap { a -> (UInt32, ZeroShutterLag?)? in
            if case .finished(_, let r) = a { return (r.steps[0].actual!.sequence, r.zeroShutterLag) } else { return nil }
        }
        #expect(got.first?.0 == 10 && got.first?.1?.covered == true && got.first?.1?.fromHeldFrames == false)
    }

    @Test("a zero-shutter-lag bracket: step 1 is the held frame exposing at the instant when it carries step 1's settings, the rest frames to come; a frame that does not carry them goes back and every step comes after, saying why; a bracket of one is the held frame at once; a focus bracket's steps all come after")
    func bracketFirstStepFromHeldFrame() {
        let t = SensorTime(nanoseconds: 5_000_000_000)
        // Frames every 33 ms, each exposed 30 ms at gain 1: frame 2 (t + 36...66 ms) covers t + 40 ms.
        let frames = (0..<4).map { Self.frame($0, ts: t + .milliseconds(33 * $0), exposure: .milliseconds(30)) }
        let instant = t + .milliseconds(40)
        func run(_ bracket: BracketSettings) -> (ResolvedPhotoSettings?, [UInt32], [Int], Bool) {
            var machine = CaptureMachine(timing: Self.timing, limits: ControlLimits(supported: [.exposureTime, .analogueGain, .lensPosition]), ringFrames: 4)
            for f in frames { _ = machine.frame(f, now: f.metadata.sensorTimestamp!) }
            _ = machine.takeActions()
            machine.add(PhotoSettings(bracket: bracket, exposedAfter: instant, zeroShutterLag: true), now: t + .milliseconds(100))
            var resolved: ResolvedPhotoSettings?, photos: [UInt32] = [], released: [Int] = [], finished = false
            for a in machine.takeActions() {
                switch a {
                case .resolved(_, let r): resolved = r
                case .finished(_, let r): resolved = r; finished = true
                case .photo(_, _, let f): photos.append(f.metadata.sequence)
                case .release(let slot): released.append(slot)
                default: break
                }
            }
            return (resolved, photos, released, finished)
        }
        // Step 1 at the frames' own exposure: frame 2 is step 1; step 2 is still to come.
        let (r, photos, released, finished) = run(.manualExposure([(.milliseconds(30), Gain(1)), (.milliseconds(8), Gain(1))]))
        #expect(r?.steps.count == 2 && r?.steps[0].actual?.sequence == 2 && r?.steps[1].actual == nil, "\(String(describing: r?.steps))")
        #expect(r?.zeroShutterLag?.covered == true && r?.zeroShutterLag?.fromHeldFrames == true)
        #expect(r?.adjustments.contains { $0.contains("step 1 is frame 2") } == true, "\(r?.adjustments ?? [])")
        #expect(photos.isEmpty && released.isEmpty && !finished, "photos are handed out when every step is in")
        // Step 1 at another exposure: frame 2 goes back; every step comes after.
        let (m, p2, rel2, _) = run(.manualExposure([(.milliseconds(4), Gain(1)), (.milliseconds(16), Gain(1))]))
        #expect(m?.steps.allSatisfy { $0.actual == nil } == true && p2.isEmpty && rel2 == [2], "\(rel2)")
        #expect(m?.zeroShutterLag?.covered == false && m?.zeroShutterLag?.fallback?.contains("not step 1's") == true, "\(String(describing: m?.zeroShutterLag))")
        // A bracket of one step that the held frame carries: done at once.
        let (one, p3, _, done) = run(.manualExposure([(.milliseconds(30), Gain(1))]))
        #expect(done && p3 == [2] && one?.zeroShutterLag?.covered == true)
        // A focus bracket moves the lens: every step is a frame still to come, said.
        let (f, p4, rel4, _) = run(.lensPositions([Dioptres(1), Dioptres(2)]))
        #expect(p4.isEmpty && rel4.isEmpty && f?.adjustments.contains { $0.contains("focus bracket") } == true, "\(f?.adjustments ?? [])")
    }

    @Test("the buffer plan holds the ring beside the bracket, the pipeline and the sinks, refuses a ring outside 0...32, and names it in a refusal over the budget")
    func bufferPlan() throws {
        let plan = try BufferPlan(bracketCount: 3, sinks: 1, framesPerSink: 2, ringFrames: 5)
        #expect(plan.buffersPerStream == 3 + RequestFeeder.pipelineDepth + 2 + 5)
        #expect(plan.photos(slots: plan.buffersPerStream) == 3)
        #expect(throws: ShutterbugError.self) { try BufferPlan(bracketCount: 1, sinks: 0, framesPerSink: 1, ringFrames: 33) }
        let config = CameraConfiguration(streams: [StreamConfiguration(role: .still, width: 4056, height: 3040, pixelFormat: .yuv420, stride: 4056, frameSize: 4056 * 3040 * 3 / 2, bufferCount: plan.buffersPerStream)], adjustments: [])
        do {
            try plan.check(config, within: MemoryBudget(bytes: 64 << 20, source: "test"))
            Issue.record("over the budget, accepted")
        } catch let e as ShutterbugError {
            #expect(e.message.contains("5 held for zero shutter lag") && e.message.contains("--hold, --pre"), "\(e.message)")
        }
        // A camera that allocated fewer buffers than the 14 asked: the 3 photos, the 4 in flight
        // and the sink's 2 come first; the frames held that are left over are copies in a pool,
        // whose bytes count against the budget.
        #expect(plan.ringInPlace(slots: 14) == 5 && plan.ringPooled(slots: 14) == 0)
        #expect(plan.ringInPlace(slots: 12) == 3 && plan.ringPooled(slots: 12) == 2 && plan.photos(slots: 12) == 3)
        #expect(plan.ringInPlace(slots: 8) == 0 && plan.ringPooled(slots: 8) == 5 && plan.photos(slots: 8) == 2)
        var short = config
        short.streams[0].bufferCount = 12
        #expect(plan.poolBytes(short) == 2 * short.streams[0].frameSize)
        // The pool is process memory: it has a budget of its own, not the camera's (a Pi 4's CMA).
        do {
            try plan.check(short, within: MemoryBudget(bytes: short.bufferBytes, source: "test"), pool: MemoryBudget(bytes: short.streams[0].frameSize, source: "test pool"))
            Issue.record("a pool over its budget, accepted")
        } catch let e as ShutterbugError {
            #expect(e.message.contains("3 in the camera's buffers") && e.message.contains("2 copied into a pool of 35.3 MB") && e.message.contains("SHUTTERBUG_POOL_BUDGET_MB"), "\(e.message)")
        }
        try plan.check(short, within: MemoryBudget(bytes: short.bufferBytes, source: "test"), pool: MemoryBudget(bytes: 2 * short.streams[0].frameSize, source: "test pool"))
        // A camera budget that holds the photos, the pipeline, the sink and 2 of the 5 frames: 2
        // in place; one that does not even hold the photos: none fit, refused as before.
        let frame = config.streams[0].frameSize
        var fitted = plan
        fitted.ringInPlaceLimit = fitted.fittingInPlace(config, within: MemoryBudget(bytes: (3 + RequestFeeder.pipelineDepth + 2 + 2) * frame + frame / 2, source: "test"))
        #expect(fitted.ringInPlaceLimit == 2 && fitted.buffersPerStream == 3 + RequestFeeder.pipelineDepth + 2 + 2 && fitted.ringPooled(slots: fitted.buffersPerStream) == 3)
        #expect(plan.fittingInPlace(config, within: MemoryBudget(bytes: 4 * frame, source: "test")) == nil)
    }

    @Test("a session holding frames: a capture at an instant inside a held frame's exposure takes that frame at once (its hold passes to the photo); the window is sized at the mode's fastest frame rate; too long a window is refused with the frames it would take")
    func session() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        let cam = SimulatedCamera(profile: .imx219, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        try await session.start(stream: StreamRequest(role: .video), preparedBracketCount: 1, holding: .window(.milliseconds(250)))
        let period = await session.timing.everyFramePeriod
        #expect(await session.heldFramesCapacity == Int((Duration.milliseconds(250) / period).rounded(.up)))
        // Frames flow while a photo is asked for; those nobody took are held.
        _ = try await record(session.capture(PhotoSettings()))
        _ = try await record(session.capture(PhotoSettings()))
        let held = await session.heldFrames
        let target = try #require(held.dropLast().last)
        let instant = target.exposureStart! + target.exposureTime! / 2
        let r = try await record(session.capture(PhotoSettings(exposedAfter: instant, zeroShutterLag: true)))
        #expect(r.photos.map(\.metadata.sequence) == [target.sequence])
        #expect(r.resolved?.zeroShutterLag == ZeroShutterLag(instant: instant, covered: true, fromHeldFrames: true))
        #expect(await !session.heldFrames.contains { $0.sequence == target.sequence }, "the frame left the ring with the photo")
        await session.waitUntilHeld(await session.heldFrames.count)
        await session.stop()
        #expect(await session.photosHeld == 0, "every held frame given back at stop")

        let cam2 = SimulatedCamera(profile: .imx219, options: o)
        defer { cam2.release() }
        do {
            try await CaptureSession(backend: cam2).start(stream: StreamRequest(role: .video), preparedBracketCount: 1, holding: .window(.seconds(10)))
            Issue.record("a 10 s window at video rate was accepted")
        } catch let e as ShutterbugError {
            #expect(e.code == .invalidArgument && e.message.contains("at most 32"), "\(e)")
        }
    }

    @Test("frames held beyond what the camera's buffers spare are copies in a pool: 14 held on a 16-buffer camera keep 11 in place and copy 3; a capture at an instant inside a copied frame gets the copy (process memory, the frame's own picture); every slot and copy comes back; the copies as the simulated camera's recipes, or as bytes copied on the copier's thread (a real camera's path: the slot back once they are in)", arguments: [true, false])
    func pooledHeldFrames(recipes: Bool) async throws {
        var o = SimulationOptions()
        o.clock = .realTime
        o.snapshotCopies = recipes
        let cam = SimulatedCamera(profile: .imx219, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let config = try await session.start(stream: StreamRequest(role: .video), preparedBracketCount: 1, holding: .frames(14))
        #expect(config.streams[0].bufferCount == 16, "the simulated camera allocates at most 16: \(config.streams[0])")
        let pooled = await session.heldFramesPooled
        #expect(await session.heldFramesCapacity == 14 && pooled.frames == 3 && pooled.bytes == 3 * config.streams[0].frameSize, "\(pooled)")
        #expect(await session.maxBracketedCapturePhotoCount >= 1)
        // Frames flow while photos are taken; those nobody took are held, 3 of them as copies.
        let reference = try await record(session.capture(PhotoSettings()), measure: true)
        // The ring fills as frames come (within 100 frames).
        var watched = 0
        for await _ in await session.frames() {
            watched += 1
            if await session.heldFrames.count == 14 || watched == 100 { break }
        }
        let (count, ledger) = (await session.heldFrames.count, await session.slotLedger)
        try #require(count == 14, "\(count) frames held after \(watched) frames; \(ledger)")
        #expect(await session.heldFramesCopied > 0)
        var fromPool = 0, taken = 0
        // A frame held as a copy, the newest (at 30 fps the oldest leave the ring in 0.5 s); one
        // pushed out meanwhile fails as late, and the newest copy then is tried (20 tries).
        for _ in 0..<20 where fromPool == 0 {
            guard let target = await session.heldFramesInPool.last else {
                // None held as a copy just now (a capture took one and the next frames went in place): wait for the next frame.
                for await _ in await session.frames() { break }
                continue
            }
            let instant = target.exposureStart! + target.exposureTime! / 2
            var r = CaptureRecord(), copy = false
            do {
                for try await e in await session.capture(PhotoSettings(exposedAfter: instant, zeroShutterLag: true)) {
                    switch e {
                    case .photo(let p):
                        copy = p.fromPool
                        let buffer = p.buffers[0]
                        r.photos.append((p.step, p.metadata, try await offPool { meanLuma(buffer) }))
                        p.release()
                    case .captureFinished(let s): r.resolved = s
                    default: break
                    }
                }
            } catch let e as ShutterbugError where e.code == .late {
                continue
            }
            taken += 1
            #expect(r.photos.map(\.metadata.sequence) == [target.sequence] && r.resolved?.zeroShutterLag?.covered == true)
            if copy {
                fromPool += 1
                // The copy is the frame's picture: the scene's brightness, as a frame in place shows it.
                let luma = try #require(r.photos.first?.mean), expected = try #require(reference.photos.first?.mean)
                #expect(abs(luma - expected) < 0.1 * expected, "a pooled frame's mean luma \(luma), a frame in place \(expected)")
            }
        }
        #expect(fromPool > 0, "no capture took a copy from the pool (\(taken) taken)")
        await session.stop()
        // Released photos hand their slots back through a task hop.
        try await withDeadline(.seconds(10), "every slot back after stop") { await session.waitUntilHeld(0) }
        let after = await session.slotLedger
        #expect(await session.photosHeld == 0, "every slot given back at stop: \(after)")
    }

    @Test("frames held that would take the camera's buffers over its memory budget (a Pi 4's CMA) are copies in the pool instead: the buffers asked for fit the budget, the rest of the ring is pooled, and captures take from it")
    func poolForTheBudget() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        let probe = SimulatedCamera(profile: .imx219, options: o)
        let frame = try await CaptureSession(backend: probe).prepare(streams: [StreamRequest(role: .video)], preparedBracketCount: 1).streams[0].frameSize
        probe.release()
        let cam = SimulatedCamera(profile: .imx219, options: o)
        defer { cam.release() }
        // Room for the photo, the pipeline and 3 frames held, of the 8 asked for.
        let budget = MemoryBudget(bytes: (1 + RequestFeeder.pipelineDepth + 3) * frame + frame / 2, source: "a small CMA pool")
        let session = CaptureSession(backend: cam, memoryBudget: budget, poolBudget: MemoryBudget(bytes: 64 * frame, source: "test"))
        let config = try await session.start(stream: StreamRequest(role: .video), preparedBracketCount: 1, holding: .frames(8))
        #expect(config.bufferBytes <= budget.bytes && config.streams[0].bufferCount == 1 + RequestFeeder.pipelineDepth + 3, "\(config.bufferDescription)")
        let pooled = await session.heldFramesPooled
        #expect(await session.heldFramesCapacity == 8 && pooled.frames == 5 && pooled.bytes == 5 * frame, "\(pooled)")
        // Frames flow while photos are asked for; those nobody took are held, copies beyond 3.
        for _ in 0..<6 { _ = try await record(session.capture(PhotoSettings())) }
        let held = await session.heldFrames
        let target = try #require(held.dropLast().last)
        let r = try await record(session.capture(PhotoSettings(exposedAfter: target.exposureStart! + target.exposureTime! / 2, zeroShutterLag: true)))
        #expect(r.photos.map(\.metadata.sequence) == [target.sequence] && r.resolved?.zeroShutterLag?.covered == true)
        await session.stop()
        // Released photos hand their slots back through a task hop.
        try await withDeadline(.seconds(10), "every slot back after stop") { await session.waitUntilHeld(0) }
        // A pool over its own budget is refused before anything is allocated, naming both.
        let cam2 = SimulatedCamera(profile: .imx219, options: o)
        defer { cam2.release() }
        do {
            try await CaptureSession(backend: cam2, memoryBudget: budget, poolBudget: MemoryBudget(bytes: frame, source: "a tiny pool")).start(stream: StreamRequest(role: .video), preparedBracketCount: 1, holding: .frames(8))
            Issue.record("a pool of 5 frames over a 1-frame budget was accepted")
        } catch let e as ShutterbugError {
            #expect(e.message.contains("5 copied into a pool") && e.message.contains("a tiny pool"), "\(e.message)")
        }
    }

    @Test("pre-capture windows: counted at the frame rate the camera runs at (fewer frames when auto exposure slows it), never more than the buffers hold at the mode's fastest; held frames are the window and two more; a window too long for 32 frames is refused, naming them")
    func burstWindows() throws {
        let r = BurstRequest(before: .window(.milliseconds(500)), after: .window(.milliseconds(250)))
        let fastest = Duration.milliseconds(33)
        #expect(r.largest(fastest: fastest).before == 16 && r.largest(fastest: fastest).after == 8)
        let slow = r.burst(period: .milliseconds(100), fastest: fastest)
        #expect(slow.before == 5 && slow.after == 3 && slow.count == 9)
        // A period below the mode's fastest (a rounding of the metadata) never makes more than the buffers hold.
        #expect(r.burst(period: .milliseconds(10), fastest: fastest) == r.largest(fastest: fastest))
        // A window shorter than a frame still takes one.
        #expect(BurstRequest(before: .window(.milliseconds(1)), after: .frames(0)).burst(period: .milliseconds(250), fastest: fastest).before == 1)
        #expect(r.held.count(period: fastest) == 16 + BurstRequest.heldMargin)
        #expect(BurstRequest(before: .frames(3), after: .frames(2)).held == .frames(5))
        let plan = try BufferPlan(bracketCount: 1, sinks: 0, framesPerSink: 1, holding: .none, bursts: [BurstRequest(before: .window(.milliseconds(100)), after: .frames(2))], period: fastest)
        #expect(plan.bracketCount == 4 + 1 + 2 && plan.ringFrames == 4 + 2)
        try r.check(fastest: fastest)
        #expect(try BufferPlan(bracketCount: 1, sinks: 0, framesPerSink: 1, holding: .none, bursts: [r], period: fastest).bracketCount == 25)
        do {
            _ = try BufferPlan(bracketCount: 1, sinks: 0, framesPerSink: 1, holding: .none, bursts: [BurstRequest(before: .window(.seconds(1)), after: .window(.milliseconds(250)))], period: fastest)
            Issue.record("a burst of 40 frames at 33 ms was accepted")
        } catch let e as ShutterbugError {
            #expect(e.message.contains("takes 40 frames (31 before, the trigger's, 8 after)") && e.message.contains("at most 32"), "\(e)")
        }
        do {
            try BurstRequest(before: .window(.seconds(2)), after: .frames(0)).check(fastest: fastest)
            Issue.record("a 2 s window at 33 ms was accepted")
        } catch let e as ShutterbugError {
            #expect(e.message.contains("62 frames (61 before") && e.message.contains("at most 32"), "\(e)")
        }
    }

    @Test("property: bursts around random instants, with drops and start-up frames: every burst has all its frames, in frame order, the ones before ended by the instant and the ones after the frame at it; no frame in two bursts; every hold given back once; a burst of windows spans them (its frames reach back at least the window before the instant and forward at least the window after)",
          arguments: 0..<150)
    func bursts(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed) &* 0x2545_F491 &+ 3)
        let period = Duration.milliseconds(Int64(16 + rng.next() % 85))
        // Odd seeds: windows of up to three periods, counted at this period as the session would.
        let request: BurstRequest? = seed % 2 == 1
            ? BurstRequest(before: .window(period * (Double(1 + rng.next() % 300) / 100)), after: .window(period * (Double(rng.next() % 300) / 100)))
            : nil
        let b = request?.burst(period: period, fastest: Self.timing.everyFramePeriod) ?? PhotoSettings.Burst(before: 1 + Int(rng.next() % 4), after: Int(rng.next() % 4))
        var machine = CaptureMachine(timing: Self.timing, limits: ControlLimits(supported: [.exposureTime, .analogueGain]), ringFrames: b.before + 2)
        let t0 = SensorTime(nanoseconds: 1_000_000_000)
        var asks: [(at: SensorTime, settings: PhotoSettings)] = (0..<15).map { _ in
            let instant = t0 + period * (Double(rng.next() % 1_000_000) / 1_000_000 * 180)
            return (instant + period * (Double(rng.next() % 1000) / 1000), PhotoSettings(exposedAfter: instant, burst: b))
        }
        asks.sort { $0.at < $1.at }
        var frames: [Int64: [FrameMetadata]] = [:], finished: [Int64: ResolvedPhotoSettings] = [:], failed: Set<Int64> = []
        var holdsTaken = 0, holdsEnded = 0
        func take(_ actions: [CaptureMachine.Action]) {
            for a in actions {
                switch a {
                case .photo(let id, _, let f): holdsEnded += 1; frames[id, default: []].append(f.metadata)
                case .finished(let id, let r): finished[id] = r
                case .failed(let id, _): failed.insert(id)
                case .release: holdsEnded += 1
                default: break
                }
            }
        }
        var next = 0
        for k in 0..<200 {
            let ts = t0 + period * k
            while next < asks.count, asks[next].at < ts {
                machine.add(asks[next].settings, now: asks[next].at)
                take(machine.takeActions())
                next += 1
            }
            if rng.next() % 15 == 0 { continue }
            let exposure = max(.microseconds(100), (period - Self.timing.margin) * (Double(1 + rng.next() % 100) / 100))
            let status: CompletedRequest.Status = k < 3 ? .startup : .complete
            let c = CompletedRequest(slot: k % 64, cookie: UInt64(k), status: status,
                                     metadata: FrameMetadata(sequence: UInt32(k), sensorTimestamp: ts, exposureTime: exposure, analogueGain: Gain(1), frameDuration: period), buffers: [])
            holdsTaken += machine.frame(c, now: ts)
            take(machine.takeActions())
        }
        for a in asks[next...] { machine.add(a.settings, now: a.at) }
        take(machine.takeActions())
        machine.failAll(ShutterbugError(.invalidState, "the run ended"))
        take(machine.takeActions())
        holdsEnded += machine.dropRetained().count
        var used: Set<UInt32> = []
        for (at, s) in asks {
            let id = s.uniqueID
            guard let r = finished[id] else {
                #expect(failed.contains(id), "seed \(seed): burst asked at \(at) neither finished nor failed")
                continue
            }
            let got = frames[id] ?? []
            let seqs = got.map(\.sequence)
            #expect(got.count == b.count, "seed \(seed): \(got.count) frames of \(b.count)")
            #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "seed \(seed): frames out of order \(seqs)")
            #expect(used.isDisjoint(with: seqs), "seed \(seed): frames \(used.intersection(seqs).sorted()) in two bursts")
            used.formUnion(seqs)
            let instant = s.exposedAfter!
            let pivot = try! #require(r.pivotStep)
            #expect(got[..<pivot].allSatisfy { $0.sensorTimestamp! <= instant }, "seed \(seed): a frame before the pivot ended after the instant")
            let z = try! #require(r.zeroShutterLag)
            #expect(z.covered ? got[pivot].exposure(against: instant) == .covering : got[pivot].exposed(after: instant), "seed \(seed): pivot \(got[pivot].sequence) \(z)")
            if pivot < b.before { #expect(r.adjustments.contains { $0.contains("frames before the trigger were held") }, "seed \(seed)") }
            if let request, case .window(let w) = request.before, pivot == b.before, let first = got.first?.sensorTimestamp {
                // Each frame stands for the period up to its readout: the first one's began at or
                // before the start of the window.
                #expect(first - period <= instant - w, "seed \(seed): frames before \(instant) reach back only to \(first - period), window \(w)")
            }
            if let request, case .window(let w) = request.after, let last = got.last?.sensorTimestamp {
                #expect(last >= instant + w, "seed \(seed): frames after \(instant) reach only \(last), window \(w)")
            }
        }
        #expect(holdsTaken == holdsEnded, "seed \(seed): \(holdsTaken) holds taken, \(holdsEnded) given back or handed out")
    }
}
