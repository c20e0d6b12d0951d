import Foundation
import HTTPTransfer
import Soak
import TestSupport
import Testing

/// Issue 49: `serve` as a whole, killed with SIGKILL at random moments and started again on the
/// same folder: a timelapse job of DNG+JPEG EV brackets, a zero-shutter-lag trigger and API
/// brackets all under way when the power goes; once, the camera goes away instead and the
/// service exits 75 for systemd to start it again. Judged by what the folder holds afterwards.
@Suite("serve killed -9 and restarted: the folder stays true", .serialized, .timeLimit(.minutes(4)))
struct ServeKillTests {
    typealias Server = ServeCLITests.Server

    /// `serve` in virtual time on `config`, writing into `output`.
    static func run(_ config: String, _ output: String, extra: [String] = []) async throws -> Server {
        try await Server.start(["--virtual-time", "--config", config] + extra, output: output)
    }

    @Test("killed with SIGKILL at 11 random moments while a DNG+JPEG job, a zsl trigger and API brackets run, and its camera gone once (exit 75), started again each time: every file a sidecar or the journal lists is there and whole, none that none lists, no temporary, the journal intact, slots failed only as interrupted, EV brackets stepping by their EV")
    func killedAndRestarted() async throws {
        let dir = NSTemporaryDirectory() + "sb-serve-kill-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { if ProcessInfo.processInfo.environment["SB_KEEP"] == nil { try? FileManager.default.removeItem(atPath: dir) } }
        let config = dir + "/serve.yaml"
        try """
            raw-size: 1332x990
            jobs:
              - name: roof
                interval: 2s
                count: 100000
                ev: [-1, 0, 1]
                format: [dng, jpeg]
            triggers:
              - name: door
                simulated: poisson:3s
                zsl: true
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let out = dir + "/out"
        var rng = SystemRandomNumberGenerator()
        var asked = 0
        var cameraGone = false
        for round in 0..<12 {
            if round == 6 {
                // The camera goes away mid-run (at its 300th frame): the service stops its jobs
                // and triggers as at SIGTERM and exits 75 for systemd's Restart= to start a new
                // one, which finds the camera again and resumes the job.
                let run = try await Self.run(config, out, extra: ["--fault-disconnect-at", "300"])
                try await withDeadline(.seconds(90), "serve to exit after its camera went away") {
                    try await offPool { run.process.waitUntilExit() }
                }
                let said = run.said.withLock { $0 }
                #expect(run.process.terminationReason == .exit && run.process.terminationStatus == 75, "status \(run.process.terminationStatus): \(said.suffix(2000))")
                #expect(said.contains("exiting 75 so a new process can open it"), "\(said.suffix(2000))")
                cameraGone = run.process.terminationStatus == 75
                continue
            }
            let run = try await Self.run(config, out)
            // API brackets under way (their answers are not waited for: the kill cuts them off).
            let n = Int.random(in: 0...2, using: &rng)
            asked += n
            let base = run.base
            let clients = (0..<n).map { _ in
                Task { _ = try? await HTTPTransfer.perform(HTTPTransfer.Request(method: "POST", url: base + "api/capture", headers: [("Content-Type", "application/json")],
                                                                              body: .bytes(Array(#"{"ev": [-2, 0, 2], "formats": ["jpeg", "dng"]}"#.utf8)), timeout: .seconds(30))) }
            }
            // The moment of the kill, not a wait for anything.
            let delay = UInt32.random(in: 300_000...4_000_000, using: &rng)
            try await offPool {
                usleep(delay)
                kill(run.process.processIdentifier, SIGKILL)
                run.process.waitUntilExit()
            }
            for c in clients { await c.value }
            #expect(run.process.terminationReason == .uncaughtSignal, "a run ended by itself: \(run.process.terminationStatus)")
            let db = out + "/roof/timelapse.sqlite"
            if FileManager.default.fileExists(atPath: db) {
                #expect(try await sqlite(db, "PRAGMA integrity_check") == "ok")
            }
        }
        // Then once more, stopped as systemd stops it.
        let last = try await Self.run(config, out)
        try await withDeadline(.seconds(60), "a slot taken by the last run") {
            while true {
                let r = try await HTTPTransfer.perform(HTTPTransfer.Request(method: "GET", url: last.base + "api/jobs", timeout: .seconds(30)))
                let jobs = (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [[String: Any]] ?? []
                if jobs.contains(where: { ($0["taken"] as? Int ?? 0) > 0 }) { return }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect(try await last.stop() == 0)

        let j = try SoakJudgement.judge(out, jobFolders: ["roof"])
        #expect(j.captures > 0)
        #expect(j.missing.isEmpty, "listed by a sidecar, not on disk: \(j.missing.prefix(5))")
        #expect(j.journalMissing.isEmpty, "listed by the journal, not on disk: \(j.journalMissing.prefix(5))")
        #expect(j.orphans.isEmpty, "photos no sidecar or journal lists: \(j.orphans.prefix(5))")
        #expect(j.temporaries.isEmpty, "temporary files left: \(j.temporaries.prefix(5))")
        // A slot fails only as interrupted by a kill, or under the camera that went away.
        #expect(j.slotsFailedOther.allSatisfy { $0.contains("interrupted:") || $0.contains("went away") }, "slots failed for other reasons: \(j.slotsFailedOther.prefix(5))")
        #expect(j.evBracketsWrong.isEmpty, "\(j.evBracketsWrong)")
        // A sidecar a kill cut short says so (and lists only what is whole).
        for s in j.incomplete {
            let car = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + "/" + s))) as? [String: Any])
            #expect("\(car["incomplete"] ?? "")".contains("process"), "\(s): \(car["incomplete"] ?? "-")")
        }
        // Every photo whole.
        for name in try FileManager.default.subpathsOfDirectory(atPath: out) {
            guard let data = FileManager.default.contents(atPath: out + "/" + name) else { continue }
            if name.hasSuffix(".jpg") {
                #expect(data.count > 4 && data.prefix(2) == Data([0xFF, 0xD8]) && data.suffix(2) == Data([0xFF, 0xD9]), "partial JPEG \(name)")
            } else if name.hasSuffix(".dng") {
                #expect(data.count > 1024 && data.prefix(4) == Data([0x49, 0x49, 0x2A, 0x00]), "partial DNG \(name)")
            }
        }
        #expect(cameraGone)
        print("serve killed 11 times and its camera gone once: \(j.captures) captures judged (\(asked) API brackets asked), \(j.incomplete.count) cut short by a kill, \(j.slotsFailedOther.count) slots interrupted")
    }
}
