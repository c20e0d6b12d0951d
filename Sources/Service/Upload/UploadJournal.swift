import Foundation
import Journal
import ShutterbugCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Every file's upload in SQLite beside the photos (`uploads.sqlite` in the output folder):
/// queued (with its key, fixed when it is queued), being sent (by which process), uploaded
/// (with the store's ETag, the file's MD5, when), or failed for good (the file is gone), and
/// why the last try failed. WAL with full sync, one transaction per change, as the timelapse
/// journal: after a power cut a file is queued or not, uploaded or not, never half of either.
///
/// A file is sent only by the process that claimed it; a claim whose process is gone (killed,
/// the power cut) is given back when the next one opens the journal, and the file is sent again
/// whole under the same key, so the bucket ends with each file once, whatever happened.
public final class UploadJournal: @unchecked Sendable {
    // `@unchecked Sendable`: every use of the connection holds `serial`.
    public let database: SQLiteDatabase
    /// One operation at a time on the connection: SQLite serialises single calls, not a
    /// transaction's several (a capture's files queued from the writer while a send settles).
    private let serial = NSLock()

    @discardableResult
    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        serial.lock()
        defer { serial.unlock() }
        return try body()
    }
    public let folder: String
    public static let fileName = "uploads.sqlite"

    public enum State: String, Sendable {
        case queued, sending, uploaded, failed
    }

    public struct Row: Sendable, Hashable {
        public var id: Int64
        public var path: String
        public var key: String
        public var bytes: Int64
        public var attempts: Int
    }

    /// Opens (creating) the journal in `folder`. A claim left by a process that is gone is
    /// given back to the queue, and the multipart uploads it had begun are returned to be aborted.
    public init(folder: String) throws {
        self.folder = folder.count > 1 && folder.hasSuffix("/") ? String(folder.dropLast()) : folder
        let path = self.folder + "/" + Self.fileName
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: self.folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ShutterbugError(.invalidArgument, "\(self.folder) is not a folder: the upload journal lives in the folder whose photos it sends")
        }
        database = try SQLiteDatabase(path: path)
        let check = try database.query("PRAGMA quick_check").map { $0.first?.text ?? "" }
        guard check == ["ok"] else {
            throw ShutterbugError(.invalidState, "the upload journal \(path) is damaged (\(check.prefix(2).joined(separator: "; "))); the photos are untouched. Move it aside (mv \(path) \(path).damaged): a new one queues the photos written since it starts")
        }
        try database.execute("""
            PRAGMA journal_mode=WAL;
            PRAGMA synchronous=FULL;
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS uploads(
                id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, key TEXT NOT NULL, bytes INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                queued_wall_ns INTEGER NOT NULL, state TEXT NOT NULL CHECK (state IN ('queued', 'sending', 'uploaded', 'failed')),
                owner INTEGER, attempts INTEGER NOT NULL DEFAULT 0, next_try_wall_ns INTEGER NOT NULL DEFAULT 0,
                md5 TEXT, etag TEXT, error TEXT, uploaded_wall_ns INTEGER, deleted INTEGER NOT NULL DEFAULT 0, multipart_id TEXT);
            CREATE INDEX IF NOT EXISTS uploads_waiting ON uploads(state, next_try_wall_ns, queued_wall_ns);
            CREATE UNIQUE INDEX IF NOT EXISTS uploads_key ON uploads(key);
            INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '1');
            """)
        try database.query("INSERT OR IGNORE INTO meta(key, value) VALUES ('since_wall_ns', ?)", [.text(String(Self.wallNow()))])
    }

    /// When this journal began: files written before it are not its (an old folder's photos
    /// are not all sent because upload was turned on).
    public func since() throws -> Int64 {
        try locked {
            Int64(try database.query("SELECT value FROM meta WHERE key = 'since_wall_ns'").first?.first?.text ?? "") ?? 0
        }
    }

    /// Files written from `wall` (ns) on are this journal's: 0 takes every photo in the folder.
    public func setSince(_ wall: Int64) throws {
        try locked {
            try database.query("UPDATE meta SET value = ? WHERE key = 'since_wall_ns'", [.text(String(wall))])
        }
    }

    public static func wallNow() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Queues files (full paths under the folder) with their keys. A file already uploaded is
    /// queued again only if it changed since (a sidecar rewritten whole): the same key, so
    /// the object is replaced, not doubled. Returns how many were queued.
    @discardableResult
    public func enqueue(_ files: [(path: String, key: String)]) throws -> Int {
        try locked {
            var queued = 0
            let now = Self.wallNow()
            var stats: [(String, String, Int64, Int64)] = []
            for f in files {
                var st = stat()
                guard stat(f.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
                stats.append((f.path, f.key, Int64(st.st_size), Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)))
            }
            guard !stats.isEmpty else { return 0 }
            try database.transaction {
                for (path, key, bytes, mtime) in stats {
                    let rows = try database.query("SELECT bytes, mtime_ns, state FROM uploads WHERE path = ?", [.text(path)])
                    if let r = rows.first {
                        let same = r[0].int == bytes && r[1].int == mtime
                        if same { continue }
                        try database.query("""
                            UPDATE uploads SET bytes = ?, mtime_ns = ?, state = CASE WHEN state = 'sending' THEN state ELSE 'queued' END,
                                queued_wall_ns = ?, next_try_wall_ns = 0, attempts = 0, error = NULL, md5 = NULL WHERE path = ?
                            """, [.int(bytes), .int(mtime), .int(now), .text(path)])
                    } else {
                        try database.query("INSERT INTO uploads(path, key, bytes, mtime_ns, queued_wall_ns, state) VALUES (?,?,?,?,?,'queued')",
                                           [.text(path), .text(key), .int(bytes), .int(mtime), .int(now)])
                    }
                    queued += 1
                }
            }
            return queued
        }
    }

    /// Whether any of `paths` is queued or being sent.
    public func unsent(_ paths: [String]) throws -> Bool {
        guard !paths.isEmpty else { return false }
        return try locked {
            let marks = Array(repeating: "?", count: paths.count).joined(separator: ",")
            let n = try database.query("SELECT count(*) FROM uploads WHERE state IN ('queued', 'sending') AND path IN (\(marks))", paths.map { .text($0) })
            return (n.first?.first?.int ?? 0) > 0
        }
    }

    /// The paths this journal knows.
    public func knownPaths() throws -> Set<String> {
        try locked {
            Set(try database.query("SELECT path FROM uploads").compactMap { $0[0].text })
        }
    }

    /// Gives back claims whose process is gone; returns their multipart uploads to abort.
    public func releaseAbandoned() throws -> [(key: String, multipartID: String)] {
        try locked {
            try database.transaction {
                let rows = try database.query("SELECT id, owner, key, multipart_id FROM uploads WHERE state = 'sending'")
                var aborts: [(String, String)] = []
                for r in rows {
                    let owner = Int32(truncatingIfNeeded: r[1].int ?? 0)
                    // Held by a live process other than this one's current run: not abandoned. (A pid
                    // of this process's that this run never claimed is a dead one's, reused.)
                    let mine = owner == getpid() && ownedHere.withLock { $0.contains(r[0].int!) }
                    let elsewhere = owner != getpid() && Self.alive(owner)
                    if mine || elsewhere { continue }
                    if let m = r[3].text { aborts.append((r[2].text ?? "", m)) }
                    try database.query("UPDATE uploads SET state = 'queued', owner = NULL, multipart_id = NULL WHERE id = ?", [r[0]])
                }
                return aborts
            }
        }
    }

    /// Rows this process claimed and has not settled.
    private let ownedHere = Mutex<Set<Int64>>([])

    static func alive(_ pid: Int32) -> Bool {
        pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }

    /// Claims up to `limit` of the oldest files due by `now`, for this process.
    public func claim(limit: Int, now: Int64 = wallNow()) throws -> [Row] {
        try locked {
            guard limit > 0 else { return [] }
            return try database.transaction {
                let rows = try database.query("""
                    SELECT id, path, key, bytes, attempts FROM uploads WHERE state = 'queued' AND next_try_wall_ns <= ?
                    ORDER BY queued_wall_ns, id LIMIT ?
                    """, [.int(now), .int(Int64(limit))])
                var out: [Row] = []
                for r in rows {
                    try database.query("UPDATE uploads SET state = 'sending', owner = ?, attempts = attempts + 1 WHERE id = ?", [.int(Int64(getpid())), r[0]])
                    out.append(Row(id: r[0].int!, path: r[1].text!, key: r[2].text!, bytes: r[3].int!, attempts: Int(r[4].int!) + 1))
                    ownedHere.withLock { _ = $0.insert(r[0].int!) }
                }
                return out
            }
        }
    }

    public func setMultipart(_ id: Int64, _ upload: String?) throws {
        try locked {
            try database.query("UPDATE uploads SET multipart_id = ? WHERE id = ?", [upload.map(Value.text) ?? .null, .int(id)])
        }
    }

    /// The file as it was sent (`bytes`, `mtime` from before it was hashed) is in the bucket.
    /// If it was queued again meanwhile as changed (a sidecar rewritten whole while it was being
    /// sent), it goes back to the queue instead: the newer content is sent too.
    public func uploaded(_ id: Int64, md5: String, etag: String, bytes: Int64, mtime: Int64) throws {
        try locked {
            try database.query("""
                UPDATE uploads SET state = CASE WHEN bytes = ? AND mtime_ns = ? THEN 'uploaded' ELSE 'queued' END, owner = NULL, md5 = ?, etag = ?,
                    error = NULL, multipart_id = NULL, uploaded_wall_ns = ?, next_try_wall_ns = 0 WHERE id = ?
                """, [.int(bytes), .int(mtime), .text(md5), .text(etag), .int(Self.wallNow()), .int(id)])
            ownedHere.withLock { _ = $0.remove(id) }
        }
    }

    public func state(_ id: Int64) throws -> State? {
        try locked {
            try database.query("SELECT state FROM uploads WHERE id = ?", [.int(id)]).first?.first?.text.flatMap(State.init(rawValue:))
        }
    }

    /// Back to the queue, to be tried at `next` (wall ns), with why this try failed.
    public func retry(_ id: Int64, error: String, next: Int64) throws {
        try locked {
            try database.query("UPDATE uploads SET state = 'queued', owner = NULL, error = ?, next_try_wall_ns = ?, multipart_id = NULL WHERE id = ?",
                               [.text(error), .int(next), .int(id)])
            ownedHere.withLock { _ = $0.remove(id) }
        }
    }

    /// Failed for good: the file is gone or no longer what was queued.
    public func failed(_ id: Int64, error: String) throws {
        try locked {
            try database.query("UPDATE uploads SET state = 'failed', owner = NULL, error = ?, multipart_id = NULL WHERE id = ?", [.text(error), .int(id)])
            ownedHere.withLock { _ = $0.remove(id) }
        }
    }

    public func deleted(_ id: Int64) throws {
        try locked {
            try database.query("UPDATE uploads SET deleted = 1 WHERE id = ?", [.int(id)])
        }
    }

    /// The earliest time a queued file is due, if any is queued.
    public func nextDue() throws -> Int64? {
        try locked {
            try database.query("SELECT MIN(next_try_wall_ns) FROM uploads WHERE state = 'queued'").first?.first?.int
        }
    }

    public struct Counts: Sendable, Hashable {
        /// Waiting or being sent.
        public var waiting = 0
        public var waitingBytes: Int64 = 0
        public var sending = 0
        public var oldestWaitingWallNs: Int64?
        public var uploaded = 0
        public var uploadedBytes: Int64 = 0
        public var failed = 0
        public var deleted = 0
        /// The newest reason a try failed, among the files still waiting.
        public var lastError: String?
    }

    public func counts() throws -> Counts {
        try locked {
            var c = Counts()
            for r in try database.query("SELECT state, COUNT(*), COALESCE(SUM(bytes), 0), MIN(queued_wall_ns), COALESCE(SUM(deleted), 0) FROM uploads GROUP BY state") {
                let n = Int(r[1].int ?? 0), b = r[2].int ?? 0
                switch State(rawValue: r[0].text ?? "") {
                case .queued, .sending:
                    c.waiting += n
                    c.waitingBytes += b
                    if r[0].text == State.sending.rawValue { c.sending = n }
                    if let t = r[3].int { c.oldestWaitingWallNs = min(c.oldestWaitingWallNs ?? t, t) }
                case .uploaded:
                    c.uploaded = n
                    c.uploadedBytes = b
                    c.deleted = Int(r[4].int ?? 0)
                case .failed: c.failed = n
                case nil: break
                }
            }
            c.lastError = try database.query("SELECT error FROM uploads WHERE state IN ('queued', 'sending') AND error IS NOT NULL ORDER BY next_try_wall_ns DESC LIMIT 1").first?.first?.text
            return c
        }
    }

    public struct Entry: Sendable, Hashable {
        public var path: String
        public var key: String
        public var bytes: Int64
        public var state: State
        public var md5: String?
        public var etag: String?
        public var attempts: Int
        public var error: String?
        public var deleted: Bool
    }

    /// Every row (a check, a test).
    public func entries() throws -> [Entry] {
        try locked {
            try database.query("SELECT path, key, bytes, state, md5, etag, attempts, error, deleted FROM uploads ORDER BY id").map {
                Entry(path: $0[0].text!, key: $0[1].text!, bytes: $0[2].int!, state: State(rawValue: $0[3].text!) ?? .failed, md5: $0[4].text, etag: $0[5].text,
                      attempts: Int($0[6].int!), error: $0[7].text, deleted: $0[8].int == 1)
            }
        }
    }
}

typealias Value = SQLiteDatabase.Value

