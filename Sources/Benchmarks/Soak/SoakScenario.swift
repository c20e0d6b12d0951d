import Capture
import Foundation
import ImageOutput
import Jobs
import Server
import ShutterbugCore
import SimulatedCamera

/// The service over simulated days: a timelapse job of -1/0/+1 EV brackets and, at each of its
/// slots, one or two captures asked of the service at random (seeded): a photo, a -2/0/+2 EV
/// bracket or a manual bracket (0.5 ms and 60 ms at gain 4), as the scene's light goes from day
/// to night and back. In virtual time: a simulated day is `dayLength` of the camera's clock (the
/// light's whole cycle), so days pass in seconds. What it leaves is judged by `SoakJudgement`.
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

    public init(days: Double = 1, dayLength: Duration = .seconds(1200), slotsPerDay: Int = 36, seed: UInt64 = 49, dayLux: Double = 4000, nightLux: Double = 40) {
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
        public var photos = 0
        public var evBrackets = 0
        public var manualBrackets = 0
        public var capturesFailed: [String] = []
        public var wallSeconds = 0.0
        public var rssStartKB = 0
        public var rssEndKB = 0
        public var fdsStart = 0
        public var fdsEnd = 0
        public var judgement = SoakJudgement()
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
        var options = SimulationOptions()
        options.clock = .virtual
        options.seed = seed
        options.sceneSchedule = .dayNight(period: dayLength.secondsValue, day: dayLux, night: nightLux)
        let cam = SimulatedCamera(profile: .imx477, options: options)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let config = try await session.start(stream: StreamRequest(role: .still, width: 640, height: 480), preparedBracketCount: 5)
        let output = try OutputDirectory(path: directory, reserve: 64 << 20)
        let writer = try PhotoFileWriter(directory: output, streams: config.streams, camera: CameraDescription(profile: .imx477))
        let service = CameraService(session: session, camera: cam, writer: writer, directory: output, sensorModes: cam.capabilities.sensorModes)
        (report.rssStartKB, report.fdsStart) = Self.footprint()

        let slots = max(1, Int((days * Double(slotsPerDay)).rounded()))
        report.slots = slots
        let interval = max(.seconds(10), dayLength / slotsPerDay)
        let start = ISO8601DateFormatter().string(from: Date().addingTimeInterval(2))
        _ = try await service.createJob(JobDefinition(name: "roof", words: ["--interval", "\(Int(interval.secondsValue))s", "--count", "\(slots)", "--ev", "-1,0,1",
                                                                            "--start", start]))
        var rng = SplitMix64(seed: seed)
        var done = -1
        let asks: [(String, String)] = [("photo", "{}"), ("ev", #"{"ev": [-2, 0, 2]}"#), ("manual", #"{"exposuresUs": [500, 60000], "gain": 4}"#), ("photo", "{}")]
        while true {
            // The job's next slot (or its end).
            var status: JobStatus?
            let waitedFrom = ContinuousClock.now
            while true {
                if let s = await service.jobStatuses().first(where: { $0.name == "roof" }) {
                    if s.taken + s.skipped + s.failed + s.missed != done || s.state == .finished || s.state == .failed || s.state == .stopped {
                        status = s
                        break
                    }
                }
                guard ContinuousClock.now - waitedFrom < .seconds(300) else { throw ShutterbugError(.timeout, "the soak's job made no progress for 300 s (slot \(done))") }
                try await Task.sleep(for: .milliseconds(5))
            }
            guard let s = status else { break }
            done = s.taken + s.skipped + s.failed + s.missed
            if done % max(1, slotsPerDay / 4) == 0 { progress("slot \(done) of \(slots): \(s.taken) taken") }
            if s.state == .finished || s.state == .failed || s.state == .stopped {
                report.slotsTaken = s.taken
                break
            }
            for _ in 0..<(1 + Int(rng.next() % 2)) {
                let (kind, json) = asks[Int(rng.next() % UInt64(asks.count))]
                switch kind {
                case "ev": report.evBrackets += 1
                case "manual": report.manualBrackets += 1
                default: report.photos += 1
                }
                do {
                    // What POST /api/capture does with the same body.
                    let ask = try JSONDecoder().decode(CameraService.CaptureRequest.self, from: Data(json.utf8))
                    let settings = try CameraService.settings(for: ask, now: service.camera.now, offset: TimelapseRun.wallOffset(await service.session.latestFrame))
                    _ = try await service.capture(settings)
                } catch {
                    report.capturesFailed.append("\(kind) at slot \(done): \(error)")
                }
            }
        }
        await service.stopAll("the soak is over")
        await session.stop()
        (report.rssEndKB, report.fdsEnd) = Self.footprint()
        report.judgement = try SoakJudgement.judge(directory, jobFolders: ["roof"])
        report.wallSeconds = (ContinuousClock.now - began).secondsValue
        return report
    }
}
