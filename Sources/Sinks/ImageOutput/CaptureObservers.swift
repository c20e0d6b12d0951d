import Foundation
import Synchronization

/// Who wants to know of every capture's files written under a folder: an uploader queues them
/// for object storage. Whatever writes them (the API's captures, a trigger's, a timelapse job's
/// slots, each through a `PhotoFileWriter` of its own and its own `OutputDirectory`), the files
/// are handed over once the capture's last file is written and synced, before the capture is
/// reported finished, so a capture reported done is one its observer already has.
public enum CaptureObservers {
    public typealias Handler = @Sendable (_ files: [String]) -> Void
    /// Whether any of `files` is still wanted by the observer (queued, not yet sent).
    public typealias Wants = @Sendable (_ files: [String]) -> Bool

    private static let handlers = Mutex<[Int: (root: String, handler: Handler, wants: Wants?)]>([:])
    private static let nextID = Atomic<Int>(0)

    /// Calls `handler` with the full paths of each capture's files under `root` (a file under
    /// a folder inside it too), until the token is cancelled.
    /// `wants`, where given, tells whether files it was handed are still to be dealt with (an
    /// uploader's queue): retention leaves those alone (`stillWanted`).
    public static func observe(under root: String, _ handler: @escaping Handler, wants: Wants? = nil) -> Token {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let root = absolute(root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root)
        handlers.withLock { $0[id] = (root, handler, wants) }
        return Token(id: id)
    }

    /// Whether an observer whose folder holds any of `files` still wants it (an upload not
    /// yet confirmed): such files must not be deleted yet.
    public static func stillWanted(_ files: [String]) -> Bool {
        let current = handlers.withLock { Array($0.values) }
        for (root, _, wants) in current {
            guard let wants else { continue }
            let mine = files.map(absolute).filter { $0.hasPrefix(root + "/") }
            if !mine.isEmpty, wants(mine) { return true }
        }
        return false
    }

    /// Hands `files` (full paths) to every observer whose folder holds them.
    public static func captured(_ files: [String]) {
        guard !files.isEmpty else { return }
        let current = handlers.withLock { Array($0.values) }
        for (root, handler, _) in current {
            let mine = files.map(absolute).filter { $0.hasPrefix(root + "/") }
            if !mine.isEmpty { handler(mine) }
        }
    }

    /// `path` from the root: the same folder named relatively by one part and absolutely by
    /// another is one folder.
    public static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + (path.hasPrefix("./") ? String(path.dropFirst(2)) : path)
    }

    public final class Token: Sendable {
        let id: Int
        init(id: Int) { self.id = id }
        public func cancel() { _ = CaptureObservers.handlers.withLock { $0.removeValue(forKey: id) } }
        deinit { cancel() }
    }
}
