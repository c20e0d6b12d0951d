import Capture
import CaptureScheduler
import Fleet
import Foundation
import Jobs
import Server
import ShutterbugCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The service's camera as a fleet node: its state document, its jobs, and the commands carried
/// out on it (a photo or a bracket now, or exposed from a wall instant; a job paused, resumed or
/// stopped; the configuration read again).
public struct CameraNode: FleetNodeService {
    public let service: CameraService
    /// Reads the configuration again, as SIGHUP does (nil: the service has none).
    public let reload: (@Sendable () async throws -> CameraService.Reload)?
    public let clock: ClockSyncReader
    /// A capture at a wall instant is refused while the clock is not synchronised (false: a
    /// single node, or nodes sharing one machine's clock).
    public let requireSync: Bool
    /// Refuse a capture at an instant when the clock's error bound is larger (nil: any bound).
    public let maxClockError: Duration?
    /// The files a capture over MQTT writes.
    public let formats: [String]

    public init(service: CameraService, reload: (@Sendable () async throws -> CameraService.Reload)?, clock: ClockSyncReader = ClockSyncReader(),
                requireSync: Bool = true, maxClockError: Duration? = nil, formats: [String] = ["jpeg"]) {
        (self.service, self.reload, self.clock, self.requireSync, self.maxClockError, self.formats) = (service, reload, clock, requireSync, maxClockError, formats)
    }

    /// The state document Home Assistant's entities read (`value_json.frame.lux`, …): a key
    /// whose value is not known is null, not absent.
    public func fleetState() async -> JSONValue {
        let s = await service.status()
        func n(_ v: Double?) -> JSONValue { v.map { .number($0) } ?? .null }
        // The newest slot of any job: its error from the slot's instant to its exposure start.
        let newestSlot = s.jobs.compactMap(\.lastSlot).max { $0.wall < $1.wall }
        let sync = await clock.read()
        return .object([
            "camera": .string(s.camera), "model": .string(s.model), "streaming": .bool(s.streaming), "problem": s.problem.map(JSONValue.string) ?? .null,
            "frame": .object(["sequence": n(s.newestFrame.map(Double.init)), "exposureUs": n(s.exposureUs), "gain": n(s.analogueGain), "lux": n(s.lux),
                              "sensorTemperature": n(s.sensorTemperatureC)]),
            "disk": .object(["path": .string(s.output), "freeBytes": n(s.diskFreeBytes.map(Double.init)), "bytesWritten": .number(Double(s.bytesWritten))]),
            "capturesTaken": .number(Double(s.capturesTaken)), "captureFailures": .number(Double(s.captureFailures)),
            "jobs": .object(Dictionary(s.jobs.map { ($0.name, JSONValue.string($0.state.rawValue)) }, uniquingKeysWith: { a, _ in a })),
            "triggers": .object(Dictionary(s.triggers.map { ($0.name, JSONValue.string($0.state.rawValue)) }, uniquingKeysWith: { a, _ in a })),
            "lastSlotErrorUs": n(newestSlot?.scheduleErrorUs), "lastSlotState": newestSlot.map { .string($0.state) } ?? .null,
            "clock": (try? JSONValue(encoding: sync)) ?? .null,
            // The upload queue, where the service sends its files to object storage.
            "uploads": s.uploads.map { u in .object(["waiting": .number(Double(u.waiting)), "waitingBytes": .number(Double(u.waitingBytes)),
                                                     "oldestWaitingSeconds": n(u.oldestWaitingSeconds), "uploaded": .number(Double(u.uploaded)),
                                                     "failed": .number(Double(u.failed)), "lastError": u.lastError.map(JSONValue.string) ?? .null]) } ?? .null,
        ])
    }

    public func fleetJobs() async -> [String] {
        await service.jobStatuses().filter { !$0.isOver }.map(\.name)
    }

    public func perform(_ command: FleetCommand) async throws -> JSONValue {
        switch command.action {
        case .capture(let at?, let ev, let exposures, let gain):
            return try await capture(at: at, ev: ev, exposuresUs: exposures, gain: gain)
        case .capture(nil, let ev, let exposures, let gain):
            let settings = try CameraService.settings(for: .init(ev: ev, exposuresUs: exposures, gain: gain, formats: formats))
            return try await report(service.capture(settings), offset: TimelapseRun.wallOffset(await service.session.latestFrame), instant: nil, sync: nil)
        case .pause(let job): return try JSONValue(encoding: await service.control(job: job, .pause))
        case .resume(let job): return try JSONValue(encoding: await service.control(job: job, .resume))
        case .stop(let job): return try JSONValue(encoding: await service.control(job: job, .stop))
        case .reload:
            guard let reload else { throw ShutterbugError(.unsupported, "the service was started without --config: there is no configuration to reload") }
            return try JSONValue(encoding: try await reload())
        case .status:
            return await fleetState()
        }
    }

    /// The notice a node needs for a capture at an instant: the command's way over the network,
    /// and the phase lock's planning, some 25 frames of the slower of the frame period and the
    /// first exposure (as a timelapse slot's lock is queued ahead of its instant).
    public static func lead(framePeriod: Duration, firstExposure: Duration) -> Duration {
        max(framePeriod, firstExposure + .milliseconds(40)) * 25 + .milliseconds(500)
    }

    /// A photo or bracket whose first exposure starts at `instant` in wall time: the instant on
    /// the camera's clock from the newest frame's wall clock, the capture queued the lock's lead
    /// before it, the frames before it planned so that the first step's exposure begins at it
    /// (`PhaseLock`), or not taken at all when it would begin more than a frame late (the
    /// camera busy with a slot or another capture then).
    func capture(at instant: WallClockTime, ev: [Double]?, exposuresUs: [Double]?, gain: Double?) async throws -> JSONValue {
        let session = service.session
        guard let newest = await session.latestFrame, let period = newest.frameDuration else {
            throw ShutterbugError(.invalidState, "the camera has delivered no frame yet: a capture at an instant needs its frame timing")
        }
        if await session.heldFramesCapacity > 0 {
            let offset = TimelapseRun.wallOffset(newest)
            if instant.nanoseconds <= (service.camera.now + offset).nanoseconds {
                // An instant just past on a node that holds its newest frames (a zero-shutter-lag
                // trigger in its configuration): the frame that was exposing then, as POST
                // /api/capture {"at"} gives (a bracket's step 1 from it where it carries the step).
                let settings = try CameraService.settings(for: .init(ev: ev, exposuresUs: exposuresUs, gain: gain, formats: formats, at: .camera(instant - offset)),
                                                          now: service.camera.now, offset: offset)
                return try report(await service.capture(settings), offset: offset, instant: instant, sync: await clock.read())
            }
        }
        let limits = service.camera.controlLimits
        guard limits.supported.isSuperset(of: [.exposureTime, .analogueGain]) else {
            throw ShutterbugError(.unsupported, "\(service.camera.info.id) has no exposure control (ExposureTime, AnalogueGain): it cannot take a capture at an instant")
        }
        // The bracket as manual exposures: the ones asked for, or the camera's current exposure
        // and gain (what its AE has settled on), biased by each EV.
        let steps: [(Duration, Gain)]
        if let exposuresUs {
            let g = gain ?? 1
            steps = exposuresUs.map { (Duration.nanoseconds(Int64($0 * 1000)), Gain(g)) }
        } else {
            guard let e = newest.exposureTime, let g = newest.analogueGain else {
                throw ShutterbugError(.invalidState, "the newest frame does not say its exposure and gain: give exposuresUs")
            }
            steps = (ev ?? [0]).map { (e * pow(2, $0), g) }
        }
        let offset = TimelapseRun.wallOffset(newest)
        let now = service.camera.now + offset
        let sync = await clock.read()
        let lead = Self.lead(framePeriod: period, firstExposure: steps[0].0)
        let target: SensorTime
        switch FleetCapturePlan.plan(at: instant, now: now, offset: offset, lead: lead, sync: sync, requireSync: requireSync, maxError: maxClockError) {
        case .failure(let refusal): throw ShutterbugError(.invalidState, refusal.description)
        case .success(let t): target = t
        }
        let settings = PhotoSettings(bracket: .manualExposure(steps), formats: try CameraService.settings(for: .init(formats: formats)).formats,
                                     exposedAfter: target, phaseLocked: limits.supported.contains(.frameDurationLimits),
                                     exposedBefore: target + period + .milliseconds(1))
        try await session.validate(settings)
        // Queued only the lead before the instant: a capture asked for meanwhile is not held.
        let wake = target - lead
        while service.camera.now < wake {
            try await Task.sleep(for: min(wake - service.camera.now, .milliseconds(200)))
        }
        let record = try await service.capture(settings)
        return try report(record, offset: offset, instant: instant, sync: sync, lineTime: await session.timing.lineTime)
    }

    /// A capture's reply: its record, its exposure start in wall time (and its error from the
    /// instant asked for), and the clock's synchronisation, which bounds what the spread shows.
    /// `lineTime`: the sensor mode's line, the bound `locked` is judged by (a coordinator's
    /// spread of locked nodes is within the slowest of theirs).
    func report(_ record: CameraService.CaptureRecord, offset: ClockOffset, instant: WallClockTime?, sync: ClockSync?, lineTime: Duration? = nil) throws -> JSONValue {
        var r = try JSONValue(encoding: record)
        guard case .object(var o) = r else { return r }
        o["report"] = nil
        // How the phase lock went: "locked: frame N exposed 9.5 µs after the instant", or why
        // not (a frame dropped where it was planned, the camera busy): the start is then up to
        // a frame period late, and `locked` says so.
        if instant != nil, let lock = record.report?.phaseLock {
            o["phaseLock"] = .string(lock)
            o["locked"] = .bool(lock.hasPrefix("locked:"))
            if let lineTime { o["lineTimeNs"] = .integer(lineTime.nanosecondsValue) }
        }
        if let start = record.exposureStartNs {
            let wall = SensorTime(nanoseconds: start) + offset
            o["exposureStartWall"] = .string(wall.description)
            o["exposureStartWallNs"] = .integer(wall.nanoseconds)
            if let instant { o["errorUs"] = .number(Double(wall.nanoseconds - instant.nanoseconds) / 1000) }
        }
        if let instant { o["at"] = .string(instant.description) }
        if let sync { o["clock"] = try JSONValue(encoding: sync) }
        r = .object(o)
        return r
    }
}

/// The clock's synchronisation as the system says it: `chronyc -c tracking` where chrony runs,
/// else `timedatectl show` (systemd-timesyncd), read at most every 10 s.
public final class ClockSyncReader: Sendable {
    private let cached = Mutex<(ContinuousClock.Instant, ClockSync)?>(nil)
    private let fixed: ClockSync?

    /// `fixed`: a known state instead of the system's (tests).
    public init(fixed: ClockSync? = nil) { self.fixed = fixed }

    public func read() async -> ClockSync {
        if let fixed { return fixed }
        if let (at, sync) = cached.withLock({ $0 }), ContinuousClock.now - at < .seconds(10) { return sync }
        let sync = await Task.detached { Self.system() }.value
        cached.withLock { $0 = (.now, sync) }
        return sync
    }

    static func system() -> ClockSync {
        for dir in ["/usr/bin", "/bin", "/usr/sbin"] where FileManager.default.isExecutableFile(atPath: dir + "/chronyc") {
            if let out = run(dir + "/chronyc", ["-c", "tracking"]) {
                return (try? ClockSync.chrony(tracking: out)) ?? ClockSync(source: .chrony, synchronised: false, note: "chronyc -c tracking printed '\(out.prefix(120))'")
            }
        }
        for dir in ["/usr/bin", "/bin"] where FileManager.default.isExecutableFile(atPath: dir + "/timedatectl") {
            if let out = run(dir + "/timedatectl", ["show"]), out.contains("NTPSynchronized=") { return ClockSync.timesyncd(show: out) }
        }
        return .unknown
    }

    /// A program's output, or nil when it cannot be run, fails, or takes more than 2 s (then
    /// it is killed). posix_spawn and waitpid, not Foundation's Process, whose wait for the
    /// child's end goes through a run-loop socket and never returned where loopback was down.
    static func run(_ path: String, _ args: [String]) -> String? {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer { close(fds[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // The child starts with no signal blocked, whatever this process blocks.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let argv = ([path] + args).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        close(fds[1])
        guard spawned == 0 else { return nil }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            var p = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            let left = max(1, Int32((deadline - ContinuousClock.now).components.seconds * 1000 + (deadline - ContinuousClock.now).components.attoseconds / 1_000_000_000_000_000))
            guard poll(&p, 1, left) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fds[0], $0.baseAddress, $0.count) }
            if n <= 0 { break }
            output += buffer[0..<n]
            if output.count > 1 << 16 { break }
        }
        // Its end, until the deadline (its output closed a moment before it exits).
        var status: Int32 = 0
        var ended = false
        while !ended {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid { ended = true } else if r < 0 || ContinuousClock.now >= deadline { break } else { usleep(2000) }
        }
        if !ended {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
            return nil
        }
        // Exited normally with 0 (WIFEXITED and WEXITSTATUS, by hand: they are macros).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0, !output.isEmpty else { return nil }
        return String(decoding: output, as: UTF8.self)
    }
}
