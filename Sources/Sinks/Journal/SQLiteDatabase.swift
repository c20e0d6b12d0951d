import CSQLite
import ShutterbugCore

/// A SQLite database through the C API: statements prepared per call, values bound by
/// position, errors as `ShutterbugError` with SQLite's message. One connection, used from one
/// task at a time.
public final class SQLiteDatabase: @unchecked Sendable {
    // `@unchecked Sendable`: SQLite's default (serialized) threading mode guards the handle.
    let handle: OpaquePointer
    public let path: String

    public enum Value: Sendable, Hashable {
        case int(Int64)
        case double(Double)
        case text(String)
        case blob([UInt8])
        case null

        public var int: Int64? { if case .int(let v) = self { v } else { nil } }
        public var double: Double? {
            switch self {
            case .double(let v): v
            case .int(let v): Double(v)
            default: nil
            }
        }
        public var text: String? { if case .text(let v) = self { v } else { nil } }
        public var blob: [UInt8]? { if case .blob(let v) = self { v } else { nil } }
    }

    /// Opens (creating) the database at `path`.
    public init(path: String) throws {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let db { sqlite3_close(db) }
            throw ShutterbugError(.system, "opening the journal \(path): \(message)")
        }
        handle = db
        self.path = path
        sqlite3_busy_timeout(db, 5000)
    }

    deinit { sqlite3_close(handle) }

    private func error(_ what: String) -> ShutterbugError {
        let code = sqlite3_errcode(handle)
        let kind: ShutterbugError.Code = code == SQLITE_FULL ? .noSpace : .system
        return ShutterbugError(kind, "\(what) in the journal \(path): \(String(cString: sqlite3_errmsg(handle)))")
    }

    /// Runs one or more statements with no parameters.
    public func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &message) == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(message)
            throw ShutterbugError(sqlite3_errcode(handle) == SQLITE_FULL ? .noSpace : .system, "\(text) in the journal \(path) (\(sql.prefix(60)))")
        }
    }

    /// Runs one statement with parameters; returns the rows.
    @discardableResult
    public func query(_ sql: String, _ values: [Value] = []) throws -> [[Value]] {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else { throw error("preparing \(sql.prefix(60))") }
        defer { sqlite3_finalize(stmt) }
        for (i, v) in values.enumerated() {
            let n = Int32(i + 1)
            let rc: Int32 = switch v {
            case .int(let x): sqlite3_bind_int64(stmt, n, x)
            case .double(let x): sqlite3_bind_double(stmt, n, x)
            case .text(let x): sbsqlite_bind_text(stmt, n, x)
            case .blob(let x): x.withUnsafeBytes { sbsqlite_bind_blob(stmt, n, $0.baseAddress, Int32($0.count)) }
            case .null: sqlite3_bind_null(stmt, n)
            }
            guard rc == SQLITE_OK else { throw error("binding value \(n)") }
        }
        var rows: [[Value]] = []
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw error("running \(sql.prefix(60))") }
            let columns = sqlite3_column_count(stmt)
            rows.append((0..<columns).map { c in
                switch sqlite3_column_type(stmt, c) {
                case SQLITE_INTEGER: .int(sqlite3_column_int64(stmt, c))
                case SQLITE_FLOAT: .double(sqlite3_column_double(stmt, c))
                case SQLITE_TEXT: .text(String(cString: sqlite3_column_text(stmt, c)))
                case SQLITE_BLOB:
                    .blob(Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(stmt, c), count: Int(sqlite3_column_bytes(stmt, c)))))
                default: .null
                }
            })
        }
        return rows
    }

    /// `body` inside one transaction: all of it or none of it reaches the file.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let out = try body()
            try execute("COMMIT")
            return out
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// `PRAGMA integrity_check`: "ok" when the file is consistent.
    public func integrityCheck() throws -> String {
        try query("PRAGMA integrity_check").map { $0.first?.text ?? "" }.joined(separator: "; ")
    }
}
