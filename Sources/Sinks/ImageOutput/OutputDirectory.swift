import CSystemShims
import Foundation
import ShutterbugCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A directory that photos are written into durably: each file is written as an unnamed file in
/// its final directory (`O_TMPFILE`), synced, given its name without replacing anything
/// (`linkat`), and the directory synced, so after a crash or power loss a file under its final
/// name is complete and a killed writer leaves nothing at all. Where the filesystem has no
/// `O_TMPFILE`, a temporary name carrying the writer's pid is renamed instead, and only a dead
/// process's temporaries are ever swept, so two runs into one directory never delete each
/// other's work. A write that fails leaves nothing behind but the error.
public final class OutputDirectory: Sendable {
    public let path: String
    /// Bytes that must stay free on the filesystem after a capture.
    public let reserve: Int64
    /// The highest capture number this process has given out here.
    private let issued = Mutex(0)
    private let warnedAboutCounter = Atomic<Bool>(false)
    /// Temporary files start with this; `removeStaleTemporaries` deletes those a killed
    /// process left.
    public static let temporaryPrefix = ".shutterbug-"

    /// Opens (creating) `path`.
    ///
    /// - Throws: `.system` when the directory cannot be created or is not writable.
    public init(path: String, reserve: Int64 = 64 << 20) throws {
        guard reserve >= 0 else { throw ShutterbugError(.invalidArgument, "the free-space reserve must be 0 bytes or more, not \(reserve)") }
        self.path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        self.reserve = reserve
        try Self.makeDirectories(self.path)
        guard access(self.path, W_OK) == 0 else {
            throw ShutterbugError(.system, "cannot write into the output directory \(self.path)", errno: errno)
        }
    }

    /// Free bytes on the output filesystem for this user.
    public func freeBytes() throws -> Int64 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw ShutterbugError(.system, "cannot open \(path)", errno: errno) }
        defer { close(fd) }
        let n = sbshim_free_bytes(fd)
        guard n >= 0 else { throw ShutterbugError(.system, "cannot read the free space of \(path)", errno: Int32(-n)) }
        return n
    }

    /// Checks that `bytes` more fit while `reserve` stays free.
    ///
    /// - Throws: `.noSpace` naming the free space, the need and the reserve.
    public func checkSpace(for bytes: Int64) throws {
        let free = try freeBytes()
        if free - bytes < reserve {
            throw ShutterbugError(.noSpace, "not enough space in \(path): \(mib(free)) free, the capture needs about \(mib(bytes)) and the reserve kept free is \(mib(reserve))")
        }
    }

    /// Deletes temporary files that processes no longer alive left under `path` and its
    /// subdirectories (one level deep: the date folders); a live writer's are left alone.
    /// Returns how many.
    @discardableResult
    public func removeStaleTemporaries() -> Int {
        var removed = 0
        Self.walk(path, depth: 1) { full, _, name, isDirectory in
            if !isDirectory, let pid = Self.temporaryOwner(name), sbshim_process_alive(pid) == 0, unlink(full) == 0 { removed += 1 }
        }
        return removed
    }

    /// Sidecars a process left while its capture ran (it was killed, or the power went) and the
    /// photos it renamed into place after its last sidecar: each such photo is whole (a file
    /// gets its final name only once written and synced), and is named in the sidecar under
    /// `incomplete.foundOnRestart`, so no photo on disk is one that no sidecar lists. The
    /// steps stay missing: the sidecar has no frame metadata for them (the files carry their
    /// own). Only the 32 newest captures are looked at. Not for a timelapse's folder: its
    /// journal records each sidecar's size and checksum. Returns how many sidecars were
    /// completed so.
    @discardableResult
    public func listPhotosAfterInterruptedSidecars(template: FileNameTemplate) -> Int {
        guard template.pattern.contains("{capture}"), let regex = template.captureRegex() else { return 0 }
        var byCapture: [Int: [(full: String, relative: String, name: String)]] = [:]
        Self.walk(path, depth: template.pattern.split(separator: "/").count - 1) { full, relative, name, isDirectory in
            guard !isDirectory, !name.hasPrefix("."), !Self.isTemporary(name), let n = template.captureNumber(in: relative, regex: regex) else { return }
            byCapture[n, default: []].append((full, relative, name))
        }
        var completed = 0
        // Only the newest captures can be a process's last ones (an earlier start saw to the
        // others): a folder of a year's photos is not read whole at every start.
        for number in byCapture.keys.sorted().suffix(32) {
            let files = byCapture[number] ?? []
            guard let car = files.first(where: { $0.name.hasSuffix(".json") }),
                  let data = FileManager.default.contents(atPath: car.full),
                  var object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                  var incomplete = object["incomplete"] as? [String: Any],
                  (incomplete["error"] as? String)?.hasPrefix(Self.interruptedSidecarError) == true else { continue }
            let steps = object["steps"] as? [[String: Any]] ?? []
            var listed = Set(steps.flatMap { ($0["files"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String } })
            listed.formUnion(incomplete["foundOnRestart"] as? [String] ?? [])
            let folder = (car.full as NSString).deletingLastPathComponent
            let found = files.filter { f in
                !f.name.hasSuffix(".json") && (f.full as NSString).deletingLastPathComponent == folder && !listed.contains(f.name)
            }.map(\.name).sorted()
            guard !found.isEmpty else { continue }
            incomplete["foundOnRestart"] = ((incomplete["foundOnRestart"] as? [String] ?? []) + found).sorted()
            object["incomplete"] = incomplete
            guard let out = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted]),
                  (try? replace(car.relative, with: [UInt8](out))) != nil else { continue }
            completed += 1
        }
        return completed
    }

    /// How a sidecar written while its capture ran begins its `incomplete.error`.
    public static let interruptedSidecarError = "written while the capture ran"

    /// The file that numbers captures in this directory across runs and processes.
    public static let counterName = ".shutterbug-captures"

    /// The largest capture number the counter may hold: past it, the counter is taken as broken.
    public static let maxCaptureNumber = 999_999_999

    /// A capture number, and what the user should know about how it was found (a broken
    /// counter file), once per directory.
    public struct CaptureNumber: Sendable {
        public var number: Int
        public var notice: String?
    }

    /// The next capture number for this directory: one more than the last any run (this one,
    /// an earlier one, or one running beside it) took. Numbers live in `.shutterbug-captures`,
    /// read and written under an exclusive `flock`; where that file does not exist yet, they
    /// continue from the highest `{capture}` among the files already named by `template`.
    ///
    /// A counter that is not a plain writable file (a symbolic link, which is never followed; a
    /// folder; read-only) or holds no number in 0...`maxCaptureNumber` never fails a capture:
    /// numbering goes on from the files on disk (and from what this process already gave out),
    /// a broken number is overwritten, and the notice says which in words, once.
    ///
    /// - Throws: `.system` only when the directory itself cannot be locked.
    ///
    /// - Parameter atLeast: the lowest number the caller may take (a journal's highest plus one).
    public func nextCaptureNumber(template: FileNameTemplate, atLeast: Int = 1) throws -> CaptureNumber {
        let counter = path + "/" + Self.counterName
        // O_NOFOLLOW: a link here is refused (ELOOP), never followed to truncate its target;
        // O_NONBLOCK: a FIFO put here cannot hang the open.
        let fd = open(counter, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o644)
        var st = stat()
        guard fd >= 0, fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            let why = fd < 0 ? (errno == ELOOP ? "is a symbolic link" : errno == EISDIR ? "is a folder" : "cannot be opened for writing (\(String(cString: strerror(errno))))")
                : "is not a plain file"
            if fd >= 0 { close(fd) }
            return try numberFromDisk(template: template, notice: "the capture counter \(counter) \(why): left as it is; capture numbers continue from the files in \(path) (remove it to have the counter again)", atLeast: atLeast)
        }
        defer { close(fd) }
        let locked = sbshim_lock(fd, 1)
        guard locked == 0 else { throw Self.error(-locked, "cannot lock the capture counter in \(path)") }
        defer { _ = sbshim_lock(fd, 0) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = pread(fd, &buffer, buffer.count, 0)
        let text = n > 0 ? String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : ""
        var notice: String?
        let last: Int
        if let v = Int(text), (0..<Self.maxCaptureNumber).contains(v), n < buffer.count {
            last = v
        } else {
            last = highestCaptureNumber(template: template)
            if !text.isEmpty {
                let shown = text.count > 24 ? String(text.prefix(24)) + "…" : text
                notice = "the capture counter \(counter) held '\(shown)', not a number in 0...\(Self.maxCaptureNumber - 1): numbering continues from the highest capture among the files here (\(last)) and the counter is written anew"
            }
        }
        let next = max(last, issued.withLock { $0 }, atLeast - 1) + 1
        issued.withLock { $0 = max($0, next) }
        // Written over the old value, then cut to length: numbers only grow, so the new text is
        // never shorter than the old and the file holds a whole number at every moment. (Cut
        // first and a kill between the two left it empty; the next run then numbered from the
        // files on disk, missing a slot journalled before its files, and took its number again.)
        let line = Array("\(next)\n".utf8)
        guard pwrite(fd, line, line.count, 0) == line.count, ftruncate(fd, off_t(line.count)) == 0, fsync(fd) == 0 else {
            return try numberFromDisk(template: template, notice: "cannot write the capture counter \(counter) (\(String(cString: strerror(errno)))): capture numbers continue from the files in \(path)", atLeast: atLeast)
        }
        return CaptureNumber(number: next, notice: warnOnce(notice))
    }

    /// The number after the highest on disk and any this process gave out, under a lock on the
    /// directory itself (so runs that both fall back here still take turns).
    private func numberFromDisk(template: FileNameTemplate, notice: String, atLeast: Int) throws -> CaptureNumber {
        let dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirfd >= 0 else { throw Self.error(errno, "cannot open \(path)") }
        defer { close(dirfd) }
        let locked = sbshim_lock(dirfd, 1)
        guard locked == 0 else { throw Self.error(-locked, "cannot lock \(path)") }
        defer { _ = sbshim_lock(dirfd, 0) }
        let next = min(max(highestCaptureNumber(template: template), issued.withLock { $0 }, atLeast - 1), Self.maxCaptureNumber - 1) + 1
        issued.withLock { $0 = max($0, next) }
        return CaptureNumber(number: next, notice: warnOnce(notice))
    }

    private func warnOnce(_ notice: String?) -> String? {
        guard let notice else { return nil }
        return warnedAboutCounter.exchange(true, ordering: .relaxed) ? nil : notice
    }

    /// The captures' files here (photos and sidecars: `.jpg`, `.dng`, `.json`), as full paths,
    /// `depth` folders down; hidden files and a timelapse's keogram and contact sheet aside.
    public func capturedFiles(depth: Int) -> [String] {
        var out: [String] = []
        Self.walk(path, depth: depth) { full, _, name, isDirectory in
            guard !isDirectory, !name.hasPrefix("."), !name.hasPrefix("keogram"), !name.hasPrefix("contact-sheet") else { return }
            if [".jpg", ".jpeg", ".dng", ".json"].contains(where: { name.lowercased().hasSuffix($0) }) { out.append(full) }
        }
        return out.sorted()
    }

    /// The files `template` named for capture `number` (full paths); empty when the template
    /// has no `{capture}`.
    public func files(ofCapture number: Int, template: FileNameTemplate) -> [String] {
        guard template.pattern.contains("{capture}"), let regex = template.captureRegex() else { return [] }
        var out: [String] = []
        Self.walk(path, depth: template.pattern.split(separator: "/").count - 1) { full, relative, name, isDirectory in
            if !isDirectory, !name.hasPrefix("."), template.captureNumber(in: relative, regex: regex) == number { out.append(full) }
        }
        return out.sorted()
    }

    /// The highest capture number among the files `template` names here (0 if none).
    func highestCaptureNumber(template: FileNameTemplate) -> Int {
        guard template.pattern.contains("{capture}"), let regex = template.captureRegex() else { return 0 }
        var highest = 0
        let depth = template.pattern.split(separator: "/").count - 1
        Self.walk(path, depth: depth) { _, relative, name, isDirectory in
            if !isDirectory, !name.hasPrefix("."), let number = template.captureNumber(in: relative, regex: regex) {
                highest = max(highest, number)
            }
        }
        return highest
    }

    /// Calls `visit(full path, path relative to dir, name, is a directory)` for every entry
    /// under `dir`, descending `depth` levels into folders (hidden ones are not descended).
    static func walk(_ dir: String, depth: Int, relative: String = "", _ visit: (String, String, String, Bool) -> Void) {
        guard let d = opendir(dir) else { return }
        defer { closedir(d) }
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name == "." || name == ".." { continue }
            let full = dir + "/" + name, rel = relative.isEmpty ? name : relative + "/" + name
            let isDirectory = e.pointee.d_type == UInt8(DT_DIR)
            visit(full, rel, name, isDirectory)
            if isDirectory, depth > 0, !name.hasPrefix(".") { walk(full, depth: depth - 1, relative: rel, visit) }
        }
    }

    /// Whether `name` is a write's temporary file (`.shutterbug-PID-RANDOM-N.tmp`).
    public static func isTemporary(_ name: String) -> Bool { temporaryOwner(name) != nil }

    /// The pid in a temporary file's name (`.shutterbug-PID-RANDOM-N.tmp`), nil for any other
    /// name.
    static func temporaryOwner(_ name: String) -> Int32? {
        guard name.hasPrefix(temporaryPrefix), name.hasSuffix(".tmp") else { return nil }
        let fields = name.dropFirst(temporaryPrefix.count).split(separator: "-")
        return fields.first.flatMap { Int32($0) }
    }

    /// Writes a new file at `relative` (folders created as needed). `body` writes the contents
    /// to the descriptor it is given. If the name is taken, `-2`, `-3`… is added before the
    /// extension; nothing is ever replaced.
    ///
    /// - Returns: the final path and its size.
    /// - Throws: whatever `body` throws, or `.noSpace`/`.system` from the writes; the
    ///   temporary file is removed first.
    public func write(_ relative: String, _ body: (Int32) throws -> Void) throws -> (path: String, bytes: Int64) {
        let (full, dir, name, dirfd) = try openParent(relative)
        defer { close(dirfd) }

        // An unnamed file where the filesystem allows it, else a temporary name.
        var temp: String?
        var fd = sbshim_open_tmpfile(dirfd, 0o644)
        if fd < 0 {
            guard [EOPNOTSUPP, EISDIR, EINVAL, ENOENT].contains(-fd) else { throw Self.error(-fd, "cannot create a file in \(dir)") }
            for attempt in 0..<100 {
                let name = "\(Self.temporaryPrefix)\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(attempt).tmp"
                fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
                if fd >= 0 { temp = name; break }
                if errno != EEXIST { break }
            }
            guard fd >= 0 else { throw Self.error(errno, "cannot create a file in \(dir)") }
        }
        var named = false
        defer {
            if fd >= 0 { close(fd) }
            if !named, let temp { unlinkat(dirfd, temp, 0) }
        }
        try body(fd)
        guard fsync(fd) == 0 else { throw Self.error(errno, "cannot sync \(full)") }
        var st = stat()
        fstat(fd, &st)

        // The final name: never replacing a file; a taken name gets -2, -3...
        let (stem, ext) = Self.split(name)
        var final = name
        var n = 1
        while true {
            let rc = temp.map { sbshim_rename_noreplace(dirfd, $0, final) } ?? sbshim_link_tmpfile(fd, dirfd, final)
            if rc == 0 { break }
            guard rc == -EEXIST, n < 10_000 else { throw Self.error(-rc, "cannot give the finished file its name \(dir)/\(final)") }
            n += 1
            final = "\(stem)-\(n)\(ext)"
        }
        named = true
        let closed = close(fd)
        fd = -1
        guard closed == 0 else { throw Self.error(errno, "cannot close \(dir)/\(final)") }
        guard fsync(dirfd) == 0 else { throw Self.error(errno, "cannot sync the directory \(dir)") }
        return (dir + "/" + final, Int64(st.st_size))
    }

    /// The folder of `relative` (created as needed), opened: the full path, the folder, the
    /// file's name and the folder's descriptor, which the caller closes.
    private func openParent(_ relative: String) throws -> (full: String, dir: String, name: String, dirfd: Int32) {
        let full = path + "/" + relative
        let slash = full.lastIndex(of: "/")!
        let dir = String(full[..<slash]), name = String(full[full.index(after: slash)...])
        try Self.makeDirectories(dir)
        let dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirfd >= 0 else { throw ShutterbugError(.system, "cannot open \(dir)", errno: errno) }
        return (full, dir, name, dirfd)
    }

    /// Writes `bytes` at `relative`, replacing what is there in one rename: a reader sees the
    /// old file or the new one whole (a keogram rewritten as a job goes on, a bracket's sidecar).
    /// The bytes go into an unnamed file where the filesystem allows it, which gets its temporary
    /// name only once written and synced, just before the rename: a process killed while writing
    /// leaves nothing behind (and a temporary name left by one killed between the two calls is
    /// swept by the next run, as every temporary file of a process that is gone).
    ///
    /// - Returns: the path.
    @discardableResult
    public func replace(_ relative: String, with bytes: [UInt8]) throws -> String {
        let (full, dir, name, dirfd) = try openParent(relative)
        defer { close(dirfd) }
        let temp = "\(Self.temporaryPrefix)\(getpid())-\(UInt32.random(in: 0...UInt32.max))-0.tmp"
        var fd = sbshim_open_tmpfile(dirfd, 0o644)
        let unnamed = fd >= 0
        if !unnamed {
            guard [EOPNOTSUPP, EISDIR, EINVAL, ENOENT].contains(-fd) else { throw Self.error(-fd, "cannot create a file in \(dir)") }
            fd = openat(dirfd, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw Self.error(errno, "cannot create a file in \(dir)") }
        }
        var renamed = false
        defer { if !renamed { unlinkat(dirfd, temp, 0) } }
        do {
            try Self.writeAll(fd, bytes)
            guard fsync(fd) == 0 else { throw Self.error(errno, "cannot sync \(full)") }
            if unnamed {
                let rc = sbshim_link_tmpfile(fd, dirfd, temp)
                guard rc == 0 else { throw Self.error(-rc, "cannot name \(dir)/\(temp)") }
            }
        } catch {
            close(fd)
            throw error
        }
        guard close(fd) == 0 else { throw Self.error(errno, "cannot close \(full)") }
        guard renameat(dirfd, temp, dirfd, name) == 0 else { throw Self.error(errno, "cannot replace \(full)") }
        renamed = true
        guard fsync(dirfd) == 0 else { throw Self.error(errno, "cannot sync the directory \(dir)") }
        return full
    }

    /// The CRC-32 of a file (the journal keeps it to tell a file changed or cut short).
    public static func crc32(of path: String) throws -> UInt32 {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ShutterbugError.fromErrno(-errno, while: "reading \(path) back for its checksum") }
        defer { close(fd) }
        var crc: UInt32 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ShutterbugError.fromErrno(-errno, while: "reading \(path) back for its checksum")
            }
            if n == 0 { break }
            crc = buffer.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0.prefix(n)), initial: crc) }
        }
        return crc
    }

    /// Removes a file under the directory and syncs the directory (a full disk allows both).
    public func remove(_ relative: String) throws {
        let (full, dir, name, dirfd) = try openParent(relative)
        defer { close(dirfd) }
        guard unlinkat(dirfd, name, 0) == 0 else { throw Self.error(errno, "cannot remove \(full)") }
        guard fsync(dirfd) == 0 else { throw Self.error(errno, "cannot sync the directory \(dir)") }
    }

    /// A writer for a whole buffer, retrying short writes and EINTR.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try writeAll(fd, $0) }
    }

    /// A writer for a whole buffer, retrying short writes and EINTR.
    public static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) throws {
        var done = 0
        while done < raw.count {
            let n = Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw error(errno, "write failed")
            }
            done += n
        }
    }

    /// A file-writing failure: `.noSpace` for a full disk or quota, else `.system`.
    static func error(_ e: Int32, _ what: String) -> ShutterbugError {
        ShutterbugError(e == ENOSPC || e == EDQUOT ? .noSpace : .system, what, errno: e)
    }

    static func split(_ name: String) -> (String, String) {
        if let dot = name.lastIndex(of: "."), dot != name.startIndex { return (String(name[..<dot]), String(name[dot...])) }
        return (name, "")
    }

    /// Creates `dir` and its missing parents; each folder created is synced into its parent,
    /// so after power loss a photo's date folder exists wherever the photo does.
    static func makeDirectories(_ dir: String) throws {
        var built = dir.hasPrefix("/") ? "" : "."
        for part in dir.split(separator: "/") {
            let parent = built.isEmpty ? "/" : built
            built += "/" + part
            if mkdir(built, 0o755) == 0 {
                let pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                if pfd >= 0 {
                    defer { close(pfd) }
                    guard fsync(pfd) == 0 else { throw error(errno, "cannot sync the directory \(parent)") }
                }
            } else if errno != EEXIST {
                throw ShutterbugError(.system, "cannot create the directory \(built)", errno: errno)
            }
        }
        var st = stat()
        guard stat(dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
            throw ShutterbugError(.invalidArgument, "\(dir) is not a directory")
        }
    }

    private func mib(_ b: Int64) -> String {
        let v = Double(b) / 1_048_576
        return v < 10 ? "\((v * 10).rounded() / 10) MiB" : "\(Int(v.rounded())) MiB"
    }
}

/// File names from a template. Tokens: `{date}` (YYYY-MM-DD of the exposure), `{time}`
/// (HHMMSS), `{capture}` (the capture's number in this run, 4 digits), `{id}` (its unique ID),
/// `{step}` (bracket step, from 1), `{steps}`, `{camera}` (sensor model). A `/` makes folders.
/// The extension is added: `.dng`, `.jpg`, `.json`.
public struct FileNameTemplate: Sendable, Hashable {
    public var pattern: String
    public static let `default` = FileNameTemplate("{date}/{time}_{capture}_{step}")
    static let tokens = ["date", "time", "capture", "id", "step", "steps", "camera"]

    /// - Throws: `.invalidArgument` for an unknown token, `..`, or an absolute pattern.
    public init(validating pattern: String) throws {
        var rest = Substring(pattern)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw ShutterbugError(.invalidArgument, "the name template '\(pattern)' has a '{' without '}'")
            }
            let token = String(rest[rest.index(after: open)..<close])
            guard Self.tokens.contains(token) else {
                throw ShutterbugError(.invalidArgument, "the name template '\(pattern)' has the unknown token {\(token)}; known: \(Self.tokens.map { "{\($0)}" }.joined(separator: ", "))")
            }
            rest = rest[rest.index(after: close)...]
        }
        guard !pattern.isEmpty, !pattern.hasPrefix("/"), !pattern.split(separator: "/").contains(".."), !pattern.hasSuffix("/") else {
            throw ShutterbugError(.invalidArgument, "the name template '\(pattern)' must be a relative path without '..' ending in a file name")
        }
        guard pattern.contains("{step}") else {
            throw ShutterbugError(.invalidArgument, "the name template '\(pattern)' needs {step} so a bracket's files differ")
        }
        self.pattern = pattern
    }

    init(_ pattern: String) { self.pattern = pattern }

    /// A regular expression matching the names this template makes (any extension and `-N`
    /// suffix), with the capture number as its first group.
    func captureRegex() -> NSRegularExpression? {
        var out = "^"
        var rest = Substring(pattern)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            out += NSRegularExpression.escapedPattern(for: String(rest[..<open]))
            switch rest[rest.index(after: open)..<close] {
            case "capture": out += "([0-9]{4,})"
            case "date": out += "(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|undated)"
            default: out += "[^/]*?"
            }
            rest = rest[rest.index(after: close)...]
        }
        out += NSRegularExpression.escapedPattern(for: String(rest)) + "(?:-[0-9]+)?\\.[A-Za-z]+$"
        return try? NSRegularExpression(pattern: out)
    }

    /// The capture number in a name this template made, if it is one.
    func captureNumber(in name: String, regex: NSRegularExpression) -> Int? {
        let range = NSRange(name.startIndex..., in: name)
        guard let m = regex.firstMatch(in: name, range: range), m.numberOfRanges > 1, let r = Range(m.range(at: 1), in: name) else { return nil }
        return Int(name[r])
    }

    /// The name for one file (without extension). `step` nil names the capture's sidecar.
    public func render(time: LocalTime?, capture: Int, id: Int64, step: Int?, steps: Int, camera: String) -> String {
        var out = pattern
        let fields: [String: String] = [
            "date": time?.date ?? "undated", "time": time?.compactTime ?? "000000",
            "capture": String(capture).leftPadded(to: 4), "id": String(id),
            "step": step.map { String($0) } ?? "capture", "steps": String(steps), "camera": camera,
        ]
        for (k, v) in fields { out = out.replacingOccurrences(of: "{\(k)}", with: v) }
        return out
    }
}
