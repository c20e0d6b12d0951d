import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `shutterbug serve` running what its configuration declares: a timelapse job and a simulated
/// trigger, controlled and reloaded over the API and by signals.
@Suite("serve: timelapse jobs and triggers inside the service", .serialized, .timeLimit(.minutes(4)))
struct ServeJobsCLITests {
    let api = ServeCLITests()

    /// Asks `condition` every 100 ms until it holds, for at most `seconds`; whether it held.
    func eventually(_ seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + .seconds(seconds)
        while clock.now < end {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    func job(_ s: ServeCLITests.Server, _ name: String) async throws -> [String: Any] {
        try #require(try await api.call(s.base + "api/jobs/" + name).json)
    }


    @Test("a job and a trigger from the configuration: the job's slots taken and downloadable, paused (its slots journalled as skipped), resumed and stopped over the API; jobs created over the API with their options checked; the trigger's captures and lags; metrics; the effective configuration; a reload (API and SIGHUP) keeps the running job running, a broken one changes nothing")
    func jobsAndTriggers() async throws {
        let conf = NSTemporaryDirectory() + "sb-serve-jobs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: conf, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: conf) }
        let yaml = """
            jobs:
              - name: roof
                interval: 3s
                until: stopped
                ev: [-1, 0, 1]
            triggers:
              - name: button
                simulated: regular:2s
            """
        try yaml.write(toFile: conf + "/serve.yaml", atomically: true, encoding: .utf8)
        let s = try await ServeCLITests.Server.start(["--config", conf + "/serve.yaml"])

        let jobs = try await api.call(s.base + "api/jobs")
        #expect(jobs.status == 200 && jobs.text.contains("\"name\":\"roof\""), "\(jobs.text)")
        #expect(try await api.call(s.base + "api/jobs/nope").status == 404)
        // Two slots taken, each a bracket of three frames, its files served.
        // (The last slot itself taken: on a loaded machine a slot after two taken can pass
        // skipped, and it has no files to serve.)
        let twoTaken = try await eventually(30) {
            let j = try await job(s, "roof")
            return (j["taken"] as? Int ?? 0) >= 2 && (j["lastSlot"] as? [String: Any])?["state"] as? String == "taken"
        }
        var roof = try await job(s, "roof")
        #expect(twoTaken, "\(roof)")
        let last = try #require(roof["lastSlot"] as? [String: Any])
        #expect((last["frames"] as? [Int])?.count == 3 && last["state"] as? String == "taken", "\(last)")
        let files = try #require(last["files"] as? [String])
        #expect(files.filter { $0.hasSuffix(".jpg") }.count == 3 && files.allSatisfy { $0.hasPrefix("roof/") }, "\(files)")
        let jpeg = try await api.call(s.base + "api/files/" + (try #require(files.first { $0.hasSuffix(".jpg") }, "the last slot's files: \(files), the job: \(roof)")))
        #expect(jpeg.status == 200 && jpeg.body.prefix(2) == Data([0xFF, 0xD8]))
        #expect(roof["keogram"] as? String == "roof/keogram.png", "the keogram is written after the first slot")
        #expect(try await api.call(s.base + "api/files/roof/keogram.png").status == 200)

        // Paused: the slots that pass are journalled as skipped (paused); resumed, it takes again.
        let paused = try await api.call(s.base + "api/jobs/roof/pause", method: "POST")
        #expect(paused.status == 200 && paused.json?["state"] as? String == "paused", "\(paused.text)")
        // On a loaded machine a slot can also be skipped for another reason (the camera late):
        // wait for one that names the pause.
        let db = s.dir + "/roof/timelapse.sqlite"
        let pausedSlot = try await eventually(20) {
            try await sqlite(db, "SELECT count(*) FROM slots WHERE state = 'skipped' AND reason = 'the job was paused'") != "0"
        }
        let slots = pausedSlot ? "" : try await sqlite(db, "SELECT idx, state, reason FROM slots")
        #expect(pausedSlot, "the journal's slots: \(slots)")
        #expect((try await job(s, "roof")["skipped"] as? Int ?? 0) >= 1)
        let taken = try await job(s, "roof")["taken"] as? Int ?? 0
        #expect(try await api.call(s.base + "api/jobs/roof/resume", method: "POST").json?["state"] as? String == "running")
        #expect(try await eventually(10) { (try await job(s, "roof")["taken"] as? Int ?? 0) > taken })

        // Jobs over the API: options checked as the CLI checks them, names as folders.
        // It shares the camera with roof and the trigger: a slot due while another capture holds
        // the camera is taken after it, or skipped if that is too late; either is journalled.
        let created = try await api.call(s.base + "api/jobs", method: "POST", body: #"{"name": "manual", "options": {"interval": "2s", "count": 2, "exposures": ["1/1000", "1/250"]}}"#)
        #expect(created.status == 201 && created.json?["name"] as? String == "manual", "\(created.text)")
        let twice = try await api.call(s.base + "api/jobs", method: "POST", body: #"{"name": "manual", "options": {"interval": "2s", "count": 2}}"#)
        #expect(twice.status == 409 && twice.text.contains("a job named 'manual'"), "\(twice.text)")
        let zero = try await api.call(s.base + "api/jobs", method: "POST", body: #"{"name": "bad", "options": {"interval": "0s", "count": 1}}"#)
        #expect(zero.status == 400 && zero.text.contains("--interval must be a period from 0.1 s"), "\(zero.text)")
        let outside = try await api.call(s.base + "api/jobs", method: "POST", body: #"{"name": "bad", "options": {"count": 1, "output": "/etc"}}"#)
        #expect(outside.status == 400 && outside.text.contains("output: not an option of a job in the service"), "\(outside.text)")
        let traversal = try await api.call(s.base + "api/jobs", method: "POST", body: #"{"name": "../x", "options": {"count": 1}}"#)
        #expect(traversal.status == 400 && traversal.text.contains("name: 1 to 64 letters"), "\(traversal.text)")
        let long = try await api.call(s.base + "api/jobs", method: "POST", body: #"{"name": "long", "options": {"count": 2, "ev": [-3, -2, -1, 0, 1, 2, 3]}}"#)
        #expect(long.status == 400 && long.text.contains("the job's bracket has 7 steps; the service's camera takes brackets of 1 to 5"), "\(long.text)")
        let noEnd = try await api.call(s.base + "api/jobs", method: "POST", body: #"{"name": "endless"}"#)
        #expect(noEnd.status == 400 && noEnd.text.contains("--count N or --until"), "\(noEnd.text)")
        let finished = try await eventually(20) { try await job(s, "manual")["state"] as? String == "finished" }
        let manual = try await job(s, "manual")
        #expect(finished, "\(manual)")
        #expect((manual["taken"] as? Int ?? 0) + (manual["skipped"] as? Int ?? 0) == 2, "\(manual)")
        #expect(try await sqlite(s.dir + "/manual/timelapse.sqlite", "SELECT count(*) FROM slots") == "2")
        if manual["taken"] as? Int ?? 0 > 0 {
            #expect(try await sqlite(s.dir + "/manual/timelapse.sqlite", "SELECT count(*) FROM frames") == String(2 * (manual["taken"] as! Int)), "a manual bracket of two steps per slot")
        }
        #expect(try await api.call(s.base + "api/jobs/manual/pause", method: "POST").status == 409, "a finished job cannot be paused")

        // The trigger: captures exposed after each trigger, with their lag.
        #expect(try await eventually(15) { (try await api.call(s.base + "api/triggers").json(array: 0)?["captured"] as? Int ?? 0) >= 1 })
        let trigger = try #require(try await api.call(s.base + "api/triggers").json(array: 0))
        #expect(trigger["source"] as? String == "simulated regular 2.00 s" && ((trigger["lagToExposureStart"] as? [String: Any])?["p50Us"] as? Double ?? -1) >= 0, "\(trigger)")

        let metrics = try await api.call(s.base + "metrics").text
        for name in [#"shutterbug_timelapse_slots_total{job="roof",state="taken"}"#, #"shutterbug_timelapse_slots_total{job="roof",state="skipped"}"#,
                     "shutterbug_timelapse_schedule_error_seconds_bucket", "shutterbug_trigger_lag_seconds_bucket",
                     #"shutterbug_triggers_total{trigger="button",outcome="captured"}"#, "shutterbug_journal_bytes", "shutterbug_jobs_running",
                     "shutterbug_encode_queue_depth"] {
            #expect(metrics.contains(name), "\(name) in /metrics")
        }
        let config = try #require(try await api.call(s.base + "api/config").json)
        #expect((config["jobs"] as? [[String: Any]])?.first?["name"] as? String == "roof" && config["file"] as? String == conf + "/serve.yaml", "\(config)")

        // A reload that adds a job and changes the trigger: roof runs on, the same job.
        roof = try await job(s, "roof")
        try (yaml.replacingOccurrences(of: "regular:2s", with: "regular:3s") + """

              - name: second
                simulated: regular:4s
            """).write(toFile: conf + "/serve.yaml", atomically: true, encoding: .utf8)
        let reload = try await api.call(s.base + "api/config/reload", method: "POST")
        #expect(reload.status == 200, "\(reload.text)")
        #expect(reload.json?["kept"] as? [String] == ["job roof"] && reload.json?["restarted"] as? [String] == ["trigger button"]
                && reload.json?["started"] as? [String] == ["trigger second"], "\(reload.text)")
        let after = try await job(s, "roof")
        #expect(after["state"] as? String == "running" && (after["taken"] as? Int ?? 0) >= (roof["taken"] as? Int ?? 99), "the job was not restarted: \(after)")
        // A broken file: refused with its mistakes at their lines, nothing changed; SIGHUP the same.
        try "jobs:\n  - name: roof\n    interval: 3s\n    until: stopped\n    ev: [-1, 0, 12]\n".write(toFile: conf + "/serve.yaml", atomically: true, encoding: .utf8)
        let broken = try await api.call(s.base + "api/config/reload", method: "POST")
        #expect(broken.status == 400 && broken.text.contains("serve.yaml:5: jobs roof: ev:"), "\(broken.text)")
        kill(s.process.processIdentifier, SIGHUP)
        #expect(try await eventually(5) { try await api.call(s.base + "api/status").status == 200 })
        #expect(try await api.call(s.base + "api/triggers").text.contains("second"), "the triggers run on")
        let stopped = try await api.call(s.base + "api/jobs/roof/stop", method: "POST")
        #expect(stopped.status == 200 && ["stopping", "stopped"].contains(stopped.json?["state"] as? String ?? ""), "\(stopped.text)")
        #expect(try await eventually(15) { try await job(s, "roof")["state"] as? String == "stopped" })
        #expect(try await s.stop() == 0)
    }

    @Test("zsl and pre/post triggers from the configuration (counts and time windows): each capture says whether its frame covered the edge, a burst is one capture of all its frames; POST /api/capture at an instant just past takes a held frame")
    func zeroShutterLagTriggers() async throws {
        let conf = NSTemporaryDirectory() + "sb-serve-zsl-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: conf, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: conf) }
        let yaml = """
            scene-lux: 5
            triggers:
              - name: pir
                simulated: regular:900ms
                zsl: true
                hold: 4
              - name: burst
                simulated: regular:1700ms
                pre: 60ms
                post: 30ms
            """
        try yaml.write(toFile: conf + "/serve.yaml", atomically: true, encoding: .utf8)
        let s = try await ServeCLITests.Server.start(["--config", conf + "/serve.yaml"])
        defer { s.discard() }
        func captures() async throws -> [[String: Any]] {
            try #require(try JSONSerialization.jsonObject(with: try await api.call(s.base + "api/captures").body) as? [[String: Any]])
        }
        let both = try await eventually(40) {
            let c = try await captures()
            return ["pir", "burst"].allSatisfy { name in c.contains { $0["trigger"] as? String == name } }
        }
        let list = try await captures()
        #expect(both, "\(list)")
        for c in list where c["trigger"] as? String == "pir" {
            #expect(c["zeroShutterLag"] is Bool && (c["kind"] as? String)?.hasPrefix("photo for trigger 'pir'") == true, "\(c)")
        }
        // Windows: counted in frames at the rate the camera runs at (this 640x480 mode's fastest
        // period is 33 ms: 2 before and 1 after at most, fewer in a dim scene), at least one a side.
        for c in list where c["trigger"] as? String == "burst" {
            let steps = try #require(c["steps"] as? Int, "\(c)")
            #expect((3...4).contains(steps) && (c["files"] as? [String])?.filter { $0.hasSuffix(".jpg") }.count == steps && c["zeroShutterLag"] is Bool
                    && (c["kind"] as? String)?.hasPrefix("burst of \(steps) for trigger 'burst'") == true, "\(c)")
        }
        // An instant just past, as wall time: a held frame (or, between exposures, the next).
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let at = try await api.call(s.base + "api/capture", method: "POST", body: #"{"at": "\#(f.string(from: Date()))"}"#)
        #expect(at.status == 201 && at.json?["zeroShutterLag"] is Bool, "\(at.status) \(at.text)")
        let old = try await api.call(s.base + "api/capture", method: "POST", body: #"{"at": "\#(f.string(from: Date(timeIntervalSinceNow: -30)))"}"#)
        #expect(old.status == 410, "\(old.status) \(old.text)")
        #expect(try await s.stop() == 0)
    }

    @Test("a trigger whose pre-capture windows take more photos at the mode's fastest rate than the camera's buffers hold (even with every frame before it copied into the pool) fails at start, naming the windows, the period and the range; the service runs on")
    func burstWindowTooLong() async throws {
        let conf = NSTemporaryDirectory() + "sb-serve-window-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: conf, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: conf) }
        try """
            triggers:
              - name: long
                simulated: regular:5s
                pre: 300ms
                post: 100ms
            """.write(toFile: conf + "/serve.yaml", atomically: true, encoding: .utf8)
        let s = try await ServeCLITests.Server.start(["--config", conf + "/serve.yaml"])
        defer { s.discard() }
        let failed = try await eventually(20) {
            let t = try JSONSerialization.jsonObject(with: try await api.call(s.base + "api/triggers").body) as? [[String: Any]]
            return t?.first?["state"] as? String == "failed"
        }
        let t = try #require(try JSONSerialization.jsonObject(with: try await api.call(s.base + "api/triggers").body) as? [[String: Any]])
        let message = t.first?["message"] as? String ?? ""
        #expect(failed && message.contains("300.00 ms before, 100.00 ms after, at this mode's fastest frame period") && message.contains("1 to"), "\(t)")
        #expect(try await api.call(s.base + "api/status").status == 200)
        #expect(try await s.stop() == 0)
    }

    @Test("SIGTERM during a bracket: the bracket completes, its files are written whole and journalled, the service exits 0")
    func sigtermDuringBracket() async throws {
        let conf = NSTemporaryDirectory() + "sb-serve-term-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: conf, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: conf) }
        // A quarter, a half and one second: the bracket takes 1.75 s of exposure, phase-locked
        // on the slot's instant (a lock needs some 30 frames of the first step, 9 s, before it:
        // a slot without that lead may begin too late and be skipped, as it should).
        try """
            jobs:
              - name: long
                interval: 16s
                until: stopped
                exposures: [1/4, 1/2, 1]
                format: [jpeg, dng]
            """.write(toFile: conf + "/serve.yaml", atomically: true, encoding: .utf8)
        let s = try await ServeCLITests.Server.start(["--config", conf + "/serve.yaml"])
        defer { try? FileManager.default.removeItem(atPath: s.dir) }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        // The first slot with the lock's lead ahead of it, then SIGTERM a moment into its bracket.
        var instant = Date.distantPast
        for _ in 0..<3 {
            #expect(try await eventually(20) { (try await job(s, "long")["nextSlotAt"] as? String).flatMap(formatter.date(from:)).map { $0 > instant } == true })
            instant = try #require((try await job(s, "long")["nextSlotAt"] as? String).flatMap(formatter.date(from:)))
            if instant.timeIntervalSinceNow > 10 { break }
        }
        let before = try await job(s, "long")["taken"] as? Int ?? -1
        // The slot's bracket is under way once its first step's photo is written (its next two
        // steps expose 1.5 s more): SIGTERM then, while the status still counts it not taken.
        func photos() -> Int {
            // A step's photos (2026-11-26/065232_0001_1.dng), not the job's keogram or contact sheet.
            (FileManager.default.enumerator(atPath: s.dir + "/long")?.allObjects as? [String] ?? [])
                .filter { $0.contains("/") && ($0.hasSuffix(".jpg") || $0.hasSuffix(".dng")) && !$0.contains("sheet") }.count
        }
        let started = try await eventually(max(0, instant.timeIntervalSinceNow) + 30) { photos() > 6 * before }
        #expect(started, "the slot at \(instant) wrote no photo (\(photos()) photos, \(before) slots taken before it)")
        #expect(try await job(s, "long")["taken"] as? Int == before, "the bracket is still being taken")
        kill(s.process.processIdentifier, SIGTERM)
        try await offPool { s.process.waitUntilExit() }
        #expect(s.process.terminationStatus == 0)
        let stopped = "job 'long' stopped (the service is stopping): \(before + 1) slots taken this run"
        let err = try await s.said(containing: stopped)
        #expect(err.contains(stopped), "\(err)")
        let db = s.dir + "/long/timelapse.sqlite"
        // (A first slot without the lock's lead may be recorded skipped, late, before it.)
        #expect(try await sqlite(db, "SELECT count(*) FROM slots WHERE state = 'taken'") == "\(before + 1)")
        #expect(try await sqlite(db, "SELECT count(*) FROM slots WHERE state != 'taken' AND reason NOT LIKE 'late:%'") == "0")
        #expect(try await sqlite(db, "SELECT count(*) FROM frames") == "\(3 * (before + 1))")
        // Three JPEGs, three DNGs and the sidecar a slot, each whole: its bytes and CRC as journalled.
        let rows = try await sqlite(db, "SELECT path, bytes, crc32 FROM files").split(separator: "\n")
        #expect(rows.count == 7 * (before + 1), "\(rows)")
        for row in rows {
            let p = row.split(separator: "|")
            let size = (try? FileManager.default.attributesOfItem(atPath: String(p[0]))[.size] as? Int) ?? -1
            #expect(size == Int(p[1]), "\(p[0]) is whole")
            let crc = try await runChild("/usr/bin/python3", ["-c", "import sys,zlib; print(zlib.crc32(open(sys.argv[1],'rb').read()))", String(p[0])])
            #expect(crc.out.trimmingCharacters(in: .whitespacesAndNewlines) == String(p[2]), "\(p[0])")
        }
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: s.dir).filter { ($0 as NSString).lastPathComponent.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty, "no temporary file left: \(leftovers)")
    }
}

extension ServeCLITests.Reply {
    /// The `i`-th object of a JSON array body.
    func json(array i: Int) -> [String: Any]? {
        guard let a = try? JSONSerialization.jsonObject(with: body) as? [[String: Any]], i < a.count else { return nil }
        return a[i]
    }
}
