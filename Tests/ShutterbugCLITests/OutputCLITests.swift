import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `shutterbug bracket --output` against the failures a headless camera meets: a full disk
/// mid-bracket, and the power going (SIGKILL) while files are being written.
@Suite("bracket --output: full disk, killed writer", .serialized, .timeLimit(.minutes(4)))
struct OutputCLITests {
    static var exe: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("shutterbug").path
    }

    /// Runs a shell script off Swift's cooperative pool and returns what it did; expectations
    /// stay in the test's own task.
    static func sh(_ script: String, _ args: [String] = []) async throws -> (status: Int32, out: String, err: String) {
        let r = try await runChild("/bin/sh", ["-c", script, "sh"] + args)
        return (r.status, r.out, r.err)
    }

    /// Final-named files under `dir`, and any temporary ones.
    static func files(_ dir: String) -> (final: [String], temporary: [String]) {
        let all = (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String]) ?? []
        let names = all.filter { !$0.hasSuffix("/") && (($0 as NSString).lastPathComponent.contains(".")) }
        return (names.filter { !($0 as NSString).lastPathComponent.hasPrefix(".") }.sorted(),
                names.filter { ($0 as NSString).lastPathComponent.hasPrefix(".shutterbug-") && $0.hasSuffix(".tmp") }.sorted())
    }

    /// A complete, decodable file: DNG through LibRaw, JPEG through djpeg without a warning,
    /// JSON through the parser.
    static func checkComplete(_ path: String) async throws {
        switch (path as NSString).pathExtension {
        case "dng":
            let r = try await sh("raw-identify -v \"$1\"", [path])
            #expect(r.status == 0 && r.out.contains("Image size:"), "\(path) is not a readable DNG: \(r.err)")
            let u = try await sh("unprocessed_raw -q \"$1\" && rm -f \"$1.pgm\"", [path])
            #expect(u.status == 0, "LibRaw cannot decode \(path): \(u.err)")
        case "jpg":
            let r = try await sh("djpeg \"$1\" > /dev/null", [path])
            #expect(r.status == 0 && r.err.isEmpty, "\(path) is not a complete JPEG: \(r.err)")
        case "json":
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect((try? JSONSerialization.jsonObject(with: data)) != nil, "\(path) is not complete JSON")
        default:
            Issue.record("unexpected file \(path)")
        }
    }

    @Test("a filesystem that fills mid-bracket: a clear error, no partial file, earlier files intact")
    func fullDisk() async throws {
        let work = NSTemporaryDirectory() + "sb-enospc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: work + "/mnt", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        // A private mount namespace with a 160 MiB tmpfs: as root directly, otherwise as root
        // of a user namespace. The test fills it once the first DNG is on disk.
        let script = """
            work=$1; exe=$2
            inner='
            set -u
            work=$1; exe=$2; mnt=$work/mnt
            mount -t tmpfs -o size=160m tmpfs "$mnt" || exit 90
            "$exe" bracket --camera sim:imx477 --exposures 1/4,1/4,1/4,1/4,1/4,1/4 --format dng --reserve 0 \\
                --output "$mnt/photos" > "$work/stdout" 2> "$work/stderr" &
            pid=$!
            while ! ls "$mnt"/photos/*/*.dng > /dev/null 2>&1; do
                kill -0 $pid 2> /dev/null || break
                sleep 0.05
            done
            dd if=/dev/zero of="$mnt/filler" bs=1M 2> /dev/null
            wait $pid
            echo $? > "$work/status"
            rm -f "$mnt/filler"
            cp -a "$mnt/photos" "$work/photos"
            '
            if [ "$(id -u)" -eq 0 ]; then
                unshare --mount --propagation private sh -c "$inner" sh "$work" "$exe"
            else
                unshare --user --map-root-user --mount sh -c "$inner" sh "$work" "$exe"
            fi
            """
        let r = try await Self.sh(script, [work, Self.exe])
        try #require(r.status != 90, "could not mount a small tmpfs in a private mount namespace (needs root or user namespaces): \(r.err)")
        try #require(r.status == 0, "the test harness failed: \(r.err)")
        let status = try String(contentsOfFile: work + "/status", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let stderr = try String(contentsOfFile: work + "/stderr", encoding: .utf8)
        let stdout = try String(contentsOfFile: work + "/stdout", encoding: .utf8)
        #expect(status != "0", "a bracket that could not be written must fail")
        #expect(stderr.contains("No space left on device") || stderr.contains("ENOSPC"), "the error names the cause: \(stderr)")
        #expect(stderr.contains("could not be written"), "\(stderr)")
        let (final, temporary) = Self.files(work + "/photos")
        #expect(temporary.isEmpty, "temporary files left behind: \(temporary)")
        let dngs = final.filter { $0.hasSuffix(".dng") }
        #expect(dngs.count >= 1 && dngs.count < 6, "written before the disk filled: \(final)\n\(stdout)")
        for f in final { try await Self.checkComplete(work + "/photos/" + f) }
        // The process did not end: no sidecar left says it did (the interim one, written while
        // the capture ran, goes when the finished one cannot replace it).
        for f in final where f.hasSuffix(".json") {
            let json = try String(contentsOfFile: work + "/photos/" + f, encoding: .utf8)
            #expect(!json.contains("written while the capture ran"), "\(f) claims the process ended: \(json.prefix(400))")
        }
        // Each DNG written is reported, and every reported file exists.
        for line in stdout.split(separator: "\n") where line.hasPrefix("wrote ") {
            let path = String(line.dropFirst(6).prefix { $0 != " " })
            #expect(final.contains { path.hasSuffix($0) }, "reported \(path) is missing")
        }
    }

    /// Whether process `pid` has a file open under `dir` that has no name yet (an O_TMPFILE
    /// shows in /proc as `dir/#inode (deleted)`) or a temporary name: a write in progress.
    static func writing(_ pid: Int32, under dir: String) -> Bool {
        let fds = "/proc/\(pid)/fd"
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: fds) else { return false }
        for e in entries {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: fds + "/" + e), target.hasPrefix(dir) else { continue }
            let name = target.split(separator: "/").last.map(String.init) ?? ""
            if name.hasPrefix("#") || name.hasPrefix(".shutterbug-") { return true }
        }
        return false
    }

    /// Starts a bracket writing into `dir` and SIGKILLs it as soon as a file is being written
    /// and at least `filesBefore` are done. Returns whether it caught it mid-write.
    static func runAndKill(into dir: String, once filesBefore: Int) throws -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = ["bracket", "--camera", "sim:imx477", "--exposures", "1/100,1/50,1/25,1/100,1/50,1/25", "--format", "dng,jpeg", "--output", dir]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        let deadline = Date().addingTimeInterval(60)
        var killed = false
        let absolute = dir.hasPrefix("/") ? dir : FileManager.default.currentDirectoryPath + "/" + dir
        while p.isRunning && Date() < deadline {
            if files(dir).final.count >= filesBefore && writing(p.processIdentifier, under: absolute) {
                kill(p.processIdentifier, SIGKILL)
                killed = true
                break
            }
            usleep(1_000)
        }
        p.waitUntilExit()
        return killed
    }

    @Test("a writer killed mid-write leaves no partial file under a final name, and no temporary file at all")
    func killedWriter() async throws {
        let root = NSTemporaryDirectory() + "sb-kill-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        // Kill at three moments: while the first file is being written, and later ones.
        for (round, filesBefore) in [0, 2, 5].enumerated() {
            let killedWhileWriting = try await offPool { try Self.runAndKill(into: root + "/r\(round)", once: filesBefore) }
            #expect(killedWhileWriting, "round \(round): never saw a file being written")
            let (final, temporary) = Self.files(root + "/r\(round)")
            for f in final { try await Self.checkComplete(root + "/r\(round)/" + f) }
            // A capture's sidecar is written before its first photo is named, and again after
            // each step's files (replaced whole): killed mid-bracket, the steps written are
            // described, and it names the steps that never came. No photo is ever left without it.
            let sidecars = final.filter { $0.hasSuffix(".json") }
            let photos = final.filter { !$0.hasSuffix(".json") }
            #expect(sidecars.count <= 1 && (photos.isEmpty || sidecars.count == 1), "round \(round): \(final)")
            for name in sidecars {
                let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: root + "/r\(round)/" + name))) as? [String: Any])
                let steps = json["steps"] as? [[String: Any]] ?? []
                let listed = steps.flatMap { ($0["files"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String } }
                let missing = (json["incomplete"] as? [String: Any])?["missingSteps"] as? [Double] ?? []
                let described = Set(steps.filter { !($0["files"] as? [Any] ?? []).isEmpty }.compactMap { $0["step"] as? Int })
                #expect(!missing.isEmpty && missing.count + described.count == 6, "round \(round): steps \(described), missing \(missing)")
                // Every file it lists is there (and whole, checked above); killed before the first
                // photo was named, it lists none.
                #expect(Set(listed).isSubset(of: Set(photos.map { String($0.split(separator: "/").last!) })), "\(listed) vs \(photos)")
            }
            // The file being written had no name (O_TMPFILE): the kernel freed it with the process.
            #expect(temporary.isEmpty, "round \(round): a killed writer left \(temporary)")
        }
        // A new run into the same directory continues the numbering and works as usual.
        let again = try await Self.sh("\"$1\" bracket --camera sim:imx477 --virtual-time --exposures 1/100 --format jpeg --output \"$2\"", [Self.exe, root + "/r0"])
        #expect(again.status == 0, "\(again.err)")
        #expect(Self.files(root + "/r0").temporary.isEmpty)
    }

    @Test("on a simulated Pi 5 (raw compressed as PISP_COMP1) a bracket's DNGs are 16-bit, LibRaw decodes them, and the levels are the stream's")
    func pi5() async throws {
        let root = NSTemporaryDirectory() + "sb-pi5-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let r = try await Self.sh("\"$1\" bracket --camera sim:imx708 --platform pi5 --virtual-time --role video --exposures 1/200,1/100 --format dng --output \"$2\"", [Self.exe, root])
        #expect(r.status == 0, "\(r.err)")
        let dngs = Self.files(root).final.filter { $0.hasSuffix(".dng") }
        #expect(dngs.count == 2)
        for d in dngs {
            try await Self.checkComplete(root + "/" + d)
            let tags = try await Self.sh("exiftool -s3 -BitsPerSample -BlackLevel -WhiteLevel \"$1\"", [root + "/" + d])
            // IMX708: 10-bit, black 64, delivered at 16-bit scale.
            #expect(tags.out.contains("16") && tags.out.contains("4096 4096 4096 4096") && tags.out.contains("65535"), "\(tags.out)")
        }
        let bad = try await Self.sh("\"$1\" bracket --camera sim:imx708 --platform pi6 --exposures 1/100", [Self.exe])
        #expect(bad.status == 64 && bad.err.contains("--platform must be pi4 or pi5"), "\(bad.err)")
    }

    @Test("runs into one directory, one after another and 20 pairs at once: no file lost, distinct capture numbers and ImageUniqueIDs")
    func neighbours() async throws {
        let root = NSTemporaryDirectory() + "sb-neighbours-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let run = "\"$1\" bracket --camera sim:imx477 --virtual-time --role video --exposures 1/100,1/50 --format jpeg --output \"$2\" >/dev/null"
        // One after the other, then 20 overlapping pairs.
        let first = try await Self.sh("\(run) && \(run)", [Self.exe, root])
        #expect(first.status == 0, "\(first.err)")
        for pair in 0..<20 {
            let r = try await Self.sh("\(run) & a=$!; \(run); b=$?; wait $a && [ $b -eq 0 ]", [Self.exe, root])
            #expect(r.status == 0, "pair \(pair): \(r.err)")
        }
        // Numbering continues from the files already there when the counter is gone.
        try FileManager.default.removeItem(atPath: root + "/.shutterbug-captures")
        let after = try await Self.sh(run, [Self.exe, root])
        #expect(after.status == 0, "\(after.err)")

        let runs = 2 + 2 * 20 + 1
        let (final, temporary) = Self.files(root)
        #expect(temporary.isEmpty)
        let jpegs = final.filter { $0.hasSuffix(".jpg") }
        let sidecars = final.filter { $0.hasSuffix(".json") }
        #expect(jpegs.count == 2 * runs, "\(jpegs.count) photos of \(2 * runs)")
        #expect(sidecars.count == runs)
        // {date}/{time}_{capture}_{step}: the capture number is the second field.
        let numbers = sidecars.compactMap { $0.split(separator: "/").last?.split(separator: "_").dropFirst().first.flatMap { Int($0) } }
        #expect(Set(numbers) == Set(1...runs), "capture numbers \(numbers.sorted())")
        let ids = try await Self.sh("exiftool -q -q -r -ImageUniqueID -s3 \"$1\"", [root])
        let lines = ids.out.split(separator: "\n")
        #expect(lines.count == 2 * runs)
        #expect(Set(lines).count == lines.count, "repeated ImageUniqueIDs")
    }
}
