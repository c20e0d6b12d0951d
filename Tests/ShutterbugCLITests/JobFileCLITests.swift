import Foundation
import TestSupport
import Testing

/// A timelapse job from a YAML file, a list of times instead of a grid, and a manual bracket.
@Suite("timelapse job files, lists of times and manual brackets", .timeLimit(.minutes(3)))
struct JobFileCLITests {
    static var exe: String { OutputCLITests.exe }

    func scratch() -> String {
        let dir = NSTemporaryDirectory() + "sb-jobfile-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }


    /// An ISO time `seconds` from now, local, as a user would write it.
    func later(_ seconds: Int) -> String {
        DateFormatter.local.string(from: Date().addingTimeInterval(TimeInterval(seconds)))
    }

    @Test("config check names every mistake at its line (unknown key with a suggestion, conflicting and out-of-range values, a value of the wrong kind, YAML syntax) and exits 65; timelapse refuses the file the same way before opening a camera")
    func mistakes() async throws {
        let dir = scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/bad.yaml"
        try """
            # the roof camera
            job: roof
            intervall: 30s
            ev: [-2, 0, 2]
            exposures: [1/1000, 1/250]
            max-gain: 200
            count: abc
            output: \(dir)/out
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let check = try await runChild(Self.exe, ["config", "check", file])
        #expect(check.status == 65)
        let lines = check.out.split(separator: "\n").map(String.init)
        #expect(lines.contains("\(file):3: intervall: Unknown option '--intervall'. Did you mean '--interval'?"), "\(check.out)")
        #expect(lines.contains { $0.hasPrefix("\(file):4: ev: --ev and --exposures exclude each other") })
        #expect(lines.contains("\(file):6: max-gain: --max-gain must be a finite number in 1...64, not 200"))
        #expect(lines.contains { $0.hasPrefix("\(file):7: count: The value 'abc' is invalid") })
        // The file gives no valid end: said once, without a line.
        #expect(lines.contains("\(file): give --count N or --until TIME: a timelapse needs an end (--until stopped runs until it is stopped)"))
        #expect(lines.last == "\(file): 5 mistakes (checked as timelapse's job file)", "\(check.out)")
        let run = try await runChild(Self.exe, ["timelapse", "--job-file", file, "--virtual-time"])
        #expect(run.status == 64 && run.err.contains("the job file has 5 mistakes") && run.err.contains("bad.yaml:3: intervall"), "\(run.err)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/out"), "nothing was written")

        try "interval: 30s\n  ev: 1\n".write(toFile: file, atomically: true, encoding: .utf8)
        let syntax = try await runChild(Self.exe, ["config", "check", file])
        #expect(syntax.status == 65 && syntax.out.hasPrefix("\(file):2: not valid YAML"), "\(syntax.out)")
        let missing = try await runChild(Self.exe, ["config", "check", dir + "/none.yaml"])
        #expect(missing.status == 65 && missing.out.contains("cannot be read: No such file or directory"))
    }

    @Test("a job file runs a manual bracket at listed times; the command line overrides the file; run again, the list keeps its numbering")
    func listedManual() async throws {
        let dir = scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/job.yaml"
        // Four listed times, given out of order; the virtual clock reaches each at once.
        let times = [later(3600), later(60), later(7200), later(1800)]
        try """
            job: listed
            camera: sim:imx477
            virtual-time: true
            size: 640x480
            exposures: [1/1000, 1/250, 1/60]
            gain: 2
            at: [\(times.joined(separator: ", "))]
            output: \(dir)/out
            json: true
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let check = try await runChild(Self.exe, ["config", "check", file])
        #expect(check.status == 0 && check.out.contains("no mistakes"), "\(check.out)")
        // --count on the command line: two of the four this time.
        let r = try await runChild(Self.exe, ["timelapse", "--job-file", file, "--count", "2"])
        #expect(r.status == 0, "\(r.err)")
        let objects = try r.out.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        let slots = objects.filter { $0["slot"] != nil }
        #expect(slots.map { $0["slot"] as? Int } == [0, 1] && slots.allSatisfy { $0["state"] as? String == "taken" }, "\(slots)")
        for s in slots {
            // The same manual steps every slot, at gain 2, never ramped.
            let exposures = try #require(s["exposuresUs"] as? [Double])
            #expect(exposures.count == 3 && abs(exposures[0] - 1000) < 15 && abs(exposures[1] - 4000) < 15 && abs(exposures[2] - 16_667) < 15, "\(exposures)")
            #expect((s["gains"] as? [Double])?.allSatisfy { abs($0 - 2) < 0.05 } == true, "\(s["gains"] ?? "-")")
            #expect(s["ramp"] == nil)
        }
        let db = dir + "/out/timelapse.sqlite"
        // Slot k is the k-th time in order: 60 s, then 1800 s from when the test began.
        let walls = try await sqlite(db, "SELECT wall_ns FROM slots ORDER BY idx").split(separator: "\n").compactMap { Int64($0) }
        #expect(walls.count == 2 && walls[1] - walls[0] == 1740 * 1_000_000_000, "\(walls)")
        // Again, without the count: the list's last two, numbered 2 and 3.
        let again = try await runChild(Self.exe, ["timelapse", "--job-file", file])
        #expect(again.status == 0, "\(again.err)")
        #expect(try await sqlite(db, "SELECT group_concat(idx || ':' || state, ' ') FROM (SELECT * FROM slots ORDER BY idx)") == "0:taken 1:taken 2:taken 3:taken")
        let all = try await sqlite(db, "SELECT wall_ns FROM slots ORDER BY idx").split(separator: "\n").compactMap { Int64($0) }
        #expect(zip(all.dropFirst(), all).map { ($0 - $1) / 1_000_000_000 } == [1740, 1800, 3600], "\(all)")
        // The job is another with other settings: refused, not mixed in.
        let other = try await runChild(Self.exe, ["timelapse", "--job-file", file, "--exposures", "1/500"])
        #expect(other.status != 0 && other.err.contains("listed"), "\(other.err)")
    }

    @Test("--start puts the first slot at or after it, the camera stopped until shortly before; --until stopped has no end but the count or a signal")
    func startLater() async throws {
        let dir = scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let start = later(3 * 3600)
        let r = try await runChild(Self.exe, ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--size", "640x480", "--interval", "10s",
                                              "--start", start, "--until", "stopped", "--count", "2", "--output", dir, "--json"])
        #expect(r.status == 0, "\(r.err)")
        let objects = try r.out.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        let walls = objects.compactMap { $0["wall"] as? String }
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let first = try #require(walls.first.flatMap { f.date(from: $0) })
        let wanted = try #require(DateFormatter.local.date(from: start))
        #expect(walls.count == 2 && first >= wanted && first.timeIntervalSince(wanted) < 10, "\(walls) after \(start)")
        let summary = try #require(objects.last)
        #expect(summary["cameraStoppedWhileIdle"] as? Int == 1, "the camera waits stopped for the start: \(summary)")
    }

    @Test("wrong --at and --exposures are refused with the accepted form: a mixed list, a bad time of day, all past, with --interval, exposures too long for the gap, --gain without --exposures")
    func refusals() async throws {
        let dir = scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let base = ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--output", dir + "/out"]
        let cases: [([String], String)] = [
            (["--at", "08:00,2026-12-01T08:00"], "not both in one list"),
            (["--at", "25:00", "--count", "2"], "not a time of day"),
            (["--at", "2020-01-01T08:00"], "already past"),
            (["--at", "08:00", "--interval", "30s", "--count", "1"], "exclude each other"),
            (["--at", "08:00"], "give --count N or --until TIME"),
            (["--gain", "2", "--count", "1"], "--gain applies to --exposures only"),
            (["--until", "soon"], "--until must be a date and time"),
            (["--start", "\(later(7200))", "--until", "\(later(3600))"], "is not after --start"),
            (["--exposures", "1/1000,nan", "--count", "1"], "--exposures"),
            (["--exposures", "1/1000", "--gain", "100", "--count", "1"], "--gain must be"),
        ]
        for (args, expected) in cases {
            let r = try await runChild(Self.exe, base + args)
            #expect(r.status == 64 && r.err.contains(expected), "\(args): \(r.err)")
        }
        let long = try await runChild(Self.exe, base + ["--exposures", "1/2,1", "--interval", "2s", "--count", "1"])
        #expect(long.status == 64 && long.err.contains("more than half the time between slots"), "\(long.err)")
    }
}

extension DateFormatter {
    /// 2026-12-01T08:00:00 in the local zone, as the command reads it.
    static var local: DateFormatter {
        let f = DateFormatter()
        f.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
        return f
    }
}
