import Capture
import ImageOutput
import Journal
import Jobs
import ShutterbugCore

/// The service's timelapse jobs and triggers: started from the configuration, created and
/// controlled over the API, brought in line with the configuration on a reload, stopped (each
/// finishing what it is capturing) when the service stops.
extension CameraService {
    /// What a configuration declares beside the service's own options.
    public struct Declared: Sendable {
        public var jobs: [JobDefinition]
        public var triggers: [TriggerDefinition]
        public init(jobs: [JobDefinition] = [], triggers: [TriggerDefinition] = []) {
            self.jobs = jobs
            self.triggers = triggers
        }
    }

    /// What a reload did.
    public struct Reload: Sendable, Codable {
        /// Running as they were (their definitions unchanged).
        public var kept: [String] = []
        public var started: [String] = []
        /// Stopped and started again with a changed definition.
        public var restarted: [String] = []
        /// No longer declared.
        public var stopped: [String] = []
        /// Changes not made, with the reason (what they would have changed runs on as it was).
        public var refused: [String] = []
        /// Options that take effect only when the service is started again.
        public var needsRestart: [String] = []
    }

    /// Starts what the configuration declares and brings what runs in line with it: unchanged
    /// jobs and triggers keep running (a job's slot is never interrupted), changed ones are
    /// stopped (after the slot or capture in progress) and started again, those no longer
    /// declared are stopped. Jobs created over the API are left alone.
    @discardableResult
    public func apply(_ d: Declared) async -> Reload {
        var r = Reload()
        var wanted = Dictionary(d.jobs.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        // A job's journal keeps the settings it was begun with: a running job whose bracket or
        // schedule changed under the same name would be stopped and then refused by its own
        // journal. It runs on as it was, and the reload says why.
        var refusedJobs: Set<String> = []
        for job in jobs where configuredJobs.contains(job.definition.name) && !job.status.isOver {
            let name = job.definition.name
            guard let w = wanted[name], w.arguments != job.definition.arguments,
                  !TimelapseJournal.sameSpec(job.definition.spec.journalSpec, w.spec.journalSpec) else { continue }
            refusedJobs.insert(name)
            wanted[name] = job.definition
            r.refused.append("job \(name): its settings changed (\(job.definition.spec.journalSpec) → \(w.spec.journalSpec)), and its journal resumes a job only with the settings it began with; it runs on unchanged. Give the changed job a new name (a new journal), or stop it and remove its folder's journal first")
        }
        for job in jobs where configuredJobs.contains(job.definition.name) && !job.status.isOver {
            let name = job.definition.name
            if let w = wanted[name], w.arguments == job.definition.arguments { continue }
            job.stop(wanted[name] == nil ? "no longer in the configuration" : "its definition changed")
            await job.wait()
            if wanted[name] == nil { r.stopped.append("job \(name)") }
        }
        for def in d.jobs where !refusedJobs.contains(def.name) {
            let current = jobs.first { $0.definition.name == def.name }
            if let current, !current.status.isOver {
                if current.definition.arguments == def.arguments { r.kept.append("job \(def.name)") }
                continue
            }
            let wasConfigured = configuredJobs.contains(def.name)
            let changed = current.map { $0.definition.arguments != def.arguments && wasConfigured } ?? false
            // A job that ended is started again when it is new to the configuration (never in
            // it, or taken out by an earlier reload and now back) or its definition changed; a
            // configured job stopped over the API stays stopped, one whose schedule ended too.
            if current != nil && wasConfigured && !changed { r.kept.append("job \(def.name)"); continue }
            startJob(def)
            configuredJobs.insert(def.name)
            if changed { r.restarted.append("job \(def.name)") } else { r.started.append("job \(def.name)") }
        }
        configuredJobs.formIntersection(wanted.keys)

        let wantedTriggers = Dictionary(d.triggers.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var keptTriggers: [ServiceTrigger] = []
        for t in triggers {
            let name = t.definition.name
            if let w = wantedTriggers[name], w.arguments == t.definition.arguments, t.status.state != .stopped, t.status.state != .failed {
                keptTriggers.append(t)
                r.kept.append("trigger \(name)")
                continue
            }
            t.stop(wantedTriggers[name] == nil ? "no longer in the configuration" : "its definition changed")
            await t.wait()
            if wantedTriggers[name] == nil { r.stopped.append("trigger \(name)") }
        }
        triggers = keptTriggers
        for def in d.triggers where !keptTriggers.contains(where: { $0.definition.name == def.name }) {
            let t = ServiceTrigger(def)
            triggers.append(t)
            t.task.withLock { $0 = Task { await t.run(self) } }
            if declared.triggers.contains(where: { $0.name == def.name }) { r.restarted.append("trigger \(def.name)") } else { r.started.append("trigger \(def.name)") }
        }
        declared = d
        return r
    }

    private func startJob(_ def: JobDefinition) {
        jobs.removeAll { $0.definition.name == def.name }
        let context = JobContext(session: session, camera: camera, streams: writer.streams, cameraDescription: writer.camera, output: directory,
                                 metrics: metrics, logger: logger, observe: { [weak self] e in self?.observeJob(e) }, events: events)
        let job = ServiceJob(def, context: context)
        jobs.append(job)
        job.task.withLock { $0 = Task { await job.run() } }
    }

    /// Starts a job asked for over the API.
    ///
    /// - Throws: `busy` when a job of that name is running (stop it first).
    public func createJob(_ def: JobDefinition) async throws -> JobStatus {
        if let current = jobs.first(where: { $0.definition.name == def.name }), !current.status.isOver {
            throw ShutterbugError(.busy, "a job named '\(def.name)' is \(current.status.state.rawValue); stop it first or choose another name")
        }
        try await Self.checkSteps(def.spec.biases.count, session: session, what: "the job's bracket")
        try await TimelapseRun.check(def.spec, on: session)
        startJob(def)
        configuredJobs.remove(def.name)
        return jobs.last!.status
    }

    public func jobStatuses() -> [JobStatus] { jobs.map(\.status) }

    /// Waits until the job of that name has ended (at once for none).
    public func waitForJob(named name: String) async {
        await jobs.first { $0.definition.name == name }?.wait()
    }

    public func job(named name: String) -> JobStatus? { jobs.first { $0.definition.name == name }?.status }

    /// Refuses a bracket longer than the session prepared buffers for, before any slot or
    /// trigger would fail on it.
    static func checkSteps(_ steps: Int, session: CaptureSession, what: String) async throws {
        let most = await session.maxBracketedCapturePhotoCount
        guard steps <= most else {
            throw ShutterbugError(.invalidArgument, "\(what) has \(steps) steps; the service's camera takes brackets of 1 to \(most)")
        }
    }

    /// No job of that name (404 over the API).
    public static let noSuchJob = ShutterbugError.Code("no such job")

    public enum JobAction: String, Sendable, CaseIterable { case pause, resume, stop }

    /// Pauses, resumes or stops a job.
    ///
    /// - Throws: `notFound` for no such job, `invalidState` for a job that is over.
    public func control(job name: String, _ action: JobAction) async throws -> JobStatus {
        guard let job = jobs.first(where: { $0.definition.name == name }) else {
            throw ShutterbugError(Self.noSuchJob, "no job named '\(name)'; the jobs are: \(jobs.map(\.definition.name).joined(separator: ", "))")
        }
        guard !job.status.isOver, !(action == .stop && job.status.state == .stopping) else {
            throw ShutterbugError(.invalidState, "job '\(name)' is \(job.status.state.rawValue) already")
        }
        let wall = camera.now + TimelapseRun.wallOffset(await session.latestFrame)
        switch action {
        case .pause: job.setPaused(true, now: wall)
        case .resume: job.setPaused(false, now: wall)
        case .stop: job.stop("stopped over the API")
        }
        return job.status
    }

    public func triggerStatuses() -> [TriggerStatus] { triggers.map(\.status) }

    /// One line for systemd's STATUS=: the jobs, the triggers, the captures.
    public func summary(serving url: String) -> String {
        var parts = ["serving \(camera.info.id) at \(url)"]
        let running = jobs.map(\.status).filter { !$0.isOver }
        if !running.isEmpty {
            parts.append(running.map { j in "\(j.name) \(j.state == .paused ? "paused" : "slot \(j.nextSlot.map(String.init) ?? "-")\(j.total.map { "/\($0)" } ?? "")")" }.joined(separator: ", "))
        }
        let t = triggers.map(\.status)
        if !t.isEmpty { parts.append("\(t.count) trigger\(t.count == 1 ? "" : "s"), \(t.map(\.report.captured).reduce(0, +)) captured") }
        parts.append("\(capturesTaken) captures over the API")
        return parts.joined(separator: "; ")
    }

    /// Stops every job and trigger and waits for them: a slot or capture in progress completes
    /// and is journalled first.
    public func stopAll(_ why: String) async {
        for t in triggers { t.stop(why) }
        for j in jobs where !j.status.isOver { j.stop(why) }
        for t in triggers { await t.wait() }
        for j in jobs { await j.wait() }
    }
}
