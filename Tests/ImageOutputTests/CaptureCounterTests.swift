import Foundation
import ImageOutput
import ShutterbugCore
import Testing

/// `.shutterbug-captures` as a user or an accident leaves it: numbering never fails a capture,
/// never follows a link, and says in words what it did instead.
@Suite("The capture counter, broken in every way a folder allows")
struct CaptureCounterTests {
    let template = FileNameTemplate.default

    /// A fresh folder holding photos numbered up to 41, and its counter's path.
    func folder() throws -> (OutputDirectory, String) {
        let root = NSTemporaryDirectory() + "sb-counter-\(UUID().uuidString)"
        let dir = try OutputDirectory(path: root, reserve: 0)
        try FileManager.default.createDirectory(atPath: root + "/2026-11-25", withIntermediateDirectories: true)
        for n in [7, 41] {
            #expect(FileManager.default.createFile(atPath: root + "/2026-11-25/120000_\(String(format: "%04d", n))_1.jpg", contents: Data([1])), "created")
        }
        return (dir, root + "/" + OutputDirectory.counterName)
    }

    @Test("a counter holding no number in range (huge, negative, words, empty of digits) is rewritten from the files on disk, said once", arguments: [
        "9223372036854775807", "-5", "abc", "1e9", String(repeating: "9", count: 40),
    ])
    func invalidNumber(text: String) throws {
        let (dir, counter) = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir.path) }
        try (text + "\n").write(toFile: counter, atomically: false, encoding: .utf8)
        let first = try dir.nextCaptureNumber(template: template)
        #expect(first.number == 42)
        let notice = try #require(first.notice, "a broken counter was passed over in silence")
        #expect(notice.contains("not a number in 0..."), "\(notice)")
        #expect(try String(contentsOfFile: counter, encoding: .utf8) == "42\n")
        let second = try dir.nextCaptureNumber(template: template)
        #expect(second.number == 43 && second.notice == nil)
    }

    @Test("a counter emptied by a kill (the files say 41, the journal has taken 57): the next number is above both, and every write leaves a whole number behind")
    func emptiedByKill() throws {
        let (dir, counter) = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir.path) }
        #expect(FileManager.default.createFile(atPath: counter, contents: Data()), "created")
        let n = try dir.nextCaptureNumber(template: template, atLeast: 58)
        #expect(n.number == 58, "a journalled number whose files were never written is not taken again")
        // Longer than before: overwritten, then cut to length, never empty between.
        try "9\n".write(toFile: counter, atomically: false, encoding: .utf8)
        #expect(try dir.nextCaptureNumber(template: template).number == 59)
        #expect(try String(contentsOfFile: counter, encoding: .utf8) == "59\n")
        // A link in its place: numbered from the files, still above the journal's.
        try FileManager.default.removeItem(atPath: counter)
        try FileManager.default.createSymbolicLink(atPath: counter, withDestinationPath: "/dev/null")
        #expect(try dir.nextCaptureNumber(template: template, atLeast: 80).number == 80)
    }

    @Test("a valid counter goes on from its own number without looking at the files")
    func validCounter() throws {
        let (dir, counter) = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir.path) }
        try "99\n".write(toFile: counter, atomically: false, encoding: .utf8)
        let n = try dir.nextCaptureNumber(template: template)
        #expect(n.number == 100 && n.notice == nil)
    }

    @Test("a symbolic link is never followed (its target stays as it was); a folder or a FIFO in its place is left alone; numbering goes on from the files", arguments: ["link", "folder", "fifo"])
    func notAPlainFile(kind: String) throws {
        let (dir, counter) = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir.path) }
        let target = dir.path + "/precious.txt"
        switch kind {
        case "link":
            try "keep me\n".write(toFile: target, atomically: false, encoding: .utf8)
            try FileManager.default.createSymbolicLink(atPath: counter, withDestinationPath: target)
        case "folder":
            try FileManager.default.createDirectory(atPath: counter, withIntermediateDirectories: false)
        default:
            #expect(mkfifo(counter, 0o644) == 0)
        }
        let first = try dir.nextCaptureNumber(template: template)
        #expect(first.number == 42)
        let notice = try #require(first.notice)
        #expect(notice.contains(kind == "link" ? "symbolic link" : kind == "folder" ? "is a folder" : "not a plain file"), "\(notice)")
        // The same process never gives a number twice, though the files are not written yet.
        let second = try dir.nextCaptureNumber(template: template)
        #expect(second.number == 43 && second.notice == nil)
        if kind == "link" { #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep me\n") }
    }
}
