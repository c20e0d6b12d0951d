import Capture
import CaptureScheduler
import ImageOutput
import Jobs
import Journal
import ShutterbugCore
import Synchronization
import Systemd
import Timelapse

#if canImport(Glibc)
import Glibc
#endif

/// What `shutterbug timelapse` makes of its job's events: a line (or a JSON object) per slot
/// and a summary on standard output, notices on standard error, a status line under the slot
/// lines on a terminal, and under systemd (Type=notify) readiness, a status per slot and the
/// watchdog, pinged only while frames keep coming or the camera is stopped on purpose.
struct TimelapsePrinter: Sendable {
    let json: Bool
    let spec: TimelapseJobSpec
    let directory: OutputDirectory
    /// On a terminal: a status line under the slot lines, rewritten as the job waits.
    let live: Bool
    let notifier = SystemdNotifier.fromProcessEnvironment()

    init(json: Bool, spec: TimelapseJobSpec, directory: OutputDirectory) {
        self.json = json
        self.spec = spec
        self.directory = directory
        live = !json && isatty(1) != 0 && isatty(2) != 0
    }

    var job: String { spec.name }

    /// Prints the events until the job ends; returns its summary (nil if it ended without one).
    @discardableResult
    func run(_ events: AsyncStream<TimelapseJob.Event>) async -> TimelapseJob.Summary? {
        var finished: TimelapseJob.Summary?
        let feed = WatchdogFeed()
        var watchdog: Task<Void, Never>?
        var total: Int?
        defer {
            watchdog?.cancel()
            clearStatus()
        }
        for await event in events {
            switch event {
            case .notice(let line):
                clearStatus()
                notice(line)
            case .camera(.streaming(let session, _, _)):
                feed.update(session)
            case .camera(.idle):
                feed.idle(true)
            case .camera(.starting):
                // From here no frame is a sign of trouble again: a camera that cannot be
                // started lets the watchdog lapse.
                feed.idle(false)
            case .started(let s):
                total = s.total
                notifier?.ready(status: "timelapse '\(job)' streaming on \(s.camera); first slot \(s.firstSlotWall)")
                watchdog = notifier?.watchdogInterval.map { interval in
                    Task { [notifier] in
                        var last: UInt32?
                        while !Task.isCancelled {
                            try? await Task.sleep(for: interval / 2)
                            let (current, idle) = feed.state
                            let newest = await current?.latestFrame?.sequence
                            if idle || (newest != nil && newest != last) { notifier?.watchdog() }
                            last = newest
                        }
                    }
                }
                if !json { started(s) }
            case .waiting(let w):
                status(w)
            case .slot(let r, let progress):
                clearStatus()
                report(r)
                // A status per slot, taken or not (a skipped or missed slot says why), so
                // `systemctl status` shows where the job is even while the camera is away.
                let what = r.settings.map { "\($0.exposure.exposureDescription) gain \(String(format2: $0.gain))" } ?? r.reason ?? "no frame"
                notifier?.status("slot \(r.index)\(total.map { "/\($0)" } ?? "") \(r.state.rawValue) at \(r.wall); \(what); \(progress.counts[.taken] ?? 0) taken this run")
            case .pictures(let k, let c, let asked):
                if asked {
                    clearStatus()
                    notice("SIGUSR1: " + ([k, c].compactMap { $0 }.joined(separator: " and ").nilIfEmpty ?? "nothing") + " written")
                }
            case .finished(let s):
                clearStatus()
                notifier?.stopping(status: "timelapse '\(job)' stopping: \(s.stoppedBy)")
                summary(s)
                finished = s
            }
        }
        return finished
    }

    private func started(_ s: TimelapseJob.Started) {
        let r = s.resume
        let resumed = r.lastSlot.map { " (resuming after slot \($0): \(r.taken) taken, \(r.skipped) not)" } ?? ""
        let slots = s.plan.times.map { "at \($0.count) listed times" } ?? "every \(s.plan.interval.millisecondsDescription)"
        let steps = spec.manual.map { "exposures \($0.map { $0.exposure.exposureDescription }.joined(separator: ",")) gain \(String(format2: $0.first?.gain ?? 1))" }
            ?? "EV \(spec.biases.map { String(format2: $0) }.joined(separator: ","))"
        Swift.print("timelapse '\(job)' on \(s.camera): \(slots), \(s.total.map { "\($0) slots" } ?? "until stopped"), \(steps), first slot \(s.firstSlotWall)\(resumed)")
        fflush(nil)
    }

    /// The status line under the slot lines, on a terminal.
    private func status(_ w: TimelapseJob.Waiting) {
        guard live else { return }
        let free = (try? directory.freeBytes()).map { TimelapseCommand.bytes($0) + " free" } ?? "free space unknown"
        let left = w.remaining.map { TimelapseCommand.span($0) + " to go" } ?? "until stopped"
        var line = "\r\u{1B}[Kslot \(w.slot)\(w.total.map { "/\($0)" } ?? "") · next in \(TimelapseCommand.span(w.wait)) · \(w.settings.exposure.exposureDescription) gain \(String(format2: w.settings.gain)) · \(w.phase) · \(free) · \(left)"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    private func clearStatus() {
        guard live else { return }
        var clear = "\r\u{1B}[K"
        clear.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    private func summary(_ s: TimelapseJob.Summary) {
        let (counts, all) = (s.counts, s.journalCounts)
        let dist = s.scheduleError
        defer { fflush(nil) }
        if json {
            Swift.print(CaptureReport.jsonText(TimelapseSummaryReport(s)))
            return
        }
        Swift.print("stopped by \(s.stoppedBy): this run \(counts[.taken] ?? 0) taken, \(counts[.skipped] ?? 0) skipped, \(counts[.missed] ?? 0) missed, \(counts[.failed] ?? 0) failed; the job in all \(all[.taken] ?? 0) taken, \(all[.skipped] ?? 0) skipped, \(all[.missed] ?? 0) missed, \(all[.failed] ?? 0) failed")
        if let dist {
            Swift.print("  slot to exposure start: p50 \(dist.p50.preciseDescription), p99 \(dist.p99.preciseDescription), max \(dist.max.preciseDescription) over \(dist.count) \(s.phaseLocked ? "(phase-locked)" : "(not phase-locked: up to a frame period)")")
        }
        Swift.print("  journal \(s.journalPath): integrity \(s.journalIntegrity)")
        if s.slotsDeletedByRetention > 0 { Swift.print("  retention deleted the files of \(s.slotsDeletedByRetention) slot\(s.slotsDeletedByRetention == 1 ? "" : "s"); the job keeps \(TimelapseCommand.bytes(s.bytesKept))") }
        if s.cameraReopened > 0 { Swift.print("  the camera was opened again \(s.cameraReopened) time\(s.cameraReopened == 1 ? "" : "s") after failing") }
        if s.cameraStoppedWhileIdle > 0 { Swift.print("  the camera was stopped between slots \(s.cameraStoppedWhileIdle) time\(s.cameraStoppedWhileIdle == 1 ? "" : "s"); its start-up took at most \(s.slowestStartup.millisecondsDescription)") }
        if let k = s.keogram { Swift.print("  keogram: \(k)") }
        if let c = s.contactSheet { Swift.print("  contact sheet: \(c)") }
    }

    func report(_ r: TimelapseRun.SlotResult) {
        defer { fflush(nil) }
        if json {
            // One line per slot as it happens, also into a pipe (a service, a log).
            Swift.print(CaptureReport.jsonText(SlotReport(r)))
            return
        }
        let (k, wall, state, reason, instant, start, frames, decision) = (r.index, r.wall, r.state, r.reason, r.instant, r.start, r.frames, r.decision)
        guard state == .taken || state == .failed else {
            Swift.print("slot \(k) (\(wall)): \(state.rawValue), \(reason ?? "")")
            return
        }
        let err = zip([instant], [start]).compactMap { i, s in i.flatMap { i in s.map { ($0 - i).preciseDescription } } }.first ?? "-"
        let exp = frames.compactMap { $0.metadata.exposureTime?.exposureDescription }.joined(separator: ",")
        let ramp = decision.map { " | \($0.phase), metered \(String(format2: $0.metered * 100))%, step \(String(format2: $0.stepEV)) EV (\($0.note)) → next \($0.to.exposure.exposureDescription) gain \(String(format2: $0.to.gain))" } ?? ""
        Swift.print("slot \(k) (\(wall)): \(state.rawValue)\(reason.map { " (\($0))" } ?? ""), frames \(frames.map { String($0.metadata.sequence) }.joined(separator: ",")), \(exp), error \(err)\(ramp)")
    }
}

/// What the watchdog looks at: the session running now, and whether the camera is stopped on
/// purpose (between slots), when no frame is no sign of a hang.
final class WatchdogFeed: Sendable {
    private let value = Mutex<(CaptureSession?, Bool)>((nil, false))
    var state: (session: CaptureSession?, idle: Bool) { value.withLock { ($0.0, $0.1) } }
    /// A new session (the camera opened again): no longer idle.
    func update(_ session: CaptureSession) { value.withLock { $0 = (session, false) } }
    func idle(_ on: Bool) { value.withLock { $0.1 = on } }
}

extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
