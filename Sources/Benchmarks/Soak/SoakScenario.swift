import Capture
import CaptureScheduler
import Fleet
import FleetService
import Foundation
import ImageOutput
import Jobs
import MQTT
import Server
import ShutterbugCore
import SimulatedCamera
import Synchronization
import Upload
import Logging

/// The service over simulated days: a timelapse job of -1/0/+1 EV brackets; at each of its
/// slots, one or two captures asked of the service at random (seeded): a photo, a -2/0/+2 EV
/// bracket or a manual bracket (0.5 ms and 60 ms at gain 4); two simulated triggers all along
/// (a zero-shutter-lag photo, and a burst of 2 frames before and 1 after), the second
/// reloaded with a changed burst half-way; a camera that drops a frame in a hundred and
/// stalls for 0.9 s now and then (under every limit: nothing may fail for it); as the scene's
/// light goes from day to night and back. A second job takes manual brackets (2 ms and 30 ms at
/// gain 2) as DNG and JPEG at half the rate, keeping at most 24 MB of them. With `fullDisk`, the
/// card is a tmpfs of its own (as root; otherwise the fault is said not tried) that is filled to
/// the last byte for a while a third of the way through: what is asked meanwhile fails for
/// want of space and nothing else, the jobs pause, and all goes on when the space comes back.
/// With `mqtt`, a third of the asks go over MQTT (the service a fleet node on a Mosquitto
/// broker of its own, as Home Assistant drives it), and the broker is killed for a tenth of the
/// slots half-way: the asks meanwhile go to the API, the node reconnects when it is back.
/// In virtual time: a simulated day is `dayLength` of the camera's clock (the light's whole
/// cycle), so days pass in seconds. What it leaves is judged by `SoakJudgement`.
public struct SoakScenario: Sendable {
    public var days: Double
    /// The camera's clock per simulated day (the light's period).
    public var dayLength: Duration
    public var slotsPerDay: Int
    public var seed: UInt64
    /// Light at noon and at midnight (lux): within auto exposure's reach by default, so its
    /// brightness can be judged at every hour.
    public var dayLux: Double
    public var nightLux: Double
    /// Fill the card to the last byte for a while (a tmpfs mounted on the directory: as root).
    public var fullDisk: Bool
    /// Leave the files (and the card's tmpfs, mounted) to read afterwards.
    public var keepFiles = false
    /// Send every file to an S3 store (SeaweedFS, when installed) that goes away for a while
    /// two thirds of the way through.
    public var uploads = true
    /// Ask a third of the captures over MQTT (Mosquitto, when installed), the broker away for a
    /// while half-way through.
    public var mqtt = true

    public init(days: Double = 1, dayLength: Duration = .seconds(1200), slotsPerDay: Int = 36, seed: UInt64 = 49, dayLux: Double = 4000, nightLux: Double = 40,
                fullDisk: Bool = true) {
        self.fullDisk = fullDisk
        self.days = days
        self.dayLength = dayLength
        self.slotsPerDay = slotsPerDay
        self.seed = seed
        self.dayLux = dayLux
        self.nightLux = nightLux
    }

    public struct Report: Sendable, Codable {
        public var days: Double
        public var slots = 0
        public var slotsTaken = 0
        /// The job's other slots, by state, and its last word.
        public var slotsSkipped = 0
        public var slotsMissed = 0
        public var slotsFailed = 0
        public var jobMessage: String?
        public var photos = 0
        public var evBrackets = 0
        public var manualBrackets = 0
        public var capturesFailed: [String] = []
        /// The triggers' captures and failures (each trigger's counts), stalls injected, and
        /// what the reload did.
        public var triggerCaptures = 0
        public var triggerFailures = 0
        public var triggerDropped = 0
        public var stalls = 0
        public var reload: [String] = []
        /// The second job (manual DNG+JPEG brackets, retention by size): its slots by state,
        /// and the slots retention deleted.
        public var manualSlots = 0
        public var manualTaken = 0
        public var manualSkipped = 0
        public var manualFailed = 0
        public var manualMissed = 0
        public var manualMessage: String?
        /// The full disk: what was done (or why not), what failed for want of space while it
        /// lasted (API captures, trigger captures), and what was captured after it.
        public var fullDisk = "not asked"
        public var refusedForSpace = 0
        public var capturesAfterFullDisk = 0
        /// Uploads: what was done (or why not); files queued, uploaded, failed (with why);
        /// capture files on disk the journal does not hold, or the bucket does not hold whole;
        /// objects in the bucket the journal does not account for.
        public var uploads = "not asked"
        public var uploadsQueued = 0
        public var uploadsDone = 0
        public var uploadsFailed: [String] = []
        public var notUploaded: [String] = []
        public var bucketStrays: [String] = []
        /// MQTT: what was done (or why not); captures answered over it; asks made while the
        /// broker was away (sent to the API instead); wall seconds from the broker's return to
        /// the node's first answer.
        public var mqtt = "not asked"
        public var mqttCaptures = 0
        public var mqttAskedWhileDown = 0
        public var mqttBackAfterSeconds: Double?
        public var wallSeconds = 0.0
        public var rssStartKB = 0
        public var rssEndKB = 0
        /// Resident memory (kB) at the end of each simulated day: a leak grows day by day, a
        /// cache or an allocator's arenas level off.
        public var rssByDayKB: [Int] = []
        public var fdsStart = 0
        public var fdsEnd = 0
        public var judgement = SoakJudgement()

        mutating func add(_ t: TriggerSummaryReport) {
            triggerCaptures += t.captured
            triggerFailures += t.failed
            triggerDropped += t.dropped
        }
    }

    /// Resident memory (kB) and open descriptors of this process.
    static func footprint() -> (rss: Int, fds: Int) {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        return (rss, fds)
    }

    /// Runs the scenario into `directory` (created) and judges it.
    public func run(in directory: String, progress: @Sendable (String) -> Void = { _ in }) async throws -> Report {
        var report = Report(days: days)
        let began = ContinuousClock.now
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let card = fullDisk ? SoakCard(directory) : nil
        // The card's tmpfs goes with the run however it ends (a run that threw left it mounted),
        // unless its files are to be read afterwards.
        defer { if let card, card.problem == nil, !keepFiles { card.unmount() } }
        report.fullDisk = card?.problem.map { "not tried: \($0)" } ?? (fullDisk ? "" : "not asked")
        var options = SimulationOptions()
        options.clock = .virtual
        options.seed = seed
        options.sceneSchedule = .dayNight(period: dayLength.secondsValue, day: dayLux, night: nightLux)
        options.dropProbability = 0.01
        let cam = SimulatedCamera(profile: .imx477, options: options)
        defer { cam.release() }
        // Triggers about twice a slot's interval apart, on the camera's clock.
        let mean = Int(max(20, dayLength.secondsValue / Double(slotsPerDay) * 2))
        func triggers(post: Int) throws -> [TriggerDefinition] {
            [try TriggerDefinition(name: "door", words: ["--simulated", "poisson:\(mean)s", "--zsl", "--hold", "4"], realTime: false),
             try TriggerDefinition(name: "pir", words: ["--simulated", "poisson:\(mean + 7)s", "--pre", "2", "--post", "\(post)"], realTime: false)]
        }
        let declared = CameraService.Declared(triggers: try triggers(post: 1))
        let session = CaptureSession(backend: cam)
        // A raw stream beside the JPEGs' for the second job's DNGs, in the sensor's smallest mode.
        var raw = StreamRequest(role: .raw)
        (raw.width, raw.height) = (1332, 990)
        let config = try await session.start(streams: [StreamRequest(role: .still, width: 640, height: 480), raw], preparedBracketCount: 5,
                                             holding: declared.triggers.reduce(HeldFrames.none) { $0.union($1.held) },
                                             bursts: (try triggers(post: 2) + declared.triggers).compactMap(\.burst))
        let output = try OutputDirectory(path: directory, reserve: 64 << 20)
        let writer = try PhotoFileWriter(directory: output, streams: config.streams, camera: CameraDescription(profile: .imx477))
        let service = CameraService(session: session, camera: cam, writer: writer, directory: output, sensorModes: cam.capabilities.sensorModes)
        // The store, and the service's uploader sending every file written under the folder.
        var store: SeaweedStore?
        var uploader: Uploader?
        var uploading: Task<Void, Never>?
        if uploads {
            do {
                let s = try await SeaweedStore(root: NSTemporaryDirectory() + "sb-soak-store-\(getpid())-\(UUID().uuidString.prefix(8))", bucket: "soak")
                store = s
                var logger = Logger(label: "soak-uploads")
                logger.logLevel = .critical
                let u = try Uploader(try UploadSettings(endpoint: s.bucket.endpoint, bucket: "soak", credentials: s.bucket.credentials, keyTemplate: try KeyTemplate("{path}"),
                                                        retryBase: .milliseconds(250), retryCap: .seconds(5)),
                                     folder: directory, logger: logger)
                service.uploader.withLock { $0 = u }
                uploader = u
                uploading = Task { await u.run() }
                report.uploads = ""
            } catch {
                report.uploads = "not tried: \(error)"
            }
        }
        defer {
            uploading?.cancel()
            uploader?.stopObserving()
            store?.remove()
        }
        // The broker, the service as its node, and the client that asks it (as Home Assistant
        // or a coordinator would), its replies kept by correlation.
        var broker: SoakBroker?
        var link: FleetLink?
        var asker: MQTTClient?
        let replies = SoakReplies()
        var reading: Task<Void, Never>?
        if mqtt {
            do {
                let b = try await SoakBroker(root: NSTemporaryDirectory() + "sb-soak-mqtt-\(getpid())-\(UUID().uuidString.prefix(8))")
                broker = b
                var settings = MQTTSettings(url: "mqtt://127.0.0.1:\(b.port)")
                settings.node = "soak"
                settings.requireClockSync = false
                settings.statePeriod = .seconds(1)
                var logger = Logger(label: "soak-mqtt")
                logger.logLevel = .critical
                link = try FleetLink(settings, service: service, reload: nil, version: "soak", logger: logger, clock: ClockSyncReader(fixed: ClockSync(source: .chrony, synchronised: true)))
                let c = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: b.port, clientID: "soak-asker"))
                c.subscribe("soak/replies")
                asker = c
                reading = Task {
                    for await m in c.messages where m.topic == "soak/replies" {
                        if let id = m.correlationData { replies.box.withLock { $0[String(decoding: id, as: UTF8.self)] = m.payload } }
                    }
                }
                report.mqtt = ""
            } catch {
                report.mqtt = "not tried: \(error)"
            }
        }
        defer {
            reading?.cancel()
            asker?.stop()
            broker?.stop()
        }
        let forSpace = SoakJudgement.forSpace
        var diskFull = false
        (report.rssStartKB, report.fdsStart) = Self.footprint()
        // The triggers' failures, in their own words.
        let failures = Mutex<[String]>([])
        let listening = Task {
            for await e in service.events.subscribe() {
                if case .captureFailed(_, let trigger?, let reason) = e { failures.withLock { $0.append("trigger \(trigger): \(reason)") } }
                if case .captureFailed(_, nil, let reason) = e, !forSpace(reason) { failures.withLock { $0.append("capture: \(reason)") } }
            }
        }
        defer { listening.cancel() }
        await service.apply(declared)
        var reloaded = false

        let slots = max(1, Int((days * Double(slotsPerDay)).rounded()))
        report.slots = slots
        let interval = max(.seconds(10), dayLength / slotsPerDay)
        let start = ISO8601DateFormatter().string(from: Date().addingTimeInterval(2))
        _ = try await service.createJob(JobDefinition(name: "roof", words: ["--interval", "\(Int(interval.secondsValue))s", "--count", "\(slots)", "--ev", "-1,0,1",
                                                                            "--start", start]))
        report.manualSlots = max(1, slots / 2)
        // Half an interval after the first job's slots, as one would set two jobs on one camera.
        let garden = ISO8601DateFormatter().string(from: Date().addingTimeInterval(2 + interval.secondsValue / 2))
        _ = try await service.createJob(JobDefinition(name: "garden", words: ["--interval", "\(Int(interval.secondsValue * 2))s", "--count", "\(report.manualSlots)",
                                                                              "--exposures", "2ms,30ms", "--gain", "2", "--format", "dng,jpeg", "--keep", "24MB",
                                                                              "--start", garden]))
        // The full disk: from a third of the way through, for a tenth of the slots (one at least).
        let fillRound = card?.problem == nil && card != nil ? slots / 3 : -1
        let freeRound = fillRound + max(1, slots / 10)
        // The store away: from two thirds of the way through, for a tenth of the slots.
        let storeDownRound = store == nil ? -1 : (2 * slots) / 3
        let storeUpRound = storeDownRound + max(1, slots / 10)
        // The broker away: from half-way (after the reload), for a tenth of the slots.
        let brokerDownRound = broker == nil ? -1 : slots / 2 + 2
        let brokerUpRound = brokerDownRound + max(1, slots / 10)
        var brokerDown = false
        var brokerBackAt: ContinuousClock.Instant?
        var mqttAsks = 0
        var rng = SplitMix64(seed: seed)
        let asks: [(String, String)] = [("photo", "{}"), ("ev", #"{"ev": [-2, 0, 2]}"#), ("manual", #"{"exposuresUs": [500, 60000], "gain": 4}"#), ("photo", "{}")]
        // The API's client asks between slots, at instants on the camera's clock of its own
        // (mid-way, give or take a quarter of the interval): it holds the clock there, as the
        // job and the triggers hold it at theirs, so each comes when it would in real time.
        let client: UInt64 = 1 << 61
        defer { cam.setFrameHold(client, at: nil) }
        let first = cam.now
        let rounds = Atomic<Int>(0)
        let watchdog = Task {
            var last = -1
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(30))
                let now = rounds.load(ordering: .relaxed)
                if now == last {
                    let t = await service.triggerStatuses().map { "\($0.name) \($0.state) \($0.report.captured) captured" }
                    let inProgress = await session.capturesInProgress.count
                    let j = await service.jobStatuses().first { $0.name == "roof" }
                    FileHandle.standardError.write("soak: no round for 30 s (round \(now)); \(inProgress) captures in progress; job \(j.map { "\($0.state) \($0.taken) taken, next \($0.nextSlot ?? -1)" } ?? "-"); triggers \(t); the camera: \(cam.clockState)\n".data(using: .utf8)!)
                }
                last = now
            }
        }
        defer { watchdog.cancel() }
        var round = 0
        var lastReported = -1
        while round <= slots + 1 {
            let jitter = interval * (Double(rng.next() % 1000) / 1000 - 0.5) / 2
            let at = first + interval * round + interval / 2 + jitter
            // (A deadline on the wall clock, saying where the camera's clock stood.)
            let reached = await withTaskGroup(of: Bool.self) { group in
                group.addTask { await cam.holdFrames(client, until: at); return true }
                group.addTask { try? await Task.sleep(for: .seconds(120)); return false }
                defer { group.cancelAll() }
                return await group.next() ?? false
            }
            guard reached else {
                let j = await service.jobStatuses().first { $0.name == "roof" }
                throw ShutterbugError(.timeout, "the soak's camera did not reach \(at) within 120 s (round \(round); the job \(j.map { "\($0.state), next slot \($0.nextSlot.map(String.init) ?? "-") at \($0.nextSlotAt ?? "-"), \($0.message ?? "")" } ?? "gone")); the camera: \(cam.clockState)")
            }
            round += 1
            rounds.store(round, ordering: .relaxed)
            guard let s = await service.jobStatuses().first(where: { $0.name == "roof" }) else { break }
            let done = s.taken + s.skipped + s.failed + s.missed
            if done / slotsPerDay > report.rssByDayKB.count { report.rssByDayKB.append(Self.footprint().rss) }
            if done / max(1, slotsPerDay / 4) != lastReported {
                lastReported = done / max(1, slotsPerDay / 4)
                progress("slot \(done) of \(slots): \(s.taken) taken")
            }
            if s.state == .finished || s.state == .failed || s.state == .stopped { break }
            if !reloaded, done >= slots / 2 {
                // A reload that changes one trigger (restarted) and keeps the other. The
                // restart waits for the trigger's captures under way, which need frames: the
                // client's hold is lifted first.
                cam.setFrameHold(client, at: nil)
                reloaded = true
                // (The restarted trigger counts from zero: what it did so far is kept here.)
                for t in await service.triggerStatuses() where t.name == "pir" { report.add(t.report) }
                let r = await service.apply(CameraService.Declared(triggers: try triggers(post: 2)))
                report.reload = r.kept + r.restarted.map { "restarted " + $0 } + r.refused.map { "refused " + $0 }
            }
            if round == fillRound, let card {
                do {
                    let filled = try card.fill()
                    diskFull = true
                    report.fullDisk = "filled \(filled >> 20) MB at round \(round) of \(slots + 1), "
                } catch {
                    report.fullDisk = "not tried: \(error)"
                }
            } else if round == freeRound, diskFull, let card {
                card.empty()
                diskFull = false
                report.fullDisk += "freed at round \(round)"
            }
            if round == storeDownRound, let store {
                store.stop()
                report.uploads = "the store away at round \(round), "
            } else if round == storeUpRound, let store {
                try await store.start()
                report.uploads += await store.ready() ? "back at round \(round)" : "not back within 90 s"
            }
            if round == brokerDownRound, let broker {
                broker.stop()
                brokerDown = true
                report.mqtt = "the broker away at round \(round), "
            } else if round == brokerUpRound, let broker {
                try await broker.start()
                brokerDown = false
                brokerBackAt = .now
                report.mqtt += "back at round \(round)"
            }
            if rng.next() % 6 == 0 {
                // A short stall: under the limits (2 s), so nothing may fail for it.
                cam.stall(for: .milliseconds(900))
                report.stalls += 1
            }
            // Its captures from where the client is, their frames coming as they are asked for
            // (a hold of its own there would hold them back too, and holding until the session
            // has them waits on the writer, which may wait on others' frames).
            cam.setFrameHold(client, at: nil)
            for _ in 0..<(1 + Int(rng.next() % 2)) {
                let (kind, json) = asks[Int(rng.next() % UInt64(asks.count))]
                switch kind {
                case "ev": report.evBrackets += 1
                case "manual": report.manualBrackets += 1
                default: report.photos += 1
                }
                // (Drawn whether or not Mosquitto is here: the seed decides the rest of the run alike.)
                let mqttDraw = rng.next() % 3 == 0
                let overMQTT = asker != nil && mqttDraw
                if overMQTT, brokerDown { report.mqttAskedWhileDown += 1 }
                if overMQTT, !brokerDown, let asker, let link {
                    // The same body as a command to the node, its reply awaited (the node and the
                    // asker reconnected first, after the broker's return).
                    mqttAsks += 1
                    let id = "soak-\(mqttAsks)"
                    let command = "{\"id\": \"\(id)\", \"command\": \"capture\", " + json.dropFirst()
                    let answer: [String: Any]
                    do {
                        // The camera's clock held where the asker is until the node has the
                        // capture under way: the broker's trip takes wall time, which in virtual
                        // time would let the camera run on to the next slot meanwhile.
                        let before = await session.capturesInProgress
                        cam.setFrameHold(client, at: cam.now)
                        answer = try await Self.ask(asker, link, command, id: id, replies: replies,
                                                    started: { !(await session.capturesInProgress.subtracting(before)).isEmpty },
                                                    lift: { cam.setFrameHold(client, at: nil) })
                    } catch {
                        report.capturesFailed.append("\(kind) over MQTT at slot \(done): \(error)")
                        continue
                    }
                    if let back = brokerBackAt {
                        report.mqttBackAfterSeconds = (ContinuousClock.now - back).secondsValue
                        brokerBackAt = nil
                    }
                    if answer["ok"] as? Bool == true {
                        report.mqttCaptures += 1
                        if fillRound >= 0, round > freeRound { report.capturesAfterFullDisk += 1 }
                    } else if diskFull, forSpace(answer["error"] as? String ?? "") {
                        report.refusedForSpace += 1
                    } else {
                        report.capturesFailed.append("\(kind) over MQTT at slot \(done)\(diskFull ? " (the disk full)" : ""): \(answer["error"] ?? answer)")
                    }
                    continue
                }
                do {
                    // What POST /api/capture does with the same body.
                    let ask = try JSONDecoder().decode(CameraService.CaptureRequest.self, from: Data(json.utf8))
                    let settings = try CameraService.settings(for: ask, now: service.camera.now, offset: TimelapseRun.wallOffset(await service.session.latestFrame))
                    _ = try await service.capture(settings)
                    if fillRound >= 0, round > freeRound { report.capturesAfterFullDisk += 1 }
                } catch let e as ShutterbugError where diskFull && e.code == .noSpace {
                    report.refusedForSpace += 1
                } catch let e as CameraService.NothingWritten where diskFull && e.noSpace {
                    report.refusedForSpace += 1
                } catch {
                    report.capturesFailed.append("\(kind) at slot \(done)\(diskFull ? " (the disk full)" : ""): \(error)")
                }
            }
        }
        // The jobs' end: their last slots, the clock moved on by the triggers' holds.
        cam.setFrameHold(client, at: nil)
        if diskFull, let card { card.empty(); report.fullDisk += "freed at the end" }
        let waitedFrom = ContinuousClock.now
        while true {
            let jobs = await service.jobStatuses()
            let ended = jobs.filter { $0.state == .finished || $0.state == .failed || $0.state == .stopped }
            if let s = ended.first(where: { $0.name == "roof" }), let g = ended.first(where: { $0.name == "garden" }) {
                (report.slotsTaken, report.slotsSkipped, report.slotsMissed, report.slotsFailed, report.jobMessage) = (s.taken, s.skipped, s.missed, s.failed, s.message)
                (report.manualTaken, report.manualSkipped, report.manualFailed, report.manualMissed, report.manualMessage) = (g.taken, g.skipped, g.failed, g.missed, g.message)
                if g.state == .failed { report.manualMissed += 1 }
                break
            }
            guard ContinuousClock.now - waitedFrom < .seconds(120) else {
                let j = await service.jobStatuses().first { $0.name == "roof" }
                throw ShutterbugError(.timeout, "the soak's job did not finish within 120 s of its last slot (the job \(j.map { "\($0.state), next slot \($0.nextSlot.map(String.init) ?? "-") at \($0.nextSlotAt ?? "-"), \($0.message ?? "")" } ?? "gone")); the camera: \(cam.clockState)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        for t in await service.triggerStatuses() { report.add(t.report) }
        // Trigger captures that failed for want of space while the disk was full are the
        // fault's; any other failure is the product's.
        let (space, other) = failures.withLock { f in (f.filter(forSpace), f.filter { !forSpace($0) }) }
        report.refusedForSpace += space.count
        report.triggerFailures -= space.filter { $0.hasPrefix("trigger") }.count
        report.capturesFailed += other.filter { $0.hasPrefix("trigger") }
        await link?.stop()
        await service.stopAll("the soak is over")
        await session.stop()
        if let store, let uploader {
            if storeUpRound > round {
                try await store.start()
                report.uploads += await store.ready() ? "back at the end" : "not back within 90 s"
            }
            // Everything sent, then journal, disk and bucket compared.
            if !(await uploader.drained(within: .seconds(180))) { report.uploadsFailed.append("not drained within 180 s: \(uploader.status())") }
            uploading?.cancel()
            await uploading?.value
            try await judgeUploads(&report, directory: directory, bucket: store.bucket)
        }
        (report.rssEndKB, report.fdsEnd) = Self.footprint()
        report.judgement = try SoakJudgement.judge(directory, jobFolders: ["roof", "garden"])
        report.wallSeconds = (ContinuousClock.now - began).secondsValue
        return report
    }
}

/// The replies to the soak's MQTT commands, by correlation.
final class SoakReplies: Sendable {
    let box = Mutex<[String: [UInt8]]>([:])
}

extension SoakScenario {
    /// Sends `command` to the node over the broker and returns its reply, once both ends are
    /// connected (at most 60 s) and the reply is in (at most 120 s).
    /// `started` says whether the node has the capture under way, and `lift` is then called
    /// (and in any case before this returns).
    static func ask(_ client: MQTTClient, _ link: FleetLink, _ command: String, id: String, replies: SoakReplies,
                    started: () async -> Bool, lift: () -> Void) async throws -> [String: Any] {
        defer { lift() }
        let clock = ContinuousClock()
        let connected = clock.now + .seconds(60)
        while !(client.status.connected && link.client.status.connected) {
            guard clock.now < connected else {
                throw ShutterbugError(.timeout, "MQTT: not connected within 60 s (the asker \(client.status.connected ? "connected" : "not connected: \(client.status.problem ?? "-")"), the node \(link.client.status.connected ? "connected" : "not connected: \(link.client.status.problem ?? "-")"))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        guard client.publish("shutterbug/soak/cmd", Array(command.utf8), qos: 1, responseTopic: "soak/replies", correlationData: Array(id.utf8)) else {
            throw ShutterbugError(.system, "MQTT: the command \(id) could not be queued")
        }
        let answered = clock.now + .seconds(120)
        var lifted = false
        while true {
            if !lifted, await started() {
                lift()
                lifted = true
            }
            if let payload = replies.box.withLock({ $0.removeValue(forKey: id) }) {
                return (try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any]) ?? ["ok": false, "error": "a reply that is not a JSON object: \(String(decoding: payload, as: UTF8.self))"]
            }
            guard clock.now < answered else { throw ShutterbugError(.timeout, "MQTT: no reply to \(id) within 120 s (\(command))") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Journal == disk == bucket: every capture file on disk queued, uploaded and in the bucket
    /// at its size; every object in the bucket one the journal uploaded (once: keys are one a
    /// file); every failure said.
    func judgeUploads(_ report: inout Report, directory: String, bucket: S3Bucket) async throws {
        let entries = try UploadJournal(folder: directory).entries()
        report.uploadsQueued = entries.count
        report.uploadsDone = entries.filter { $0.state == .uploaded }.count
        report.uploadsFailed += entries.filter { $0.state == .failed }.map { "\($0.path): \($0.error ?? "-")" }
        let byPath = Dictionary(entries.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        let objects = Dictionary(try await bucket.list().map { ($0.key, $0.bytes) }, uniquingKeysWith: { a, _ in a })
        let fm = FileManager.default
        let root = (directory as NSString).standardizingPath
        if let walk = fm.enumerator(atPath: root) {
            while let f = walk.nextObject() as? String {
                let name = (f as NSString).lastPathComponent
                guard !name.hasPrefix("."), !f.contains("/."), [".jpg", ".dng", ".json"].contains(where: name.hasSuffix),
                      !name.hasPrefix("keogram"), !name.hasPrefix("contact-sheet") else { continue }
                let path = root + "/" + f
                let size = (try? fm.attributesOfItem(atPath: path)[.size] as? Int64) ?? -1
                guard let e = byPath[path] else { report.notUploaded.append("\(f): never queued"); continue }
                guard e.state == .uploaded, objects[e.key] == size else {
                    report.notUploaded.append("\(f): \(e.state), the bucket holds \(objects[e.key].map { "\($0) bytes" } ?? "nothing") of \(size)")
                    continue
                }
            }
        }
        let uploadedKeys = Set(entries.filter { $0.state == .uploaded }.map(\.key))
        report.bucketStrays = objects.keys.filter { !uploadedKeys.contains($0) }.sorted()
    }
}

/// The soak's card: a tmpfs of its own mounted on the soak's directory (as root), so filling it
/// to the last byte fills nothing else. `problem` says why there is none.
final class SoakCard: Sendable {
    let path: String
    let problem: String?
    private var filler: String { path + "/.soak-filler" }

    init(_ path: String) {
        self.path = path
        guard getuid() == 0 else {
            problem = "filling a disk needs a tmpfs of the soak's own, which needs root"
            return
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/mount")
        p.arguments = ["-t", "tmpfs", "-o", "size=512m", "sb-soak-card", path]
        let err = Pipe()
        p.standardError = err
        do {
            try p.run()
            p.waitUntilExit()
            problem = p.terminationStatus == 0 ? nil
                : "mount -t tmpfs on \(path) failed: \(String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))"
        } catch {
            problem = "cannot run mount: \(error)"
        }
    }

    /// Takes every free byte; returns how many.
    func fill() throws -> Int64 {
        var st = statvfs()
        guard statvfs(path, &st) == 0 else { throw ShutterbugError(.system, "statvfs \(path)", errno: errno) }
        let free = Int64(st.f_bavail) * Int64(st.f_frsize)
        let fd = open(filler, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ShutterbugError(.system, "cannot create \(filler)", errno: errno) }
        defer { close(fd) }
        let r = posix_fallocate(fd, 0, off_t(free))
        guard r == 0 || r == ENOSPC else { throw ShutterbugError(.system, "cannot fill \(path)", errno: r) }
        // Whatever fallocate left, written until not a byte more fits.
        _ = lseek(fd, 0, SEEK_END)
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var size = chunk.count
        while size > 0 {
            if chunk.withUnsafeMutableBytes({ write(fd, $0.baseAddress, size) }) <= 0 { size /= 16 }
        }
        chunk.removeAll()
        return free
    }

    func empty() { unlink(filler) }

    func unmount() {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/umount")
        p.arguments = ["-l", path]
        try? p.run()
        p.waitUntilExit()
    }
}
