import Foundation
import ImageOutput
import Jobs

/// What a soak left, judged from the output folder alone: every capture's sidecar against the
/// files on disk, and every photo at auto exposure's 0 EV by its pixels (decoded by djpeg, not
/// by Shutterbug). The soak test and `shutterbug-bench soak` judge with it.
public struct SoakJudgement: Sendable, Codable {
    /// Captures (sidecars) read, and those saying they are incomplete.
    public var captures = 0
    public var incomplete: [String] = []
    /// Files a sidecar lists that are not on disk, and photos on disk no sidecar lists.
    public var missing: [String] = []
    public var orphans: [String] = []
    /// Temporary files left (a write never finished).
    public var temporaries: [String] = []
    /// 0 EV photos taken by auto exposure (the API's, not a job's ramp), their median linear
    /// mean (the reference), and those more than 1/3 EV from it.
    public var zeroEVJudged = 0
    public var zeroEVReference = 0.0
    public var zeroEVWrong: [String] = []
    /// EV brackets of -2/0/+2 whose steps' exposure × gain do not step by 2 EV (±0.15).
    public var evBracketsJudged = 0
    public var evBracketsWrong: [String] = []
    /// The jobs' journals (read by sqlite3, not by Shutterbug): files they list that are not
    /// on disk, slots that failed for want of space, and slots that failed for anything else.
    public var journalMissing: [String] = []
    public var slotsFailedForSpace = 0
    public var slotsFailedOther: [String] = []
    /// Slots skipped for anything but the disk (a job paused for space): late ones, where other
    /// captures held the camera at the slot's instant, or a service killed mid-slot. Counted,
    /// not in `ok`: the rule is that a late slot is skipped, never fired late.
    public var slotsSkippedOther: [String] = []

    public var ok: Bool {
        incomplete.isEmpty && missing.isEmpty && orphans.isEmpty && temporaries.isEmpty && zeroEVWrong.isEmpty && evBracketsWrong.isEmpty
            && journalMissing.isEmpty && slotsFailedOther.isEmpty
    }

    /// Whether a reason is the disk's: no space (the writer's, the job's pause, the journal's).
    public static func forSpace(_ reason: String) -> Bool {
        ["not enough space", "No space left", "ENOSPC", "database or disk is full"].contains { reason.contains($0) }
    }

    /// Rows of `sql` on `database`, by the sqlite3 shell (one column per '|'); nil when it fails.
    static func rows(_ database: String, _ sql: String) -> [[String]]? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        p.arguments = ["-readonly", "-cmd", ".timeout 5000", database, sql]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return nil }
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { return nil }
        return text.split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
    }

    /// Judges `directory`. Sidecars under a folder named in `jobFolders` are a timelapse job's:
    /// their files are checked, their pixels not (a job follows its own exposure ramp).
    public static func judge(_ directory: String, jobFolders: Set<String> = []) throws -> SoakJudgement {
        var j = SoakJudgement()
        let fm = FileManager.default
        var listed: Set<String> = []
        var photos: [String] = []
        var zero: [(name: String, mean: Double)] = []
        guard let walk = fm.enumerator(atPath: directory) else { return j }
        var sidecars: [String] = []
        while let f = walk.nextObject() as? String {
            let name = (f as NSString).lastPathComponent
            if OutputDirectory.isTemporary(name) { j.temporaries.append(f) }
            if f.hasSuffix("_capture.json") { sidecars.append(f) }
            if (f.hasSuffix(".jpg") || f.hasSuffix(".dng")) && !name.hasPrefix("contact-sheet") { photos.append(f) }
        }
        for f in sidecars.sorted() {
            let full = directory + "/" + f
            let folder = (full as NSString).deletingLastPathComponent
            guard let data = fm.contents(atPath: full), let car = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                j.incomplete.append("\(f): unreadable")
                continue
            }
            j.captures += 1
            if let incomplete = car["incomplete"] as? [String: Any] {
                j.incomplete.append(f)
                // Photos renamed into place after the sidecar a killed process left, listed by
                // the next start.
                for name in incomplete["foundOnRestart"] as? [String] ?? [] {
                    let path = ((folder + "/" + name) as NSString).standardizingPath
                    listed.insert(path)
                    if !fm.fileExists(atPath: path) { j.missing.append("\(f) lists \(name) as found on restart") }
                }
            }
            let steps = car["steps"] as? [[String: Any]] ?? []
            for step in steps {
                for file in (step["files"] as? [[String: Any]] ?? []).compactMap({ $0["path"] as? String }) {
                    let path = ((folder + "/" + file) as NSString).standardizingPath
                    listed.insert(path)
                    if !fm.fileExists(atPath: path) { j.missing.append("\(f) lists \(file)") }
                }
            }
            if let top = f.split(separator: "/").first, jobFolders.contains(String(top)) { continue }
            let requested = steps.map { $0["requested"] as? String ?? "" }
            for (i, r) in requested.enumerated() where r == "+0.0 EV" || r == "the settings in force" {
                guard let jpeg = (steps[i]["files"] as? [[String: Any]] ?? []).compactMap({ $0["path"] as? String }).first(where: { $0.hasSuffix(".jpg") }),
                      let mean = try meanLinear(folder + "/" + jpeg) else { continue }
                zero.append(((f as NSString).lastPathComponent + " step \(i + 1)", mean))
            }
            if requested == ["-2.0 EV", "+0.0 EV", "+2.0 EV"] {
                let totals = steps.map { s -> Double in
                    let m = s["frame"] as? [String: Any] ?? [:]
                    return (m["exposureTimeUs"] as? Double ?? 0) * (m["analogueGain"] as? Double ?? 0) * (m["digitalGain"] as? Double ?? 1)
                }
                j.evBracketsJudged += 1
                if !(abs(log2(totals[1] / totals[0]) - 2) < 0.15 && abs(log2(totals[2] / totals[1]) - 2) < 0.15) {
                    j.evBracketsWrong.append("\(f): \(totals.map { String(format: "%.0f", $0) })")
                }
            }
        }
        // A job's journal is its record: a slot whose sidecar could not be written (the disk
        // full) is there with the files it did write.
        for folder in jobFolders.sorted() {
            let db = directory + "/" + folder + "/timelapse.sqlite"
            guard fm.fileExists(atPath: db) else { continue }
            guard let files = rows(db, "SELECT path FROM files WHERE deleted = 0;"),
                  let failed = rows(db, "SELECT idx, reason FROM slots WHERE state = 'failed';"),
                  let skipped = rows(db, "SELECT idx, reason FROM slots WHERE state = 'skipped';") else {
                j.journalMissing.append("\(folder): the journal could not be read")
                continue
            }
            for f in files.compactMap(\.first) {
                let path = (f as NSString).standardizingPath
                listed.insert(path)
                if !fm.fileExists(atPath: path) { j.journalMissing.append("\(folder) lists \(f)") }
            }
            for row in failed {
                let reason = row.dropFirst().joined(separator: "|")
                if forSpace(reason) { j.slotsFailedForSpace += 1 } else { j.slotsFailedOther.append("\(folder) slot \(row.first ?? "?"): \(reason)") }
            }
            for row in skipped {
                let reason = row.dropFirst().joined(separator: "|")
                if !(reason.hasPrefix("paused:") && forSpace(reason)) { j.slotsSkippedOther.append("\(folder) slot \(row.first ?? "?") skipped: \(reason)") }
            }
        }
        for p in photos where !listed.contains(((directory + "/" + p) as NSString).standardizingPath) { j.orphans.append(p) }
        j.zeroEVJudged = zero.count
        if !zero.isEmpty {
            let reference = zero.map(\.mean).sorted()[zero.count / 2]
            j.zeroEVReference = reference
            j.zeroEVWrong = zero.filter { abs(log2($0.mean / reference)) > 1.0 / 3 }.map { "\($0.name): \(String(format: "%+.2f", log2($0.mean / reference))) EV" }
        }
        return j
    }

    /// Mean linear light (the sRGB curve undone) of a JPEG's luma, decoded by libjpeg-turbo's
    /// djpeg to greyscale; nil where djpeg cannot read it.
    public static func meanLinear(_ jpeg: String) throws -> Double? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/djpeg")
        p.arguments = ["-grayscale", "-pnm", jpeg]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let bytes = [UInt8](out.fileHandleForReading.readDataToEndOfFile())
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { return nil }
        // P5\n<w> <h>\n255\n, then the samples.
        var newlines = 0, start = 0
        for (i, b) in bytes.enumerated() where b == 10 {
            newlines += 1
            if newlines == 3 { start = i + 1; break }
        }
        guard start > 0, start < bytes.count else { return nil }
        let table = (0..<256).map { TimelapseRun.linear(Double($0)) }
        var sum = 0.0
        for b in bytes[start...] { sum += table[Int(b)] }
        return sum / Double(bytes.count - start)
    }
}
