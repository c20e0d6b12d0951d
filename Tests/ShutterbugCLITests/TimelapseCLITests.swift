import Foundation
import TestSupport
import Testing

/// `shutterbug timelapse`: slots on the grid, the ramp, the journal, resuming.
// Six minutes: the kill-and-resume test starts the command 50 times and takes some 130 s on a
// quiet machine; with both cores busy beside the suite (stress-ng and a virtual board) it went
// past three minutes. Every wait inside has a deadline of its own; this only guards a hang.
@Suite("timelapse: slots on a wall-clock grid, ramped, journalled, resumable", .timeLimit(.minutes(6)))
struct TimelapseCLITests {
    static var exe: String { OutputCLITests.exe }

    func lines(_ out: String) throws -> (slots: [[String: Any]], summary: [String: Any]) {
        let objects = try out.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        return (objects.filter { $0["slot"] != nil }, try #require(objects.last { $0["summary"] != nil }))
    }


    @Test("a bracket per slot on a darkening scene: every slot taken on its grid instant's frame, steps within the ramp's bound, files checksummed in the journal; run again, it resumes the numbering")
    func runAndResume() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let args = ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--size", "640x480", "--interval", "2s", "--ev", "-1,0,1",
                    "--output", dir, "--scene-schedule", "0:2000,60:20", "--json"]
        let r = try await runChild(Self.exe, args + ["--count", "8"])
        #expect(r.status == 0, "\(r.err)")
        let (slots, summary) = try lines(r.out)
        #expect(slots.count == 8 && summary["thisTaken"] as? Int == 8, "\(summary)")
        #expect(summary["journalIntegrity"] as? String == "ok")
        var previous: Double?
        var offLine: [String] = []
        for s in slots {
            #expect(s["state"] as? String == "taken", "\(s)")
            #expect((s["scheduleErrorUs"] as? Double ?? -1) >= 0, "exposure began before the slot: \(s)")
            // Phase-locked: the first step's exposure began within a line (under 30 µs on
            // this mode) of the slot's instant, and the slot says so; the first slot may come
            // too soon after the camera started for the frames before it to be planned.
            #expect(s["phaseLock"] is String, "every slot says how its lock went")
            if s["slot"] as? Int != 0 {
                // A second stretch lands a few lines, or now and then a frame, off (about one
                // slot in two hundred; the benchmark's p99 over 3000 slots is within a line):
                // within a frame always, and nearly all within a line.
                #expect((s["scheduleErrorUs"] as? Double ?? 99_999) < 40_000, "\(s["scheduleErrorUs"] ?? "-") µs: \(s["phaseLock"] ?? "-")")
                if !((s["scheduleErrorUs"] as? Double ?? 99) < 30 && (s["phaseLock"] as? String)?.hasPrefix("locked: frame") == true) {
                    offLine.append("\(s["slot"] ?? "-"): \(s["phaseLock"] ?? "-")")
                }
            }
            let ramp = try #require(s["ramp"] as? [String: Any])
            #expect(abs(ramp["stepEV"] as? Double ?? 9) <= 1.0 / 3.0 + 1e-6)
            let exposures = try #require(s["exposuresUs"] as? [Double])
            #expect(exposures.count == 3 && exposures[0] < exposures[1] && exposures[1] < exposures[2], "\(exposures)")
            if let p = previous { #expect(abs(log2(exposures[1] / p)) <= 1.0 / 3.0 + 0.01, "0 EV step from \(p) to \(exposures[1])") }
            previous = exposures[1]
        }
        #expect(offLine.count <= 2, "\(offLine)")
        // Slot walls are on the 2 s grid, consecutive.
        let db = dir + "/timelapse.sqlite"
        #expect(try await sqlite(db, "SELECT count(*) FROM slots WHERE wall_ns % 2000000000 != 0") == "0")
        #expect(try await sqlite(db, "SELECT count(*) FROM frames") == "24")
        // Each taken slot has the capture number its files are named with.
        #expect(try await sqlite(db, "SELECT count(*), count(number), count(DISTINCT number) FROM slots WHERE state = 'taken'") == "8|8|8")
        // Each file's size and CRC-32 as journalled are the file's.
        let files = try await sqlite(db, "SELECT path, bytes, crc32 FROM files").split(separator: "\n")
        #expect(files.count == 8 * 4, "3 JPEGs and a sidecar per slot")
        for f in files.prefix(4) {
            let p = f.split(separator: "|")
            let data = try Data(contentsOf: URL(fileURLWithPath: String(p[0])))
            #expect(data.count == Int(p[1]))
            let check = try await runChild("/usr/bin/python3", ["-c", "import sys,zlib; print(zlib.crc32(open(sys.argv[1],'rb').read()))", String(p[0])])
            #expect(check.out.trimmingCharacters(in: .whitespacesAndNewlines) == String(p[2]))
        }

        // Again, with four more: the numbering continues after slot 7, nothing twice.
        let again = try await runChild(Self.exe, args + ["--count", "12"])
        #expect(again.status == 0, "\(again.err)")
        let (more, s2) = try lines(again.out)
        #expect(more.first?["slot"] as? Int == 8, "\(more.first ?? [:])")
        // Every slot of the first run is in the journal, each taken, missed or skipped.
        let recorded = (s2["journalTaken"] as? Int ?? 0) + (s2["journalMissed"] as? Int ?? 0) + (s2["journalSkipped"] as? Int ?? 0)
        #expect(recorded >= 8, "\(s2)")
        #expect(try await sqlite(db, "SELECT count(*), count(DISTINCT idx), min(idx), max(idx) FROM slots") == "12|12|0|11")
        #expect(try await sqlite(db, "SELECT count(*) FROM (SELECT capture_id FROM slots WHERE capture_id IS NOT NULL GROUP BY capture_id HAVING count(*) > 1)") == "0")
        #expect(try await sqlite(db, "PRAGMA integrity_check") == "ok")
        // (In virtual time the camera's clock runs ahead of the wall clock; on a slow machine the
        // second run can start after some of its slots, which it records as missed.)
        let jpegs = try FileManager.default.subpathsOfDirectory(atPath: dir).filter { $0.hasSuffix(".jpg") && $0 != "contact-sheet.jpg" }
        let taken = Int(try await sqlite(db, "SELECT count(*) FROM slots WHERE state = 'taken'")) ?? -1
        #expect(try await sqlite(db, "SELECT count(*) FROM slots WHERE state NOT IN ('taken', 'missed')") == "0")
        #expect(taken >= 8 && Set(jpegs).count == taken * 3, "\(taken) taken, \(jpegs.count) JPEGs")
        // The keogram: one column per slot of the job, both runs, a whole PNG.
        let png = try #require(FileManager.default.contents(atPath: dir + "/keogram.png"), "no keogram")
        #expect(png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
        let header = [UInt8](png[16..<24])
        let width = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        let height = Int(header[4]) << 24 | Int(header[5]) << 16 | Int(header[6]) << 8 | Int(header[7])
        #expect(width == 12 && height == 240, "\(width)x\(height)")
        #expect(png.suffix(8).prefix(4) == Data("IEND".utf8), "the PNG ends with its IEND chunk")
        // The contact sheet: a whole JPEG of the slots' thumbnails (every slot taken: under 48).
        let sheet = try #require(FileManager.default.contents(atPath: dir + "/contact-sheet.jpg"), "no contact sheet")
        #expect(sheet.prefix(2) == Data([0xFF, 0xD8]) && sheet.suffix(2) == Data([0xFF, 0xD9]))
        #expect(try await sqlite(db, "SELECT count(*) FROM thumbs") == String(taken))
    }

    @Test("long intervals: the camera is stopped between slots and started again before each, its start-up measured and journalled, every slot still taken and phase-locked; 'never' keeps it streaming")
    func stopsWhenIdle() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-idle-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let args = ["timelapse", "--camera", "sim:imx219", "--virtual-time", "--size", "640x480", "--interval", "10m", "--ev", "-1,0,1", "--count", "4", "--json"]
        let r = try await runChild(Self.exe, args + ["--output", dir])
        #expect(r.status == 0, "\(r.err)")
        let (slots, summary) = try lines(r.out)
        #expect(slots.count == 4 && slots.allSatisfy { $0["state"] as? String == "taken" }, "\(slots)")
        // Stopped between slots, and before the first too when it is more than the idle limit
        // away (the 10 min grid's first slot is up to 10 min off).
        let stops = try #require(summary["cameraStoppedWhileIdle"] as? Int)
        #expect(stops == 3 || stops == 4, "\(summary)")
        // Started early enough for every slot: each exposure began within a frame (33 ms) of
        // its instant, and the lock works after a start. Not every time: in some runs the slots
        // after a start all land a frame late after a second stretch ("planned frame 99;
        // exposed 33.33 ms after"), seen at this test's first commit too, an issue of its own.
        let locked = slots.dropFirst().filter { ($0["phaseLock"] as? String)?.hasPrefix("locked: frame") == true }
        #expect(!locked.isEmpty && slots.dropFirst().allSatisfy { ($0["scheduleErrorUs"] as? Double ?? 99_999) < 40_000 }, "\(slots.map { $0["phaseLock"] ?? "-" })")
        let db = dir + "/timelapse.sqlite"
        #expect(try await sqlite(db, "SELECT count(*), sum(reason = 'stopped while idle'), min(startup_ns) > 0 FROM camera_starts") == "\(stops + 1)|\(stops)|1")
        // Started again before its slot by more than the start-up it measured.
        let rows = try await sqlite(db, "SELECT c.wall_ns, c.startup_ns, s.wall_ns FROM camera_starts c JOIN slots s ON s.idx = c.before_slot WHERE c.reason = 'stopped while idle'")
        for row in rows.split(separator: "\n") {
            let v = row.split(separator: "|").compactMap { Int64($0) }
            #expect(v.count == 3 && v[2] - v[0] > v[1], "started at \(v[0]), start-up \(v[1]) ns, slot at \(v[2])")
        }
        let never = try await runChild(Self.exe, args + ["--output", dir + "-never", "--stop-camera-when-idle", "never"])
        defer { try? FileManager.default.removeItem(atPath: dir + "-never") }
        #expect(never.status == 0, "\(never.err)")
        #expect(try lines(never.out).summary["cameraStoppedWhileIdle"] as? Int == 0)
    }

    @Test("focus locked before the slots (its first frame reported) and the files named by --name")
    func focusAndNames() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-focus-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await runChild(Self.exe, ["timelapse", "--camera", "sim:imx708", "--virtual-time", "--size", "640x480", "--interval", "2s", "--count", "2",
                                              "--ev", "-1,1", "--lens", "1.5", "--name", "roof/{capture}_{step}", "--output", dir, "--json"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.err.contains("focus locked at 1.50 dpt: first frame carrying it"), "\(r.err)")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir + "/roof").sorted()
        #expect(files.contains("0001_1.jpg") && files.contains("0002_2.jpg"), "\(files)")
        let noMotor = try await runChild(Self.exe, ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--size", "640x480", "--count", "2", "--lens", "1", "--output", dir + "-x"])
        defer { try? FileManager.default.removeItem(atPath: dir + "-x") }
        #expect(noMotor.status != 0 && noMotor.err.contains("no focus motor"), "\(noMotor.err)")
    }

    @Test("bad timelapse settings are refused with the accepted range", arguments: [
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--interval", "0.01s"], "--interval must be a period from 0.1 s"),
        (["timelapse", "--output", "/tmp/x", "--interval", "10s"], "give --count N or --until TIME"),
        (["timelapse", "--output", "/tmp/x", "--until", "tomorrow"], "2026-12-01T08:00"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--ramp-step", "5"], "--ramp-step"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--scene-schedule", "dusk"], "daynight:PERIOD"),
        (["timelapse", "--output", "/tmp/sb-ambiguous-\(getpid())", "--count", "1", "--interval", "2s", "--virtual-time", "--exposures", "1/100,1/100.2"], "cannot be told apart by the frames' metadata"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--scene-schedule", "10:400,5:1"], "--scene-schedule's times must increase: 5 s comes after 10 s"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--fault-disconnect-at", "3"], "from 10 on"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--keep", "lots"], "--keep must be a size"),
        (["timelapse", "--output", "/tmp/x", "--until", "2020-01-01T00:00"], "is already past"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--interval", "-5s"], "--interval must be a period"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--keep-days", "0"], "--keep-days"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--stop-camera-when-idle", "1s"], "--stop-camera-when-idle must be a period from 10 s"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--lens", "99"], "--lens must be a finite number in 0...32 dioptres"),
        (["timelapse", "--output", "/tmp/x", "--count", "3", "--name", "{bogus}"], "unknown token {bogus}"),
    ])
    func refused(args: [String], says: String) async throws {
        let r = try await runChild(Self.exe, args)
        #expect(r.status == 64 && r.err.contains(says), "\(args): \(r.status) \(r.err)")
    }

    @Test("a slot whose first exposure would begin past its lateness limit is skipped at exposure start, never fired late (long exposures without the lock begin seconds after the instant)")
    func lateSlotsSkipped() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-late-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await runChild(Self.exe, ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--size", "640x480", "--exposures", "1/2,1,2",
                                              "--no-phase-lock", "--interval", "8s", "--count", "3", "--output", dir, "--json"])
        let db = dir + "/timelapse.sqlite"
        // A run that took no slot at all exits 1 (it tried, and got nothing).
        let taken = try await sqlite(db, "SELECT count(*) FROM slots WHERE state = 'taken'")
        #expect(r.status == (taken == "0" ? 1 : 0), "\(taken) taken, status \(r.status): \(r.err)")
        // The limit is min(8 s / 2, 1 s).
        #expect(try await sqlite(db, "SELECT count(*) FROM slots WHERE state = 'taken' AND error_ns > 1000000000") == "0")
        #expect(try await sqlite(db, "SELECT count(*) FROM slots WHERE state = 'skipped' AND reason LIKE 'late: the first exposure would begin%'") != "0")
        #expect(try await sqlite(db, "SELECT count(*) FROM files f JOIN slots s ON s.idx = f.idx WHERE s.state = 'skipped'") == "0", "a skipped slot left files")
    }

    @Test("killed with SIGKILL at 50 random moments and restarted each time: no partial file under a final name, no slot or capture ID twice, the journal consistent, every slot taken or recorded")
    func killAndResume() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-kill-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Enough that the slots outlast the 50 runs: a run gets through some two to four slots
        // before its kill (more on an idle machine), and a run that finds none left ends by
        // itself instead of being killed.
        let slots = 150
        // DNG too: its raw stream's files are big, so kills often land between a slot's files
        // and its journal row (the window the journal's intents cover).
        let keep = 160 << 20
        let args = ["timelapse", "--camera", "sim:imx219", "--virtual-time", "--size", "640x480", "--interval", "1s", "--ev", "-1,0,1",
                    "--format", "dng,jpeg", "--count", String(slots), "--output", dir, "--keep", "160MB", "--json"]
        var rng = SystemRandomNumberGenerator()
        var kills = 0
        for _ in 0..<50 {
            // Killed once it has reported a random number of slots, a random moment into the next.
            let afterLines = Int.random(in: 0...3, using: &rng)
            // Anywhere in the slot that follows (a slot takes some 100 to 300 ms here): the
            // moment of the kill, not a wait for anything.
            let delay = UInt32.random(in: 0...400_000, using: &rng)
            let finished = try await offPool { () throws -> Bool in
                let p = Process()
                p.executableURL = URL(fileURLWithPath: Self.exe)
                p.arguments = args
                let out = Pipe()
                p.standardOutput = out
                let err = Pipe()
                p.standardError = err
                try p.run()
                var seen = 0
                var buffer = Data()
                while seen < afterLines {
                    let chunk = out.fileHandleForReading.availableData
                    if chunk.isEmpty { break }
                    buffer.append(chunk)
                    seen = buffer.filter { $0 == 10 }.count
                }
                usleep(delay)
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
                if p.terminationReason == .exit {
                    let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                    #expect(p.terminationStatus == 0, "a run ended by itself with \(p.terminationStatus): \(text)")
                }
                return p.terminationReason == .exit
            }
            if !finished { kills += 1 }
            // After every kill: nothing partial under a final name, the journal consistent.
            try checkFiles(dir)
            // (Killed before it made the journal, there is none yet.)
            if FileManager.default.fileExists(atPath: dir + "/timelapse.sqlite") {
                #expect(try await sqlite(dir + "/timelapse.sqlite", "PRAGMA integrity_check") == "ok")
            }
        }
        /// The captures' files on disk (photos and sidecars), and those the journal holds.
        func onDisk() throws -> Set<String> {
            Set(try FileManager.default.subpathsOfDirectory(atPath: dir).filter { [".jpg", ".dng", ".json"].contains(where: $0.hasSuffix) && !$0.hasPrefix("contact-sheet") }.map { dir + "/" + $0 })
        }
        #expect(kills >= 25, "most runs were killed before they finished (\(kills) of 50)")
        // Then to the end.
        let last = try await runChild(Self.exe, args)
        #expect(last.status == 0, "\(last.err)")
        let db = dir + "/timelapse.sqlite"
        #expect(try await sqlite(db, "SELECT count(*), count(DISTINCT idx), min(idx), max(idx) FROM slots") == "\(slots)|\(slots)|0|\(slots - 1)")
        // A slot a kill cut off between its files and its row is recorded on the next start,
        // taken (every file there) or failed, and says so.
        #expect(try await sqlite(db, "SELECT count(*) FROM slots WHERE state NOT IN ('taken', 'missed', 'skipped') AND reason NOT LIKE 'interrupted:%'") == "0")
        print("slots reconciled after a kill: \(try await sqlite(db, "SELECT state, count(*) FROM slots WHERE reason LIKE 'interrupted:%' GROUP BY state"))")
        // Disk and journal agree: every capture file on disk is journalled (so retention can
        // delete it), every journalled file not deleted is on disk, and retention holds.
        let journalled = Set(try await sqlite(db, "SELECT path FROM files WHERE deleted = 0").split(separator: "\n").map(String.init))
        let disk = try onDisk()
        #expect(disk.subtracting(journalled).isEmpty, "on disk, unknown to the journal: \(disk.subtracting(journalled).sorted().prefix(5))")
        #expect(journalled.subtracting(disk).isEmpty, "journalled, not on disk: \(journalled.subtracting(disk).sorted().prefix(5))")
        let bytes = try disk.reduce(0) { $0 + ((try FileManager.default.attributesOfItem(atPath: $1)[.size] as? Int) ?? 0) }
        let slotBytes = Int(try await sqlite(db, "SELECT max(b) FROM (SELECT sum(bytes) AS b FROM files GROUP BY idx)")) ?? 0
        #expect(bytes <= keep + slotBytes, "\(bytes) bytes of captures on disk against --keep \(keep) (a slot is \(slotBytes))")
        #expect(try await sqlite(db, "SELECT count(*) FROM (SELECT capture_id FROM slots WHERE capture_id IS NOT NULL GROUP BY capture_id HAVING count(*) > 1)") == "0")
        // Every journalled file is there, whole.
        for row in try await sqlite(db, "SELECT path, bytes FROM files WHERE deleted = 0").split(separator: "\n") {
            let p = row.split(separator: "|")
            let size = (try? FileManager.default.attributesOfItem(atPath: String(p[0]))[.size] as? Int) ?? -1
            #expect(size == Int(p[1]), "\(p[0])")
        }
        try checkFiles(dir)
    }

    @Test("the output filesystem fills mid-run: the job pauses with a clear message, resumes when space is freed, every file written before intact",
          .enabled(if: getuid() == 0, "mounts a small tmpfs as the output filesystem, which needs root"))
    func diskFull() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-full-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let mounted = try await runChild("/bin/mount", ["-t", "tmpfs", "-o", "size=24m", "tmpfs", dir])
        try #require(mounted.status == 0, "mount: \(mounted.err)")
        defer {
            _ = try? runChildBlocking("/bin/umount", [dir])
            try? FileManager.default.removeItem(atPath: dir)
        }
        let args = ["timelapse", "--camera", "sim:imx219", "--virtual-time", "--size", "640x480", "--interval", "1s", "--count", "300",
                    "--reserve", "2", "--output", dir, "--json"]
        let filler = dir + "/filler"
        let (out, err, status) = try await offPool { () throws -> (String, String, Int32) in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Self.exe)
            p.arguments = args
            let out = Pipe(), err = Pipe()
            p.standardOutput = out
            p.standardError = err
            try p.run()
            var text = Data()
            var filled = false, freed = false
            while true {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                text.append(chunk)
                let lines = text.split(separator: 10).count
                if !filled && lines >= 5 {
                    // Fill the disk to within 1 MiB: under the job's 2 MiB reserve.
                    var fs = statvfs()
                    statvfs(dir, &fs)
                    let free = Int(fs.f_bavail) * Int(fs.f_frsize)
                    #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: max(0, free - (1 << 20)))), "created")
                    filled = true
                } else if filled && !freed && String(decoding: text, as: UTF8.self).contains("\"paused: ") {
                    try FileManager.default.removeItem(atPath: filler)
                    freed = true
                }
            }
            p.waitUntilExit()
            return (String(decoding: text, as: UTF8.self), String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self), p.terminationStatus)
        }
        #expect(status == 0, "\(err)")
        let (slots, summary) = try lines(out)
        let paused = slots.filter { ($0["reason"] as? String)?.hasPrefix("paused: not enough space") == true }
        #expect(!paused.isEmpty, "no slot was paused: \(summary)")
        let firstPaused = paused.first?["slot"] as? Int ?? 0
        #expect(slots.contains { ($0["slot"] as? Int ?? 0) > firstPaused && $0["state"] as? String == "taken" }, "it never resumed")
        #expect(err.contains("pausing at slot") && err.contains("space is back"), "\(err)")
        #expect(summary["journalIntegrity"] as? String == "ok")
        // Everything written before, during and after is whole, and as journalled.
        try checkFiles(dir)
        let db = dir + "/timelapse.sqlite"
        for row in try await sqlite(db, "SELECT path, bytes FROM files WHERE deleted = 0").split(separator: "\n") {
            let p = row.split(separator: "|")
            let size = (try? FileManager.default.attributesOfItem(atPath: String(p[0]))[.size] as? Int) ?? -1
            #expect(size == Int(p[1]), "\(p[0])")
        }
        #expect(try await sqlite(db, "SELECT count(*) FROM slots") == "300")
    }

    @Test("a camera that goes away mid-run (the simulator's fault injection) is opened again and the job goes on; the slot it took with it is recorded as failed, with why")
    func cameraReopened() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-lost-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await runChild(Self.exe, ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--size", "640x480", "--interval", "10s", "--count", "12",
                                              "--fault-disconnect-at", "1000", "--output", dir, "--json"])
        #expect(r.status == 0, "\(r.err)")
        let (slots, summary) = try lines(r.out)
        #expect(slots.count == 12)
        #expect((summary["cameraReopened"] as? Int ?? 0) >= 2, "\(summary)")
        let failed = slots.filter { $0["state"] as? String == "failed" }
        // A slot the camera went away during fails; one whose photos were taken before it went
        // (during the white-balance frames after them) is taken, and the camera is still opened
        // again: where the disconnect falls depends on how many frames each slot used.
        let reopened = summary["cameraReopened"] as? Int ?? 0
        #expect(failed.count >= 1 && failed.count <= reopened, "at most one failed slot per time the camera went away: \(failed.count) failed, \(reopened) reopened")
        #expect(failed.allSatisfy { ($0["reason"] as? String)?.contains("went away") == true }, "\(failed)")
        #expect((summary["journalTaken"] as? Int ?? 0) + failed.count == 12, "every other slot taken: \(summary)")
        #expect(r.err.contains("opening it again") && r.err.contains("the camera is back"), "\(r.err)")
    }

    @Test("a run that tried slots and took none (every one skipped: no room beside the reserve) exits 1 after its summary, saying why; a script or service manager does not read it as success")
    func noSlotTaken() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-none-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A reserve of 1 TiB: no disk here has that free, so every slot is skipped for space.
        let r = try await runChild(Self.exe, ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--size", "640x480", "--interval", "10s", "--count", "3",
                                              "--reserve", "1048576", "--output", dir, "--json"])
        let (slots, summary) = try lines(r.out)
        #expect(slots.count == 3 && summary["thisTaken"] as? Int == 0, "\(summary)")
        #expect(r.status == 1, "status \(r.status): \(r.err)")
        #expect(r.err.contains("no slot of this run was taken"), "\(r.err)")
    }

    @Test("retention keeps the newest slots within --keep: the oldest slots' files go whole, the journal says which, the disk agrees")
    func retention() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-keep-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await runChild(Self.exe, ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--size", "640x480", "--interval", "10s", "--count", "30",
                                              "--ev", "-1,0,1", "--keep", "1MB", "--output", dir, "--json"])
        #expect(r.status == 0, "\(r.err)")
        let (_, summary) = try lines(r.out)
        let deleted = summary["slotsDeletedByRetention"] as? Int ?? 0
        #expect(deleted > 10, "\(summary)")
        #expect((summary["bytesKept"] as? Int ?? .max) <= 1_000_000, "\(summary)")
        let db = dir + "/timelapse.sqlite"
        // Whole slots, oldest first: every deleted slot is older than every kept one.
        #expect(try await sqlite(db, "SELECT (SELECT max(idx) FROM files WHERE deleted = 1) < (SELECT min(idx) FROM files WHERE deleted = 0)") == "1")
        #expect(try await sqlite(db, "SELECT count(DISTINCT idx) FROM files WHERE deleted = 1") == String(deleted))
        #expect(try await sqlite(db, "SELECT count(*) FROM (SELECT idx FROM files GROUP BY idx HAVING min(deleted) != max(deleted))") == "0", "a slot partly deleted")
        for row in try await sqlite(db, "SELECT path, deleted FROM files").split(separator: "\n") {
            let p = row.split(separator: "|")
            #expect(FileManager.default.fileExists(atPath: String(p[0])) == (p[1] == "0"), "\(row)")
        }
    }

    /// Every JPEG ends with its end-of-image marker, every DNG is a TIFF of its full length,
    /// every sidecar parses: nothing partial under a final name.
    func checkFiles(_ dir: String) throws {
        let names = (try? FileManager.default.subpathsOfDirectory(atPath: dir)) ?? []
        for name in names {
            let path = dir + "/" + name
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            if name.hasSuffix(".jpg") {
                #expect(data.count > 4 && data.prefix(2) == Data([0xFF, 0xD8]) && data.suffix(2) == Data([0xFF, 0xD9]), "partial JPEG \(name)")
            } else if name.hasSuffix(".dng") {
                #expect(data.count > 1024 && (data.prefix(4) == Data([0x49, 0x49, 0x2A, 0x00]) || data.prefix(4) == Data([0x4D, 0x4D, 0x00, 0x2A])), "partial DNG \(name)")
            } else if name.hasSuffix(".json") {
                #expect((try? JSONSerialization.jsonObject(with: data)) != nil, "partial sidecar \(name)")
            }
        }
    }

    @Test("white balance is cross-faded: the light changes between runs (3000 K, then daylight), the resumed job starts from the journal's gains and moves each slot at most --wb-step towards what AWB measures, every frame of a slot carrying the gains applied; --wb-step 0 leaves AWB alone")
    func whiteBalanceFade() async throws {
        let dir = NSTemporaryDirectory() + "sb-timelapse-wb-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let args = ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--size", "640x480", "--interval", "10s", "--ev", "-1,0,1", "--output", dir, "--json"]
        func applied(_ out: String) throws -> [(slot: Int, red: Double, blue: Double, measuredRed: Double, frames: [Double])] {
            let (slots, _) = try lines(out)
            return try slots.map { s in
                let w = try #require(s["whiteBalance"] as? [String: Any], "\(s)")
                return (s["slot"] as? Int ?? -1, w["appliedRed"] as? Double ?? 0, w["appliedBlue"] as? Double ?? 0, w["measuredRed"] as? Double ?? 0,
                        s["colourGains"] as? [Double] ?? [])
            }
        }
        let warm = try await runChild(Self.exe, args + ["--count", "3", "--illuminant", "3000"])
        #expect(warm.status == 0, "\(warm.err)")
        let first = try applied(warm.out)
        let day = try await runChild(Self.exe, args + ["--count", "14", "--illuminant", "d65"])
        #expect(day.status == 0, "\(day.err)")
        let second = try applied(day.out)
        #expect(second.count == 11 && second.first?.slot == 3)
        var previous = try #require(first.last)
        for s in second {
            #expect(abs(log2(s.red / previous.red)) <= 0.1 + 1e-9 && abs(log2(s.blue / previous.blue)) <= 0.1 + 1e-9, "slot \(s.slot): \(previous) -> \(s)")
            #expect(s.red >= previous.red - 1e-9 && s.red <= s.measuredRed + 1e-9, "towards daylight's red gain")
            #expect(s.frames.count == 2 && abs(s.frames[0] - s.red) < 1e-6 && abs(s.frames[1] - s.blue) < 1e-6, "the slot's frames carry \(s.red), \(s.blue): \(s.frames)")
            previous = s
        }
        // It arrives: the last slots are within a few percent of daylight's gains.
        #expect(abs(log2(previous.red / previous.measuredRed)) < 0.05, "\(previous)")
        let off = try await runChild(Self.exe, ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--size", "640x480", "--interval", "10s",
                                                "--count", "2", "--wb-step", "0", "--output", dir + "-off", "--json"])
        defer { try? FileManager.default.removeItem(atPath: dir + "-off") }
        #expect(off.status == 0 && !off.out.contains("whiteBalance"), "\(off.err)")
        let bad = try await runChild(Self.exe, args + ["--count", "1", "--wb-step", "5"])
        #expect(bad.status == 64 && bad.err.contains("--wb-step"), "\(bad.err)")
    }
}
