import Foundation
import Journal
import ShutterbugCore
import Testing
import Timelapse

@Suite("Timelapse journal in SQLite: one transaction per slot, resumable, refuses what would corrupt it")
struct JournalTests {
    func temporaryPath() -> String { NSTemporaryDirectory() + "sb-journal-\(UUID().uuidString).sqlite" }

    @Test("CRC-32 is zlib's (the check value of '123456789')")
    func crc() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
    }

    @Test("slots, frames, files, decisions and the ramp go in whole; a reopened job resumes after its last slot with its ramp")
    func recordAndResume() throws {
        let path = temporaryPath()
        defer { for s in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + s) } }
        let config = ExposureRamp.Configuration(exposure: .microseconds(30)...(.seconds(1)), gain: 1...16)
        var ramp = ExposureRamp(config, settings: .init(exposure: .milliseconds(10), gain: 1))
        do {
            let j = try TimelapseJournal(path: path, job: "roof", spec: "interval=10s ev=0")
            #expect(try j.resume().lastSlot == nil)
            var m = FrameMetadata(sequence: 42)
            m.sensorTimestamp = SensorTime(nanoseconds: 5_010_000_000)
            m.exposureTime = .milliseconds(10)
            let d = ramp.update(metered: 0.09, lux: 400, exposedWith: ramp.settings)
            try j.record(.init(index: 0, wall: WallClockTime(nanoseconds: 1_000), state: .taken, instant: SensorTime(nanoseconds: 5_000_000_000),
                               exposureStart: SensorTime(nanoseconds: 5_000_000_000), captureID: "A-0", number: 1),
                         frames: [.init(step: 0, metadata: m, bias: 0)], files: [.init(path: "/x/0001.jpg", bytes: 1234, crc32: 77)], decision: d, rampAfter: ramp.settings)
            try j.record(.init(index: 1, wall: WallClockTime(nanoseconds: 2_000), state: .skipped, reason: "late by 3 s"))
            // A slot recorded twice is refused, and the refused transaction leaves nothing behind.
            #expect(throws: ShutterbugError.self) {
                try j.record(.init(index: 2, wall: WallClockTime(nanoseconds: 3_000), state: .taken, captureID: "A-0", number: 2))
            }
            #expect(try j.counts() == [.taken: 1, .skipped: 1])
            #expect(try j.scheduleErrors() == [.zero])
        }
        let again = try TimelapseJournal(path: path, job: "roof", spec: "interval=10s ev=0")
        let r = try again.resume()
        #expect(r.lastSlot == 1 && r.taken == 1 && r.skipped == 1 && r.lastNumber == 1)
        #expect(r.ramp == ramp.settings)
        #expect(try again.database.integrityCheck() == "ok")
        #expect(throws: ShutterbugError.self) { _ = try TimelapseJournal(path: path, job: "roof", spec: "interval=20s ev=0") }
        // Another job in the same journal starts afresh.
        #expect(try TimelapseJournal(path: path, job: "garden", spec: "interval=20s").resume().lastSlot == nil)
    }

    @Test("a job resumes when its formats are the same set in another order or spelling, and is refused when they differ")
    func formatsCompareAsASet() throws {
        let path = temporaryPath()
        defer { for x in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + x) } }
        _ = try TimelapseJournal(path: path, job: "roof", spec: "interval=10s ev=0 format=dng,jpeg camera=default")
        _ = try TimelapseJournal(path: path, job: "roof", spec: "interval=10s ev=0 format=jpeg,dng camera=default")
        _ = try TimelapseJournal(path: path, job: "roof", spec: "interval=10s ev=0 format=JPG,raw camera=default")
        #expect(throws: ShutterbugError.self) { _ = try TimelapseJournal(path: path, job: "roof", spec: "interval=10s ev=0 format=jpeg camera=default") }
        #expect(throws: ShutterbugError.self) { _ = try TimelapseJournal(path: path, job: "roof", spec: "interval=10s ev=0,1 format=dng,jpeg camera=default") }
    }

    @Test("one run of a job at a time: a second opening of the same job is refused while the first holds it, another job is not")
    func oneRunAtATime() throws {
        let path = temporaryPath()
        defer { for x in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + x) } }
        var first: TimelapseJournal? = try TimelapseJournal(path: path, job: "roof", spec: "a")
        #expect(throws: ShutterbugError.self) { _ = try TimelapseJournal(path: path, job: "roof", spec: "a") }
        _ = try TimelapseJournal(path: path, job: "garden", spec: "a")
        #expect(first != nil)
        first = nil
        _ = try TimelapseJournal(path: path, job: "roof", spec: "a")
    }

    @Test("thumbnails for the run's contact sheet thin out evenly as the run grows: at most 48, every stride-th slot, the stride a power of two")
    func thumbStride() {
        #expect(TimelapseJournal.thumbStride(latest: 0) == 1)
        #expect(TimelapseJournal.thumbStride(latest: 47) == 1)
        #expect(TimelapseJournal.thumbStride(latest: 48) == 2)
        #expect(TimelapseJournal.thumbStride(latest: 17_279) == 512)
        for latest in [0, 10, 47, 48, 95, 96, 1000, 17_279, 1_000_000] {
            let s = TimelapseJournal.thumbStride(latest: latest)
            #expect(latest / s + 1 <= 48 && (s == 1 || latest / (s / 2) + 1 > 48), "\(latest): \(s)")
        }
    }
}
