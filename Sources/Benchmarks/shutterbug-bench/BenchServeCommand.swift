import ArgumentParser
import CaptureScheduler
import Foundation
import Journal
import ShutterbugCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `shutterbug-bench serve-load`: the service's API under load while a timelapse of brackets
/// runs, against the same job with the API idle, in one run.
struct BenchServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-load",
        abstract: "The service under load: status and metrics asked as fast as one client can while a timelapse of brackets runs, against the same job left alone.",
        discussion: """
            Starts `shutterbug serve` (the binary beside this one) on the simulated camera with a \
            timelapse job of brackets, twice: once with the API idle, once while one client \
            asks GET /api/status and GET /metrics in turn, each as soon as the last answered, \
            for --seconds. Then reads each run's journal: slots taken, skipped or missed, \
            brackets on consecutive frames, and the slot error (first exposure start less the \
            slot's instant). Prints the request rate and latency (p50, p99) and the idle and \
            loaded runs side by side. Fails (exit 1) if a slot was missed under load or fewer \
            brackets were on consecutive frames than idle. The sensor's controls land on a \
            fixed frame (--landing early) so a bracket off its frames is the service's doing, \
            not the simulated Pi's randomness.
            """)

    @Option(name: .long, help: "Seconds of each run (10...3600).")
    var seconds: Double = 60

    @Option(name: .long, help: ArgumentHelp("The job's interval.", valueName: "period"))
    var interval: String = "4s"

    @Option(name: .long, help: ArgumentHelp("The job's bracket.", valueName: "ev,..."))
    var ev: String = "-1,0,1"

    @Option(name: .long, help: ArgumentHelp("The shutterbug binary (default: beside this one).", valueName: "path"))
    var binary: String?

    @Flag(name: .long, help: "One JSON object per run.")
    var json = false

    func validate() throws {
        guard (10...3600).contains(seconds) else { throw ValidationError("--seconds must be in 10...3600, not \(seconds)") }
    }

    struct Run {
        var label: String
        var taken = 0, skipped = 0, missed = 0, failed = 0
        var consecutive = 0
        var errors: [Duration] = []
        var requests = 0
        var latencies: [Duration] = []
        var elapsed: Duration = .zero
    }

    func run() async throws {
        let exe = binary ?? (URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path + "/shutterbug")
        guard FileManager.default.isExecutableFile(atPath: exe) else { throw ValidationError("no shutterbug binary at \(exe): build it (swift build -c release) or give --binary") }
        if !json { print("bench serve-load: job every \(interval), EV \(ev), \(Int(seconds)) s a run, idle then loaded; \(exe)") }
        let idle = try await measure(exe, label: "idle", load: false)
        let loaded = try await measure(exe, label: "loaded", load: true)
        for r in [idle, loaded] { report(r) }
        let steps = ev.split(separator: ",").count
        let idleShare = Double(idle.consecutive) / Double(max(1, idle.taken))
        let loadShare = Double(loaded.consecutive) / Double(max(1, loaded.taken))
        if !json, let a = LagDistribution(idle.errors.map(abs)), let b = LagDistribution(loaded.errors.map(abs)) {
            print(String(format: "loaded/idle: slot error p99 %.2f×, brackets on %d consecutive frames %.0f%% vs %.0f%%", b.p99.secondsValue / max(a.p99.secondsValue, 1e-9), steps, loadShare * 100, idleShare * 100))
        }
        if loaded.missed + loaded.skipped > 0 || loadShare < idleShare {
            print("FAIL: under load \(loaded.skipped + loaded.missed) slots not taken, \(loaded.consecutive) of \(loaded.taken) brackets on consecutive frames (idle \(idle.consecutive) of \(idle.taken))")
            throw ExitCode.failure
        }
    }

    func abs(_ d: Duration) -> Duration { d < .zero ? .zero - d : d }

    func measure(_ exe: String, label: String, load: Bool) async throws -> Run {
        let dir = NSTemporaryDirectory() + "sb-bench-serve-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try """
            jobs:
              - name: load
                interval: \(interval)
                until: stopped
                ev: [\(ev)]
            """.write(toFile: dir + "/serve.yaml", atomically: true, encoding: .utf8)
        let service = try BenchService.start(exe, ["--camera", "sim:imx477", "--landing", "early", "--size", "1332x990", "--listen", "127.0.0.1:0",
                                                   "--output", dir + "/out", "--config", dir + "/serve.yaml"])
        let base = service.base
        var run = Run(label: label)
        let clock = ContinuousClock()
        let start = clock.now
        let end = start + .seconds(seconds)
        if load {
            let paths = ["api/status", "metrics"]
            var i = 0
            while clock.now < end {
                let t0 = clock.now
                let (_, response) = try await URLSession.shared.data(from: URL(string: base + paths[i % 2])!)
                run.latencies.append(clock.now - t0)
                guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw ValidationError("\(paths[i % 2]) answered \((response as? HTTPURLResponse)?.statusCode ?? 0)") }
                i += 1
            }
            run.requests = i
        } else {
            try await Task.sleep(until: end)
        }
        run.elapsed = clock.now - start
        let status = service.stop()
        guard status == 0 else { throw ValidationError("the service exited \(status)") }
        let db = try SQLiteDatabase(path: dir + "/out/load/timelapse.sqlite")
        for row in try db.query("SELECT state, count(*) FROM slots GROUP BY state") {
            let n = Int(row[1].int ?? 0)
            switch row[0].text {
            case "taken": run.taken = n
            case "skipped": run.skipped = n
            case "missed": run.missed = n
            default: run.failed += n
            }
        }
        let steps = ev.split(separator: ",").count
        for row in try db.query("SELECT max(sequence) - min(sequence) + 1, count(*) FROM frames GROUP BY idx") where row[0].int == Int64(steps) && row[1].int == Int64(steps) {
            run.consecutive += 1
        }
        for row in try db.query("SELECT exposure_start_ns - instant_ns FROM slots WHERE state = 'taken' AND exposure_start_ns IS NOT NULL") {
            if let ns = row[0].int { run.errors.append(.nanoseconds(ns)) }
        }
        return run
    }

    func report(_ r: Run) {
        let errors = LagDistribution(r.errors.map(abs))
        let latency = LagDistribution(r.latencies)
        let rate = Double(r.requests) / max(r.elapsed.secondsValue, 1e-9)
        if json {
            var o: [String: Any] = ["run": r.label, "taken": r.taken, "skipped": r.skipped, "missed": r.missed, "failed": r.failed, "consecutive": r.consecutive,
                                    "requests": r.requests, "requestsPerSecond": rate]
            if let errors { o["slotErrorP50Us"] = errors.p50.microsecondsValue; o["slotErrorP99Us"] = errors.p99.microsecondsValue }
            if let latency { o["latencyP50Us"] = latency.p50.microsecondsValue; o["latencyP99Us"] = latency.p99.microsecondsValue }
            if let data = try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys]) { print(String(decoding: data, as: UTF8.self)) }
            return
        }
        var line = "\(r.label): slots \(r.taken) taken, \(r.skipped) skipped, \(r.missed) missed, \(r.failed) failed; \(r.consecutive) of \(r.taken) brackets on consecutive frames"
        if let errors { line += "; slot error p50 \(errors.p50.preciseDescription), p99 \(errors.p99.preciseDescription)" }
        if let latency {
            line += String(format: "; %d requests, %.0f/s, latency p50 %@, p99 %@", r.requests, rate, latency.p50.preciseDescription, latency.p99.preciseDescription)
        }
        print(line)
    }
}
