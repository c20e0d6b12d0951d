import ShutterbugCore
import Timelapse

#if canImport(Glibc)
import Glibc
#endif

/// A timelapse job's journal in SQLite: the job, every slot (taken, skipped, failed or missed,
/// and why), every frame's metadata, every file with its size and checksum, each slot's ramp
/// decision and the ramp state. WAL with full sync, and one transaction per slot, so a power
/// cut at any instant leaves it consistent: a slot is in it whole or not at all.
public final class TimelapseJournal: @unchecked Sendable {
    // `@unchecked Sendable`: the database serialises access; used from one task at a time.
    public let database: SQLiteDatabase
    public let jobID: Int64
    /// The job was new to this journal when it was opened.
    public let created: Bool
    public let jobName: String
    /// Held while the job runs (`flock`, released by the kernel however the process ends).
    private let lockFD: Int32

    public static let schemaVersion = 1

    /// What a previous run of the job left: the last slot decided, the ramp, the counts.
    public struct Resume: Sendable, Hashable {
        public var lastSlot: Int?
        public var ramp: ExposureRamp.Settings?
        public var taken: Int
        public var skipped: Int
        /// The highest file number used, so numbering continues.
        public var lastNumber: Int
        /// The white balance the last slot was taken with, where it was cross-faded.
        public var whiteBalance: ColourGains? = nil
    }

    public enum SlotState: String, Sendable, CaseIterable {
        case taken, skipped, failed, missed
    }

    public struct FrameRecord: Sendable {
        public var step: Int
        public var metadata: FrameMetadata
        public var bias: Double?
        public init(step: Int, metadata: FrameMetadata, bias: Double?) {
            self.step = step
            self.metadata = metadata
            self.bias = bias
        }
    }

    public struct FileRecord: Sendable {
        public var path: String
        public var bytes: Int
        public var crc32: UInt32
        public init(path: String, bytes: Int, crc32: UInt32) {
            self.path = path
            self.bytes = bytes
            self.crc32 = crc32
        }
    }

    public struct SlotRecord: Sendable {
        public var index: Int
        public var wall: WallClockTime
        public var state: SlotState
        public var reason: String?
        /// The slot's instant on the monotonic clock, the first frame's exposure start, and the
        /// difference (the schedule error).
        public var instant: SensorTime?
        public var exposureStart: SensorTime?
        public var captureID: String?
        public var number: Int?
        public init(index: Int, wall: WallClockTime, state: SlotState, reason: String? = nil, instant: SensorTime? = nil, exposureStart: SensorTime? = nil,
                    captureID: String? = nil, number: Int? = nil) {
            self.index = index
            self.wall = wall
            self.state = state
            self.reason = reason
            self.instant = instant
            self.exposureStart = exposureStart
            self.captureID = captureID
            self.number = number
        }
    }

    /// Opens the journal at `path` and the job `name` in it, creating either. A job of the same
    /// name with a different `spec` is refused: resuming continues a job, it does not change it.
    /// - Throws: `.busy` when another process runs the same job on this journal.
    public init(path: String, job name: String, spec: String) throws {
        // One run of a job at a time: two would take the same slots.
        let lockPath = path + ".lock-" + name.utf8.map { String($0, radix: 16) }.joined()
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ShutterbugError(.system, "cannot open the job's lock \(lockPath): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw ShutterbugError(.busy, "the job '\(name)' is already running on \(path) (another process holds \(lockPath)); stop it first, or give another --job name")
        }
        lockFD = fd
        do {
            database = try SQLiteDatabase(path: path)
            // A journal damaged in the middle is found now, before a slot is taken, not after.
            let check = try database.query("PRAGMA quick_check").map { $0.first?.text ?? "" }
            guard check == ["ok"] else { throw ShutterbugError(.system, check.prefix(3).joined(separator: "; ").split(whereSeparator: \.isNewline).joined(separator: " ")) }
        } catch let e as ShutterbugError {
            close(fd)
            throw ShutterbugError(.invalidState, "the journal \(path) is damaged (\(e.message)); the photos beside it are untouched. Move it aside (mv \(path) \(path).damaged) and run again with --ignore-existing-photos to start a new journal, or restore it from a copy")
        } catch {
            close(fd)
            throw error
        }
        // From here a failure gives the lock back as well: the init throws before deinit could
        // (a reload that changed a job's settings kept the job's journal locked until a restart).
        do {
            try Self.prepareSchema(database)
            if let row = try database.query("SELECT id, spec FROM jobs WHERE name = ?", [.text(name)]).first {
                guard Self.sameSpec(row[1].text ?? "", spec) else {
                    throw ShutterbugError(.invalidArgument, "the journal \(path) has a job '\(name)' with other settings (\(row[1].text ?? "")); resume it with the same settings, or give a new --job name")
                }
                jobID = row[0].int!
                created = false
            } else {
                try database.query("INSERT INTO jobs(name, spec, created_wall_ns) VALUES (?, ?, ?)", [.text(name), .text(spec), .int(Self.wallNow())])
                jobID = try database.query("SELECT last_insert_rowid()")[0][0].int!
                created = true
            }
        } catch {
            close(fd)
            throw error
        }
        jobName = name
    }

    private static func prepareSchema(_ database: SQLiteDatabase) throws {
        try database.execute("""
            PRAGMA journal_mode=WAL;
            PRAGMA synchronous=FULL;
            PRAGMA foreign_keys=ON;
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS jobs(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, spec TEXT NOT NULL, created_wall_ns INTEGER NOT NULL, anchor_wall_ns INTEGER);
            CREATE TABLE IF NOT EXISTS slots(
                job INTEGER NOT NULL REFERENCES jobs(id), idx INTEGER NOT NULL, wall_ns INTEGER NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('taken', 'skipped', 'failed', 'missed')), reason TEXT,
                instant_ns INTEGER, exposure_start_ns INTEGER, error_ns INTEGER, capture_id TEXT UNIQUE, number INTEGER,
                PRIMARY KEY (job, idx));
            CREATE UNIQUE INDEX IF NOT EXISTS slots_number ON slots(job, number);
            CREATE TABLE IF NOT EXISTS frames(
                job INTEGER NOT NULL, idx INTEGER NOT NULL, step INTEGER NOT NULL, bias_ev REAL, sequence INTEGER,
                sensor_timestamp_ns INTEGER, exposure_start_ns INTEGER, exposure_us REAL, analogue_gain REAL, digital_gain REAL,
                lux REAL, colour_gain_red REAL, colour_gain_blue REAL, colour_temperature INTEGER,
                PRIMARY KEY (job, idx, step), FOREIGN KEY (job, idx) REFERENCES slots(job, idx));
            CREATE TABLE IF NOT EXISTS files(
                path TEXT PRIMARY KEY, job INTEGER NOT NULL, idx INTEGER NOT NULL, bytes INTEGER NOT NULL, crc32 INTEGER NOT NULL,
                deleted INTEGER NOT NULL DEFAULT 0, FOREIGN KEY (job, idx) REFERENCES slots(job, idx));
            CREATE TABLE IF NOT EXISTS decisions(
                job INTEGER NOT NULL, idx INTEGER NOT NULL, metered REAL, lux REAL, error_ev REAL, night_offset_ev REAL, step_ev REAL,
                from_exposure_us REAL, from_gain REAL, to_exposure_us REAL, to_gain REAL, phase TEXT, note TEXT,
                PRIMARY KEY (job, idx), FOREIGN KEY (job, idx) REFERENCES slots(job, idx));
            CREATE TABLE IF NOT EXISTS keogram(job INTEGER NOT NULL, idx INTEGER NOT NULL, rgb BLOB NOT NULL,
                PRIMARY KEY (job, idx), FOREIGN KEY (job, idx) REFERENCES slots(job, idx));
            CREATE TABLE IF NOT EXISTS thumbs(job INTEGER NOT NULL, idx INTEGER NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
                exposure_us REAL, gain REAL, rgb BLOB NOT NULL, PRIMARY KEY (job, idx), FOREIGN KEY (job, idx) REFERENCES slots(job, idx));
            CREATE TABLE IF NOT EXISTS camera_starts(job INTEGER NOT NULL REFERENCES jobs(id), wall_ns INTEGER NOT NULL, startup_ns INTEGER NOT NULL,
                before_slot INTEGER, reason TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS ramp(job INTEGER PRIMARY KEY REFERENCES jobs(id), exposure_ns INTEGER NOT NULL, gain REAL NOT NULL, after_slot INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS white_balance(job INTEGER PRIMARY KEY REFERENCES jobs(id), red REAL NOT NULL, blue REAL NOT NULL, after_slot INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS intents(job INTEGER NOT NULL REFERENCES jobs(id), idx INTEGER NOT NULL, wall_ns INTEGER NOT NULL,
                number INTEGER, started_wall_ns INTEGER NOT NULL, PRIMARY KEY (job, idx));
            INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '\(Self.schemaVersion)');
            """)
    }

    /// A slot about to be written: its index, wall time and capture number, journalled before
    /// any of its files is, so a run killed between its files and its row leaves a trace the
    /// next run reconciles (`pendingSlots`). `record` of the slot clears it in its transaction.
    public struct Intent: Sendable, Hashable {
        public var index: Int
        public var wall: WallClockTime
        public var number: Int?
        public init(index: Int, wall: WallClockTime, number: Int?) {
            self.index = index
            self.wall = wall
            self.number = number
        }
    }

    /// The highest capture number this job has journalled, in a slot or an intent: the next
    /// slot's must be above it, whatever the folder's counter says.
    public func highestNumber() throws -> Int? {
        let row = try database.query("SELECT max(n) FROM (SELECT max(number) AS n FROM slots WHERE job = ? UNION ALL SELECT max(number) FROM intents WHERE job = ?)",
                                     [.int(jobID), .int(jobID)])
        return row.first?[0].int.map(Int.init)
    }

    public func intend(_ intent: Intent) throws {
        try database.query("INSERT OR REPLACE INTO intents VALUES (?,?,?,?,?)", [.int(jobID), .int(Int64(intent.index)), .int(intent.wall.nanoseconds),
                                                                                 intent.number.map { .int(Int64($0)) } ?? .null, .int(Self.wallNow())])
    }

    /// Slots begun and never recorded (the process was killed in between), oldest first.
    public func pendingSlots() throws -> [Intent] {
        try database.query("SELECT idx, wall_ns, number FROM intents WHERE job = ? AND idx NOT IN (SELECT idx FROM slots WHERE job = ?) ORDER BY idx",
                           [.int(jobID), .int(jobID)]).map {
            Intent(index: Int($0[0].int!), wall: WallClockTime(nanoseconds: $0[1].int!), number: $0[2].int.map(Int.init))
        }
    }

    /// Removes the job this opening created, before anything was recorded for it (a start
    /// refused after the journal was opened).
    public func discardNewJob() throws {
        guard created else { return }
        try database.transaction {
            try database.query("DELETE FROM intents WHERE job = ?", [.int(jobID)])
            try database.query("DELETE FROM jobs WHERE id = ? AND NOT EXISTS (SELECT 1 FROM slots WHERE job = ?)", [.int(jobID), .int(jobID)])
        }
    }

    /// Every file path any job of this journal recorded (deleted ones too).
    public func knownPaths() throws -> Set<String> {
        Set(try database.query("SELECT path FROM files").compactMap { $0[0].text })
    }

    /// The job's slot 0 in wall time, once set: a resumed job keeps its grid.
    public func anchor() throws -> WallClockTime? {
        try database.query("SELECT anchor_wall_ns FROM jobs WHERE id = ?", [.int(jobID)]).first?[0].int.map { WallClockTime(nanoseconds: $0) }
    }

    /// Sets the job's slot 0 (its first run does).
    public func setAnchor(_ anchor: WallClockTime) throws {
        try database.query("UPDATE jobs SET anchor_wall_ns = ? WHERE id = ? AND anchor_wall_ns IS NULL", [.int(anchor.nanoseconds), .int(jobID)])
    }

    /// Whether two jobs' settings texts mean the same job: the file formats are a set, so
    /// `format=jpeg,dng` is `format=dng,jpeg` (and `jpg` is `jpeg`, `raw` is `dng`).
    /// Whether a journal of `a`'s settings resumes a job of `b`'s (formats in any order, aliases).
    public static func sameSpec(_ a: String, _ b: String) -> Bool {
        func canonical(_ text: String) -> [String] {
            text.split(separator: " ").map { token in
                guard token.hasPrefix("format=") else { return String(token) }
                let aliases = ["jpg": "jpeg", "raw": "dng"]
                let formats = Set(token.dropFirst("format=".count).split(separator: ",").map { w in
                    let word = w.lowercased()
                    return aliases[word] ?? word
                })
                return "format=" + formats.sorted().joined(separator: ",")
            }
        }
        return canonical(a) == canonical(b)
    }

    /// What a previous run of this job left.
    public func resume() throws -> Resume {
        let counts = try database.query("SELECT max(idx), sum(state = 'taken'), sum(state != 'taken'), max(number) FROM slots WHERE job = ?", [.int(jobID)])[0]
        let ramp = try database.query("SELECT exposure_ns, gain FROM ramp WHERE job = ?", [.int(jobID)]).first
        let wb = try database.query("SELECT red, blue FROM white_balance WHERE job = ?", [.int(jobID)]).first
        return Resume(lastSlot: counts[0].int.map(Int.init), ramp: ramp.map { .init(exposure: .nanoseconds($0[0].int!), gain: $0[1].double!) },
                      taken: Int(counts[1].int ?? 0), skipped: Int(counts[2].int ?? 0), lastNumber: Int(counts[3].int ?? 0),
                      whiteBalance: wb.map { ColourGains(red: $0[0].double!, blue: $0[1].double!) })
    }

    /// Records one slot whole: the slot, its frames, files, ramp decision and the ramp state
    /// after it, in one transaction.
    /// `keogram`: the slot's keogram column (RGB, top to bottom). `thumbnail`: its 0 EV
    /// photo, small, kept while the slot is one of those spread evenly over the run
    /// (`RunSheet.stride`).
    public func record(_ slot: SlotRecord, frames: [FrameRecord] = [], files: [FileRecord] = [], decision: ExposureRamp.Decision? = nil,
                       rampAfter: ExposureRamp.Settings? = nil, whiteBalanceAfter: ColourGains? = nil, keogram: [UInt8]? = nil, thumbnail: Thumbnail? = nil) throws {
        try database.transaction {
            var error = Value.null
            if let i = slot.instant, let e = slot.exposureStart { error = .int((e - i).nanosecondsValue) }
            try database.query("INSERT INTO slots(job, idx, wall_ns, state, reason, instant_ns, exposure_start_ns, error_ns, capture_id, number) VALUES (?,?,?,?,?,?,?,?,?,?)",
                               [.int(jobID), .int(Int64(slot.index)), .int(slot.wall.nanoseconds), .text(slot.state.rawValue), slot.reason.map(Value.text) ?? .null,
                                slot.instant.map { .int($0.nanoseconds) } ?? .null, slot.exposureStart.map { .int($0.nanoseconds) } ?? .null, error,
                                slot.captureID.map(Value.text) ?? .null, slot.number.map { .int(Int64($0)) } ?? .null])
            for f in frames {
                let m = f.metadata
                try database.query("INSERT INTO frames VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", [
                    .int(jobID), .int(Int64(slot.index)), .int(Int64(f.step)), f.bias.map(Value.double) ?? .null, .int(Int64(m.sequence)),
                    m.sensorTimestamp.map { .int($0.nanoseconds) } ?? .null, m.exposureStart.map { .int($0.nanoseconds) } ?? .null,
                    m.exposureTime.map { .double($0.microsecondsValue) } ?? .null, m.analogueGain.map { .double($0.value) } ?? .null,
                    m.digitalGain.map { .double($0.value) } ?? .null, m.lux.map(Value.double) ?? .null, m.colourGains.map { .double($0.red) } ?? .null,
                    m.colourGains.map { .double($0.blue) } ?? .null, m.colourTemperature.map { .int(Int64($0)) } ?? .null])
            }
            try database.query("DELETE FROM intents WHERE job = ? AND idx = ?", [.int(jobID), .int(Int64(slot.index))])
            for f in files {
                try database.query("INSERT INTO files(path, job, idx, bytes, crc32) VALUES (?,?,?,?,?)",
                                   [.text(f.path), .int(jobID), .int(Int64(slot.index)), .int(Int64(f.bytes)), .int(Int64(f.crc32))])
            }
            if let d = decision {
                try database.query("INSERT INTO decisions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", [
                    .int(jobID), .int(Int64(slot.index)), .double(d.metered), d.lux.map(Value.double) ?? .null, .double(d.errorEV), .double(d.nightOffsetEV),
                    .double(d.stepEV), .double(d.from.exposure.microsecondsValue), .double(d.from.gain), .double(d.to.exposure.microsecondsValue),
                    .double(d.to.gain), .text(d.phase), .text(d.note)])
            }
            if let k = keogram {
                try database.query("INSERT INTO keogram VALUES (?,?,?)", [.int(jobID), .int(Int64(slot.index)), .blob(k)])
            }
            let stride = Int64(Self.thumbStride(latest: slot.index))
            if let t = thumbnail, Int64(slot.index) % stride == 0 {
                try database.query("INSERT INTO thumbs VALUES (?,?,?,?,?,?,?)", [.int(jobID), .int(Int64(slot.index)), .int(Int64(t.width)), .int(Int64(t.height)),
                                                                                  t.exposure.map { .double($0.microsecondsValue) } ?? .null, t.gain.map(Value.double) ?? .null, .blob(t.rgb)])
            }
            try database.query("DELETE FROM thumbs WHERE job = ? AND idx % ? != 0", [.int(jobID), .int(stride)])
            if let r = rampAfter {
                try database.query("INSERT INTO ramp(job, exposure_ns, gain, after_slot) VALUES (?,?,?,?) ON CONFLICT(job) DO UPDATE SET exposure_ns = excluded.exposure_ns, gain = excluded.gain, after_slot = excluded.after_slot",
                                   [.int(jobID), .int(r.exposure.nanosecondsValue), .double(r.gain), .int(Int64(slot.index))])
            }
            if let w = whiteBalanceAfter {
                try database.query("INSERT INTO white_balance(job, red, blue, after_slot) VALUES (?,?,?,?) ON CONFLICT(job) DO UPDATE SET red = excluded.red, blue = excluded.blue, after_slot = excluded.after_slot",
                                   [.int(jobID), .double(w.red), .double(w.blue), .int(Int64(slot.index))])
            }
        }
    }

    /// The camera was started (the job's start, after a failure, or after being stopped
    /// between slots) and took `startup` from open to its first settled frame.
    public func recordCameraStart(wall: WallClockTime, startup: Duration, beforeSlot: Int?, reason: String) throws {
        try database.query("INSERT INTO camera_starts VALUES (?,?,?,?,?)", [.int(jobID), .int(wall.nanoseconds), .int(startup.nanosecondsValue),
                                                                            beforeSlot.map { .int(Int64($0)) } ?? .null, .text(reason)])
    }

    /// A slot's photo, small, for the run's contact sheet.
    public struct Thumbnail: Sendable {
        public var rgb: [UInt8]
        public var width: Int
        public var height: Int
        public var exposure: Duration?
        public var gain: Double?
        public var index = 0
        public var wall = WallClockTime(nanoseconds: 0)
        public init(rgb: [UInt8], width: Int, height: Int, exposure: Duration?, gain: Double?) {
            self.rgb = rgb
            self.width = width
            self.height = height
            self.exposure = exposure
            self.gain = gain
        }
    }

    /// Thumbnails are kept for every `stride`-th slot, the stride the least power of two that
    /// keeps at most `limit` of the slots up to `latest`: they stay spread evenly over the
    /// run however long it gets.
    public static func thumbStride(latest: Int, limit: Int = 48) -> Int {
        var s = 1
        while latest / s + 1 > limit { s *= 2 }
        return s
    }

    /// The thumbnails kept, in slot order, with their slots' wall times.
    public func thumbnails() throws -> [Thumbnail] {
        try database.query("SELECT t.idx, t.width, t.height, t.exposure_us, t.gain, t.rgb, s.wall_ns FROM thumbs t JOIN slots s ON s.job = t.job AND s.idx = t.idx WHERE t.job = ? ORDER BY t.idx",
                           [.int(jobID)]).map { r in
            var t = Thumbnail(rgb: r[5].blob ?? [], width: Int(r[1].int ?? 0), height: Int(r[2].int ?? 0),
                              exposure: r[3].double.map { .nanoseconds(Int64($0 * 1000)) }, gain: r[4].double)
            t.index = Int(r[0].int ?? 0)
            t.wall = WallClockTime(nanoseconds: r[6].int ?? 0)
            return t
        }
    }

    /// Every slot's keogram column from the first slot to the last recorded, nil where a
    /// slot has none.
    public func keogramColumns() throws -> [[UInt8]?] {
        let last = Int(try database.query("SELECT max(idx) FROM slots WHERE job = ?", [.int(jobID)])[0][0].int ?? -1)
        guard last >= 0 else { return [] }
        var columns = [[UInt8]?](repeating: nil, count: last + 1)
        for row in try database.query("SELECT idx, rgb FROM keogram WHERE job = ?", [.int(jobID)]) {
            if let i = row[0].int, Int(i) <= last { columns[Int(i)] = row[1].blob }
        }
        return columns
    }

    /// Bytes of the job's files still on disk.
    public func bytesKept() throws -> Int64 {
        try database.query("SELECT coalesce(sum(bytes), 0) FROM files WHERE job = ? AND deleted = 0", [.int(jobID)])[0][0].int ?? 0
    }

    /// Retention: the oldest slots whose files must go, whole, so the job keeps at most
    /// `maxBytes` and nothing taken before `before` (either may be nil). Slots from `current`
    /// on are never chosen (their files may still be being written).
    public func slotsToDelete(maxBytes: Int64?, before: WallClockTime?, current: Int) throws -> [(index: Int, paths: [String], bytes: Int64)] {
        let rows = try database.query(
            "SELECT f.idx, s.wall_ns, f.path, f.bytes FROM files f JOIN slots s ON s.job = f.job AND s.idx = f.idx WHERE f.job = ? AND f.deleted = 0 AND f.idx < ? ORDER BY f.idx",
            [.int(jobID), .int(Int64(current))])
        var bySlot: [(index: Int, wall: Int64, paths: [String], bytes: Int64)] = []
        for r in rows {
            let i = Int(r[0].int!), path = r[2].text!, bytes = r[3].int!
            if bySlot.last?.index == i {
                bySlot[bySlot.count - 1].paths.append(path)
                bySlot[bySlot.count - 1].bytes += bytes
            } else {
                bySlot.append((i, r[1].int!, [path], bytes))
            }
        }
        var kept = try bytesKept()
        var out: [(index: Int, paths: [String], bytes: Int64)] = []
        for slot in bySlot {
            let tooOld = before.map { slot.wall < $0.nanoseconds } ?? false
            let tooMuch = maxBytes.map { kept > $0 } ?? false
            guard tooOld || tooMuch else { break }
            out.append((slot.index, slot.paths, slot.bytes))
            kept -= slot.bytes
        }
        return out
    }

    /// Marks a slot's files deleted (after they were unlinked).
    public func markDeleted(slot index: Int) throws {
        try database.query("UPDATE files SET deleted = 1 WHERE job = ? AND idx = ?", [.int(jobID), .int(Int64(index))])
    }

    /// Slots recorded per state.
    public func counts() throws -> [SlotState: Int] {
        var out: [SlotState: Int] = [:]
        for row in try database.query("SELECT state, count(*) FROM slots WHERE job = ? GROUP BY state", [.int(jobID)]) {
            if let s = row[0].text.flatMap(SlotState.init) { out[s] = Int(row[1].int ?? 0) }
        }
        return out
    }

    /// The schedule errors (exposure start - slot instant) of the taken slots, in order.
    public func scheduleErrors() throws -> [Duration] {
        try database.query("SELECT error_ns FROM slots WHERE job = ? AND state = 'taken' AND error_ns IS NOT NULL ORDER BY idx", [.int(jobID)]).map { .nanoseconds($0[0].int!) }
    }

    public typealias Value = SQLiteDatabase.Value

    deinit { close(lockFD) }

    static func wallNow() -> Int64 {
        var t = timespec()
        clock_gettime(CLOCK_REALTIME, &t)
        return Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec)
    }
}
