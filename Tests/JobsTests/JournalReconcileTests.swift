import Foundation
import ImageOutput
import Jobs
import Journal
import ShutterbugCore
import Testing
import Timelapse

/// `TimelapseRun.openJournal`: disk and journal made to agree before a job runs.
@Suite("A timelapse journal reconciled with its folder on start")
struct JournalReconcileTests {
    func spec(_ name: String = "timelapse") -> TimelapseJobSpec {
        TimelapseJobSpec(name: name, biases: [-1, 0, 1], manual: nil, formats: [.jpeg], template: FileNameTemplate.default.pattern,
                         journalSpec: "interval=10s ev=-1,0,1", start: nil) { start, _ in TimelapseSchedule.Plan(interval: .seconds(10), start: start, end: nil, count: 3) }
    }

    func folder() throws -> OutputDirectory {
        try OutputDirectory(path: NSTemporaryDirectory() + "sb-reconcile-\(UUID().uuidString)", reserve: 0)
    }

    /// A JPEG of a few bytes, whole (SOI ... EOI).
    let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3, 0xFF, 0xD9]

    func write(_ dir: OutputDirectory, _ name: String, _ bytes: [UInt8]) throws -> String {
        let path = dir.path + "/2026-11-25/" + name
        try FileManager.default.createDirectory(atPath: dir.path + "/2026-11-25", withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("a slot begun and never journalled (killed between its files and its row): its whole files adopted, a broken one removed, recorded failed; with its sidecar, recorded taken")
    func adoptsAnInterruptedSlot() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir.path) }
        let lines = LinesSeen()
        do {
            let journal = try TimelapseRun.openJournal(in: dir, spec: spec(), log: lines.add)
            try journal.record(.init(index: 0, wall: WallClockTime(nanoseconds: 0), state: .taken, number: 1),
                               files: [.init(path: try write(dir, "120000_0001_1.jpg", jpeg), bytes: jpeg.count, crc32: CRC32.checksum(jpeg))])
            try journal.intend(.init(index: 1, wall: WallClockTime(nanoseconds: 10_000_000_000), number: 2))
            try journal.intend(.init(index: 2, wall: WallClockTime(nanoseconds: 20_000_000_000), number: 3))
        }
        // Slot 1: two whole photos and one cut short by something outside the writer; slot 2:
        // every photo and its sidecar. And a file of another capture that is none of these.
        let kept = [try write(dir, "120010_0002_1.jpg", jpeg), try write(dir, "120010_0002_2.jpg", jpeg)]
        let broken = try write(dir, "120010_0002_3.jpg", Array(jpeg.prefix(5)))
        let whole = try (1...3).map { try write(dir, "120020_0003_\($0).jpg", jpeg) } + [try write(dir, "120020_0003_capture.json", sidecar("120020_0003", steps: 3))]
        let journal = try TimelapseRun.openJournal(in: dir, spec: spec(), log: lines.add)
        #expect(try journal.pendingSlots().isEmpty)
        #expect(try journal.counts() == [.taken: 2, .failed: 1])
        let known = try journal.knownPaths()
        #expect(known.isSuperset(of: kept + whole))
        #expect(!known.contains(broken) && !FileManager.default.fileExists(atPath: broken), "the broken file stays")
        #expect(try journal.resume().lastSlot == 2 && journal.resume().lastNumber == 3)
        #expect(lines.all.contains { $0.contains("slot 1 was begun and not journalled") && $0.contains("removed as incomplete") && $0.contains("recorded as failed") }, "\(lines.all)")
        #expect(lines.all.contains { $0.contains("slot 2") && $0.contains("4 whole files adopted") && $0.contains("recorded as taken") }, "\(lines.all)")
    }

    /// A sidecar as the writer leaves it: each step with its file; `interimMissing`, the steps a
    /// bracket's interim sidecar says are still to come.
    func sidecar(_ prefix: String, steps: Int, listed: Int? = nil, interimMissing: [Int]? = nil) -> [UInt8] {
        let list = (1...(listed ?? steps)).map { "{\"step\":\($0),\"requested\":\"0 EV\",\"files\":[{\"path\":\"\(prefix)_\($0).jpg\",\"format\":\"jpeg\"}]}" }
        let incomplete = interimMissing.map { ",\"incomplete\":{\"error\":\"written while the capture ran\",\"missingSteps\":[\($0.map(String.init).joined(separator: ","))]}" } ?? ""
        return Array("{\"steps\":[\(list.joined(separator: ","))]\(incomplete)}\n".utf8)
    }

    @Test("killed between a bracket's steps: a slot whose sidecar is the interim one, or lists a step whose file is not there, is partial (failed, naming the steps), never taken")
    func partialSlotIsNotTaken() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir.path) }
        do {
            let journal = try TimelapseRun.openJournal(in: dir, spec: spec(), log: { _ in })
            try journal.intend(.init(index: 0, wall: WallClockTime(nanoseconds: 0), number: 1))
            try journal.intend(.init(index: 1, wall: WallClockTime(nanoseconds: 10_000_000_000), number: 2))
            try journal.intend(.init(index: 2, wall: WallClockTime(nanoseconds: 20_000_000_000), number: 3))
        }
        // Slot 0: two of three steps and the interim sidecar written after step 2.
        for k in 1...2 { _ = try write(dir, "120010_0001_\(k).jpg", jpeg) }
        _ = try write(dir, "120010_0001_capture.json", sidecar("120010_0001", steps: 3, listed: 2, interimMissing: [3]))
        // Slot 1: a finished sidecar listing three steps, one of whose files is not on disk.
        for k in [1, 3] { _ = try write(dir, "120020_0002_\(k).jpg", jpeg) }
        _ = try write(dir, "120020_0002_capture.json", sidecar("120020_0002", steps: 3))
        // Slot 2: whole.
        for k in 1...3 { _ = try write(dir, "120030_0003_\(k).jpg", jpeg) }
        _ = try write(dir, "120030_0003_capture.json", sidecar("120030_0003", steps: 3))
        let lines = LinesSeen()
        let journal = try TimelapseRun.openJournal(in: dir, spec: spec(), log: lines.add)
        #expect(try journal.counts() == [.taken: 1, .failed: 2], "\(lines.all)")
        let all = lines.all
        #expect(all.contains { $0.contains("slot 0 ") && $0.contains("recorded as failed (partial: step 3 missing)") }, "\(all)")
        #expect(all.contains { $0.contains("slot 1 ") && $0.contains("recorded as failed (partial: step 2 missing)") }, "\(all)")
        #expect(all.contains { $0.contains("slot 2 ") && $0.contains("recorded as taken") }, "\(all)")
    }

    @Test("a new job (its journal empty, missing or deleted) over photos no journal knows is refused, and stays refused, until told")
    func refusesToStartOverPhotos() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir.path) }
        _ = try write(dir, "120000_0001_1.jpg", jpeg)
        #expect(FileManager.default.createFile(atPath: dir.path + "/" + TimelapseRun.journalName, contents: Data()), "created")
        for _ in 0..<2 {
            #expect {
                _ = try TimelapseRun.openJournal(in: dir, spec: spec(), log: { _ in })
            } throws: { ($0 as? ShutterbugError)?.message.contains("--ignore-existing-photos") == true }
        }
        var told = spec()
        told.ignoreExistingPhotos = true
        let journal = try TimelapseRun.openJournal(in: dir, spec: told, log: { _ in })
        #expect(journal.created)
        // A second job beside the first, once that one's photos are journalled, needs no telling.
        try journal.record(.init(index: 0, wall: WallClockTime(nanoseconds: 0), state: .taken, number: 1),
                           files: [.init(path: dir.path + "/2026-11-25/120000_0001_1.jpg", bytes: jpeg.count, crc32: CRC32.checksum(jpeg))])
        _ = try TimelapseRun.openJournal(in: dir, spec: spec("garden"), log: { _ in })
    }

    @Test("a journal damaged in the middle is refused at start, with what to do")
    func damagedJournal() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir.path) }
        do {
            let journal = try TimelapseRun.openJournal(in: dir, spec: spec(), log: { _ in })
            for k in 0..<400 {
                try journal.record(.init(index: k, wall: WallClockTime(nanoseconds: Int64(k) * 10_000_000_000), state: .skipped, reason: String(repeating: "x", count: 200)))
            }
        }
        let path = dir.path + "/" + TimelapseRun.journalName
        _ = try? FileManager.default.removeItem(atPath: path + "-wal")
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2)
        handle.write(Data(repeating: 0xA5, count: 8192))
        try handle.close()
        #expect {
            _ = try TimelapseRun.openJournal(in: dir, spec: spec(), log: { _ in })
        } throws: { e in
            guard let e = e as? ShutterbugError else { return false }
            return e.code == .invalidState && e.message.contains("is damaged") && e.message.contains(".damaged")
        }
    }
}

/// Lines a job logged, gathered from whatever thread logs them.
final class LinesSeen: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func add(_ s: String) { lines.withLock { $0.append(s) } }
}

import Synchronization
