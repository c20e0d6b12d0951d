import ArgumentParser
import CSystemShims
import Capture
import CaptureScheduler
import ImageOutput
import JobOptions
import Jobs
import Journal
import ProcessTriggers
import ShutterbugCore
import SimulatedCamera
import Synchronization
import Systemd
import Timelapse
import Upload
import Logging

#if canImport(Glibc)
import Glibc
#endif

struct TimelapseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timelapse",
        abstract: "Photos or brackets on an absolute schedule, the exposure ramped from day to night, every slot journalled; run it again to resume.",
        discussion: """
            Slots fall on a grid aligned to wall time (a 30 s interval shoots at :00 and :30) \
            and are waited for on CLOCK_MONOTONIC with the camera streaming. Each slot's \
            exposure is phase-locked: the frames before it are planned (one of them \
            stretched) so that the first step's exposure begins at the slot's instant within \
            a line time, and the JSON says how each lock went. A slot more than \
            min(interval/2, 1 s) late is skipped and recorded, never fired late; a wall-clock \
            step forward skips the slots it passes, one back never repeats a slot. The \
            exposure is ramped in software: each slot's 0 EV frame is metered and the next \
            slot's exposure moves towards the target, damped, at most --ramp-step EV per slot, \
            exposure time first then gain, darker at night by --night-offset. Everything goes \
            into a SQLite journal (OUTPUT/timelapse.sqlite): the same command again continues \
            the job, numbering, ramp and all, and records the slots missed meanwhile.
            """)

    @OptionGroup var camera: CameraOptions

    @Option(name: .long, help: ArgumentHelp("Read the job's options from a YAML file whose keys are these options' long names (interval: 30s, ev: [-2, 0, 2], output: DIR); options on the command line override the file's. `shutterbug config check FILE` lists its mistakes.", valueName: "file"))
    var jobFile: String?
    /// The job's own options (also a job file's, and a service job's).
    @OptionGroup var options: TimelapseJobOptions

    @Option(name: .long, help: ArgumentHelp("Where the photos, sidecars and the journal go.", valueName: "dir"))
    var output: String

    @OptionGroup(title: "Upload (S3-compatible object storage)") var upload: UploadOptions

    @Option(name: .long, help: ArgumentHelp("With DNG: the raw stream's size, which picks the sensor mode on a Pi (e.g. 4056x3040 for the HQ camera's full-resolution mode); default the mode the processed stream runs in alone.", valueName: "WxH"))
    var rawSize: String?

    @Option(name: .long, help: ArgumentHelp("The job's name in the journal: the same name resumes it.", valueName: "name"))
    var job: String = Self.defaultJob
    static let defaultJob = TimelapseJobOptions.defaultJob

    @Option(name: .long, help: ArgumentHelp("File names under --output: tokens {date} {time} {capture} {id} {step} {steps} {camera}; '/' makes folders.", valueName: "template"))
    var name: String = FileNameTemplate.default.pattern

    @Option(name: .long, help: ArgumentHelp("The processed stream's size (the sensor mode follows), e.g. 1332x990; default the sensor's full size.", valueName: "WxH"))
    var size: String?

    @Flag(name: .long, help: "One JSON object per slot, then a summary object.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Stop the camera between slots when it would stand idle longer than this (10s...1d), to save power; it is started again its measured start-up time, and the lock's lead, before the next slot. 'never' keeps it streaming.", valueName: "period|never"))
    var stopCameraWhenIdle: String = "120s"

    func validate() throws {
        _ = try NumericInput.size(rawSize, "--raw-size", example: "2028x1520")
        if let size { _ = try Self.parseSize(size) }
        _ = try idleStop()
        guard !job.isEmpty, job.count <= 64, job.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }), !job.hasPrefix(".") else {
            throw ValidationError("--job must be a name of 1 to 64 letters, digits, '-', '_' or '.' (it names the job's keogram and contact sheet), not '\(job)'")
        }
        do { _ = try FileNameTemplate(validating: name) } catch let e as ShutterbugError { throw ValidationError("--name: \(e.message)") }
    }

    /// The job as `TimelapseJob` runs it.
    func jobSpec() throws -> TimelapseJobSpec { try options.jobSpec(job: job, template: name, camera: camera.camera) }

    func idleStop() throws -> Duration? {
        if stopCameraWhenIdle.lowercased() == "never" { return nil }
        return try NumericInput.period(stopCameraWhenIdle, "--stop-camera-when-idle", in: 10...86_400)
    }


    static func parseSize(_ text: String) throws -> (Int, Int) {
        let p = text.lowercased().split(separator: "x")
        guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), (16...16384).contains(w), (16...16384).contains(h) else {
            throw ValidationError("--size must be WIDTHxHEIGHT, 16...16384 each, e.g. 1332x990, not '\(text)'")
        }
        return (w, h)
    }


    func run() async throws {
        let spec = try jobSpec()
        var processed = StreamRequest(role: .still)
        if let size { (processed.width, processed.height) = try Self.parseSize(size) }
        let stream = processed
        let directory = try OutputDirectory(path: output, reserve: Int64(options.reserve) << 20)
        // The job's clock, which outlives each camera it opens: CLOCK_MONOTONIC, or in virtual
        // time a clock that moves with the frames and jumps over the job's idle waits.
        let virtualClock = camera.virtualTime ? VirtualCameraClock() : nil
        let jobClock: any CameraClock = virtualClock ?? MonotonicCameraClock.shared
        let (camera, formats, rawSize, biasCount) = (self.camera, spec.formats, self.rawSize, spec.biases.count)
        // The camera, its streams (the raw stream's mode chosen by the rule every command
        // shares) and what its files say of it: opened at the start, and again after a
        // failure or an idle stop.
        let open: @Sendable () async throws -> TimelapseJob.CameraLease = {
            // (A configuration the camera refuses ends the job, which says so as a usage error.)
            let rig = try await CaptureRig.open({ try camera.open(virtualClock: virtualClock) }, processed: stream,
                                                raw: formats.contains(.dng) ? .forDNG(rawSize: rawSize) : .none, bracketCount: biasCount,
                                                usageErrors: false, notice: { notice($0) })
            return .init(camera: rig.camera, session: rig.session, streams: rig.configuration.streams, description: rig.description)
        }
        let job = TimelapseJob(spec: spec, output: output, reserve: Int64(options.reserve) << 20, source: .owned(open: open, stopWhenIdle: try idleStop()),
                               clock: jobClock, lens: options.lens)
        let printer = TimelapsePrinter(json: json, spec: spec, directory: directory)

        // SIGINT and SIGTERM stop the job after the slot in progress; SIGUSR1 asks for the
        // keogram and contact sheet so far.
        let refresh = try SignalTriggerSource(signal: SIGUSR1, name: "SIGUSR1")
        let stops = try [SignalTriggerSource(signal: SIGINT, name: "SIGINT"), SignalTriggerSource(signal: SIGTERM, name: "SIGTERM")]
        let watchers = stops.map { s in Task { for await _ in s.triggers() { job.stop(s.name); return } } }
            + [Task { for await _ in refresh.triggers() { job.requestPictures() } }]
        defer {
            watchers.forEach { $0.cancel() }
            (stops + [refresh]).forEach { $0.stop() }
        }
        // Uploads: each slot's files queued in OUTPUT/uploads.sqlite as they are written and
        // sent meanwhile; at the end the queue is given two minutes to drain.
        let uploads = try CommandUploads(upload, output: output)
        defer { uploads?.cancel() }
        let printing = Task { await printer.run(job.events) }
        do {
            try await job.run()
            let summary = await printing.value
            await uploads?.finish()
            // A run that tried slots and took none (each failed, or was skipped: a full disk, a
            // camera too late) failed at its job: a script or service manager must not read it
            // as success. Slots missed while no run was going were never tried.
            if let s = summary, (s.counts[.taken] ?? 0) == 0 {
                let failed = s.counts[.failed] ?? 0, skipped = s.counts[.skipped] ?? 0
                if failed + skipped > 0 {
                    notice("no slot of this run was taken (\(failed) failed, \(skipped) skipped): exiting with status 1")
                    throw ExitCode(1)
                }
            }
        } catch let exit as ExitCode {
            throw exit
        } catch {
            _ = await printing.value
            switch error {
            case let e as ShutterbugError where e.code == .busy || e.code == .invalidArgument:
                // Said before the first slot (exit 64): another process runs the job, photos
                // no journal knows, a bracket the camera cannot take.
                throw ValidationError(e.message)
            case let gone as TimelapseJob.CameraGone:
                printer.notifier?.stopping(status: "timelapse '\(job.spec.name)': the camera failed; exiting so a new process can open it")
                notice("\(gone.message); exiting (status 75) so the service manager starts a new one, which resumes the job")
                throw ExitCode(75)
            default:
                throw error
            }
        }
    }

    /// "3 h 20 min", "4 min 10 s", "9.8 s".
    static func span(_ d: Duration) -> String {
        let s = d.secondsValue
        if s < 60 { return String(format2: s) + " s" }
        let total = Int(s.rounded())
        if total < 3600 { return "\(total / 60) min \(total % 60) s" }
        if total < 86_400 { return "\(total / 3600) h \(total % 3600 / 60) min" }
        return "\(total / 86_400) d \(total % 86_400 / 3600) h"
    }

    static func bytes(_ n: Int64) -> String {
        let g = Double(n) / Double(1 << 30)
        return g >= 1 ? String(format2: g) + " GiB" : String(format2: Double(n) / Double(1 << 20)) + " MiB"
    }
}
