import ArgumentParser
import Capture
import CaptureScheduler
import Foundation
import ImageOutput
import Jobs
import ProcessTriggers
import ShutterbugCore
import SimulatedCamera

/// Pre-capture's sustained rate: bursts of half a second before and after each trigger, written
/// as JPEGs, with triggers coming faster than they can be taken.
struct BenchPrecapture: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "precapture",
        abstract: "Sustained pre-capture bursts (--pre/--post of 500 ms each) per second, per profile, before the frames held or the encoder fall behind.",
        discussion: """
            For each simulated profile in real time (video stream at the mode's fastest rate), \
            the trigger job with a burst of the frames in 500 ms before each trigger, its own \
            and those in 500 ms after, JPEG files written, and triggers every --every (faster \
            than bursts can be taken, so the queue decides): the bursts taken per second and the \
            frames written per second over --seconds, the triggers dropped, those that waited in the \
            queue until their frame was no longer held, the bursts that \
            found fewer frames held before their trigger than asked (the previous burst took \
            them: back-to-back bursts cannot each have half a second before), and the memory \
            their buffers take.
            """)

    @Option(name: .long, help: "Seconds per profile (2...600).")
    var seconds: Double = 10

    @Option(name: .long, help: ArgumentHelp("Time between triggers (5ms...10s).", valueName: "time"))
    var every: String = "100ms"

    @Option(name: .long, help: ArgumentHelp("Profiles, comma-separated.", valueName: "sim:MODEL,..."))
    var cameras: String = "sim:imx219,sim:imx477,sim:imx708"

    @Option(name: .long, help: ArgumentHelp("Directory for the files (created, then emptied).", valueName: "dir"))
    var dir: String = ".shutterbug-bench"

    func validate() throws {
        guard seconds.isFinite, (2...600).contains(seconds) else { throw ValidationError("--seconds must be in 2...600, not \(seconds)") }
        _ = try period()
        for id in cameras.split(separator: ",") where !id.hasPrefix("sim:") || SensorProfile.named(String(id.dropFirst(4))) == nil {
            throw ValidationError("--cameras takes sim:MODEL ids from \(SensorProfile.catalogue.map { "sim:\($0.model)" }.joined(separator: ", ")), not '\(id)'")
        }
    }

    func period() throws -> Duration {
        let s = try ExposureParser.seconds(every)
        guard s.isFinite, (0.005...10).contains(s) else { throw ValidationError("--every must be 5ms...10s, not '\(every)'") }
        return .seconds(exactly: s)
    }

    func run() async throws {
        print("bench precapture: real time, video stream, JPEG written; bursts of 500 ms before and after each trigger, a trigger every \(every), \(String(format2: seconds)) s per profile")
        print("profile  period   burst (before+1+after) | bursts/s  frames/s written | triggers seen  dropped  frame gone | short of frames before | buffers")
        let work = (dir.hasSuffix("/") ? String(dir.dropLast()) : dir) + "/precapture"
        defer { try? FileManager.default.removeItem(atPath: work) }
        for id in cameras.split(separator: ",") {
            let profile = SensorProfile.named(String(id.dropFirst(4)))!
            try? FileManager.default.removeItem(atPath: work)
            var o = SimulationOptions()
            o.clock = .realTime
            let cam = SimulatedCamera(profile: profile, options: o)
            defer { cam.release() }
            let session2 = CaptureSession(backend: cam)
            // The burst's frames from the mode's fastest period, known once configured; fewer
            // where the camera's buffers cannot hold the burst's photos (the frames held before
            // it that the buffers cannot spare are copies in a pool).
            _ = try await session2.prepare(streams: [StreamRequest(role: .video)], preparedBracketCount: 1)
            let fastest = await session2.timing.everyFramePeriod
            let wanted = min(14, Int((Duration.milliseconds(500) / fastest).rounded(.up)))
            var side = wanted
            var config = try await session2.prepare(streams: [StreamRequest(role: .video)], preparedBracketCount: 2 * side + 1, holding: .frames(side + 2))
            while side > 1, await session2.maxBracketedCapturePhotoCount < 2 * side + 1 {
                side -= 1
                config = try await session2.prepare(streams: [StreamRequest(role: .video)], preparedBracketCount: 2 * side + 1, holding: .frames(side + 2))
            }
            let burst = BurstRequest(before: .frames(side), after: .frames(side))
            try await session2.start()
            let directory = try OutputDirectory(path: work, reserve: 0)
            let writer = try PhotoFileWriter(directory: directory, streams: config.streams, camera: CameraDescription(profile: profile))
            let pattern = PatternTriggerSource.Pattern.regular(period: try period())
            let job = TriggerJob(options: .init(formats: [.jpeg], policy: .queue, queue: 1, burst: burst), session: session2, camera: cam, writer: writer) { start in
                TriggerHandle(source: PatternTriggerSource(pattern, count: 1_000_000, start: start + .milliseconds(100), realTime: true), stop: {})
            }
            let seconds = self.seconds
            let stopper = Task {
                try? await Task.sleep(for: .seconds(seconds))
                job.stop("--seconds")
            }
            let counting = Task { () -> (Int, Int, Int, Int, Int, ContinuousClock.Instant?) in
                var captured = 0, frames = 0, short = 0, dropped = 0, failed = 0
                var first: ContinuousClock.Instant?
                for await e in job.events {
                    switch e {
                    case .captured(_, let c):
                        captured += 1
                        frames += c.files.filter { $0.path.hasSuffix(".jpg") }.count
                        if c.adjustments.contains(where: { $0.hasPrefix("burst:") }) { short += 1 }
                    case .dropped: dropped += 1
                    case .failed: failed += 1
                    case .listening: first = ContinuousClock.now
                    default: break
                    }
                }
                return (captured, frames, short, dropped, failed, first)
            }
            try await job.run()
            stopper.cancel()
            let (c, f, s, d, failed, first) = await counting.value
            let elapsed = first.map { (ContinuousClock.now - $0).secondsValue } ?? seconds
            await session2.stop()
            let bytes = config.bufferBytes
            func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
            let asked = side < wanted ? " of \(2 * wanted + 1)" : ""
            print("\(pad(profile.model, 8)) \(pad(fastest.millisecondsDescription, 8)) \(pad("\(2 * side + 1)\(asked) (\(side)+1+\(side))", 22)) | \(pad(String(format2: Double(c) / elapsed), 9)) \(pad(String(format2: Double(f) / elapsed), 16)) | \(pad("\(c + d + failed)", 14)) \(pad("\(d)", 8)) \(pad("\(failed)", 10)) | \(pad("\(s) of \(c)", 22)) | \(MemoryBudget.megabytes(bytes)) (\(Int((Double(bytes) / Double(512 << 20) * 100).rounded()))% of a Pi 4's 512 MB CMA)")
        }
    }
}
