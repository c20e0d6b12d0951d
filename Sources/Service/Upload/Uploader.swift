import Foundation
import HTTPTransfer
import ImageOutput
import Logging
import ShutterbugCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Sends every capture's files written under a folder to an S3 bucket, from the folder's upload
/// journal: queued as each capture's files are written (before the capture is reported done),
/// sent oldest first, a few at once, at low priority and within a bandwidth limit, so capture
/// never waits for it. A failed try is retried with capped exponential backoff and jitter;
/// while the store is unreachable or refuses the keys the whole queue waits (one probe per
/// backoff, not a request per file), and drains oldest first once it answers again.
///
/// Each file is verified: the store checks the `Content-MD5` it is sent, and its ETag must be
/// the file's MD5 (or, for a multipart upload, the MD5 of the parts' MD5s). A file is deleted
/// from the card (`deleteAfterUpload`) only after a HEAD of its object shows that ETag and size.
public final class Uploader: Sendable {
    public let settings: UploadSettings
    public let journal: UploadJournal
    public let folder: String
    let bucket: S3Bucket
    let host: String
    let logger: Logger
    let wake = WakeSignal()

    struct Health {
        var consecutiveFailures = 0
        var pausedUntil: ContinuousClock.Instant?
        /// The kind of failure last logged: a failure like the last one is not logged again.
        var lastLogged: String?
        var inFlight = 0
        var failedTries = 0
        var lastFailure: String?
    }
    let health = Mutex(Health())
    private let observer = Mutex<CaptureObservers.Token?>(nil)
    /// Files written that the journal could not take yet (a full disk).
    private let unqueued = Mutex<[String]>([])
    /// Sends' outcomes the journal could not take yet.
    private let unsettled = Mutex<[@Sendable () throws -> Void]>([])

    /// Opens the folder's journal. Files written from now on under `folder` are queued
    /// (`CaptureObservers`) until `stop`.
    public init(_ settings: UploadSettings, folder: String, logger: Logger) throws {
        self.settings = settings
        self.folder = CaptureObservers.absolute(folder.count > 1 && folder.hasSuffix("/") ? String(folder.dropLast()) : folder)
        journal = try UploadJournal(folder: self.folder)
        bucket = settings.bucketClient
        host = KeyTemplate.hostName
        self.logger = logger
        let token = CaptureObservers.observe(under: self.folder, { [weak self] files in self?.enqueue(files) },
                                             wants: { [weak self] files in self?.unsent(files) ?? false })
        observer.withLock { $0 = token }
    }

    /// No more files are queued by this uploader (those queued stay in the journal).
    public func stopObserving() {
        observer.withLock { $0?.cancel(); $0 = nil }
    }

    /// The key a file under the folder takes.
    public func key(for path: String) -> String {
        let full = CaptureObservers.absolute(path)
        let relative = full.hasPrefix(folder + "/") ? String(full.dropFirst(folder.count + 1)) : full
        return settings.keyTemplate.render(relative: relative, folder: folder, host: host)
    }

    /// Queues files (paths under the folder). Those a journal that cannot be written (a full
    /// disk) refuses are kept and queued again as the uploader goes on (and found again by the
    /// next start's `reconcile` should the process end first).
    public func enqueue(_ files: [String]) {
        let all = unqueued.withLock { u in defer { u = [] }; return u } + files
        do {
            try journal.enqueue(all.map { ($0, key(for: $0)) })
            wake.signal()
        } catch {
            let first = unqueued.withLock { u in
                defer { u.append(contentsOf: all) }
                return u.isEmpty
            }
            if first {
                logger.error("uploads: cannot queue \(all.count) file\(all.count == 1 ? "" : "s") in \(journal.folder)/\(UploadJournal.fileName): \(error); they are queued as soon as the journal takes them")
            }
        }
    }

    /// Whether any of `files` is queued and not yet confirmed in the bucket (or waits for the
    /// journal to take it). A journal that cannot be read says yes: a file is kept rather than
    /// lost.
    public func unsent(_ files: [String]) -> Bool {
        let set = Set(files)
        if unqueued.withLock({ $0.contains(where: set.contains) }) { return true }
        return (try? journal.unsent(files)) ?? true
    }

    /// Journal updates that settle a send (uploaded, to retry, failed), done now or, when the
    /// journal refuses them (a full disk), kept and done as soon as it takes them: a row
    /// left claimed would never be sent or counted again in this process. Returns whether it
    /// was done now.
    @discardableResult
    func settle(_ update: @escaping @Sendable () throws -> Void) -> Bool {
        do {
            try update()
            return true
        } catch {
            let first = unsettled.withLock { u in
                defer { u.append(update) }
                return u.isEmpty
            }
            if first { logger.error("uploads: the journal cannot record a send's outcome (\(error)); it is recorded as soon as it can be") }
            return false
        }
    }

    /// Settlements the journal refused, tried again in order.
    func settleRefused() {
        let pending = unsettled.withLock { u in defer { u = [] }; return u }
        for (i, update) in pending.enumerated() {
            do { try update() } catch {
                unsettled.withLock { $0.insert(contentsOf: pending[i...], at: 0) }
                return
            }
        }
    }

    /// Files the journal refused, tried again.
    func queueRefused() {
        guard unqueued.withLock({ !$0.isEmpty }) else { return }
        enqueue([])
    }

    /// Capture files in the folder written since the journal began that it does not know:
    /// those a process killed between writing them and queueing them left. Queued now.
    @discardableResult
    public func reconcile() throws -> Int {
        let since = try journal.since()
        let known = try journal.knownPaths()
        var found: [String] = []
        guard let e = FileManager.default.enumerator(atPath: folder) else { return 0 }
        while let relative = e.nextObject() as? String {
            let name = relative.split(separator: "/").last.map(String.init) ?? relative
            if name.hasPrefix(".") { e.skipDescendants(); continue }
            guard Self.isCaptureFile(name) else { continue }
            let path = folder + "/" + relative
            var st = stat()
            guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG,
                  Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec) >= since, !known.contains(path) else { continue }
            found.append(path)
        }
        if !found.isEmpty {
            enqueue(found.sorted())
            logger.notice("uploads: \(found.count) file\(found.count == 1 ? "" : "s") in the folder that no upload had queued (written before a stop, or by another command), queued now")
        }
        return found.count
    }

    /// A capture's files (photos, sidecars, contact sheets); not a job's keogram or contact
    /// sheet (rewritten as the job goes) nor the journals.
    static func isCaptureFile(_ name: String) -> Bool {
        let lower = name.lowercased()
        guard [".dng", ".jpg", ".jpeg", ".json"].contains(where: { lower.hasSuffix($0) }) else { return false }
        return !lower.hasPrefix("keogram") && !lower.hasPrefix("contact-sheet")
    }

    /// Sends until cancelled. In-flight transfers are cut when it is; their files stay queued.
    public func run() async {
        do {
            for (key, id) in try journal.releaseAbandoned() {
                // A multipart upload a killed process began: its parts are of no use.
                try? await bucket.abortMultipart(key: key, uploadID: id)
            }
            try reconcile()
        } catch {
            logger.error("uploads: \(error)")
        }
        // A discarding group: a service that sends a million files over a year keeps no
        // finished transfer's task.
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                queueRefused()
                settleRefused()
                let paused = health.withLock { h -> Duration? in
                    guard let until = h.pausedUntil else { return nil }
                    let left = until - .now
                    if left <= .zero { h.pausedUntil = nil; return nil }
                    return left
                }
                if let paused {
                    await wake.wait(upTo: paused)
                    continue
                }
                // While the store fails, one probe at a time: a round of maxInFlight files all
                // failing counted each failure, so the backoff doubled per file, not per probe
                // (two doublings a probe by default; the store back for 102 s before anything
                // was sent again).
                let free = health.withLock { h in h.consecutiveFailures > 0 ? (h.inFlight == 0 ? 1 : 0) : settings.maxInFlight - h.inFlight }
                var rows: [UploadJournal.Row] = []
                if free > 0 {
                    do {
                        rows = try journal.claim(limit: free)
                    } catch {
                        logger.error("uploads: \(error)")
                        health.withLock { $0.pausedUntil = .now + .seconds(10) }
                        continue
                    }
                }
                for row in rows {
                    health.withLock { $0.inFlight += 1 }
                    group.addTask {
                        await self.send(row)
                        self.health.withLock { $0.inFlight -= 1 }
                        self.wake.signal()
                    }
                }
                if rows.isEmpty {
                    // Nothing due (or no room): until a file is queued, a transfer ends, or
                    // the next one is due.
                    var nap = Duration.seconds(30)
                    // Files the journal refused are offered to it again every second.
                    if unqueued.withLock({ !$0.isEmpty }) || unsettled.withLock({ !$0.isEmpty }) { nap = .seconds(1) }
                    if free > 0, let due = try? journal.nextDue() {
                        nap = min(nap, .nanoseconds(max(0, due - UploadJournal.wallNow())) + .milliseconds(5))
                    }
                    await wake.wait(upTo: nap)
                }
            }
            group.cancelAll()
        }
    }

    /// Waits until nothing is waiting and no send is still settling (a file's delete after its
    /// confirming HEAD comes after its row is marked uploaded), or `deadline` passes; true when
    /// all is done.
    public func drained(within deadline: Duration) async -> Bool {
        let end = ContinuousClock.now + deadline
        func done() -> Bool { (try? journal.counts().waiting) == 0 && health.withLock { $0.inFlight } == 0 && unqueued.withLock { $0.isEmpty } && unsettled.withLock { $0.isEmpty } }
        while ContinuousClock.now < end {
            if done() { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return done()
    }

    func backoff(_ failures: Int) -> Duration {
        let exponent = min(max(failures - 1, 0), 20)
        let raw = min(settings.retryCap, settings.retryBase * (1 << exponent))
        // Up to half of it off at random: many Pis back from one outage do not all knock at once.
        return raw * Double.random(in: 0.5...1.0)
    }

    /// One file: hashed, sent whole (or in parts), verified, and settled in the journal.
    func send(_ row: UploadJournal.Row) async {
        var st = stat()
        guard stat(row.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            let why = "the file is gone (\(String(cString: strerror(errno)))): deleted before it was uploaded"
            settle { try self.journal.failed(row.id, error: why) }
            logger.warning("uploads: \(row.path): \(why)")
            return
        }
        let size = UInt64(st.st_size)
        do {
            let (md5, etag) = try await upload(row, size: size)
            let mtime = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            // In the bucket whatever the journal says now: a journal that cannot take it (a
            // full disk) is told again until it does, never left claimed.
            guard settle({ try self.journal.uploaded(row.id, md5: md5, etag: etag, bytes: Int64(size), mtime: mtime) }) else { return }
            let recovered = health.withLock { h -> Bool in
                let was = h.consecutiveFailures > 0
                h.consecutiveFailures = 0
                h.lastLogged = nil
                return was
            }
            if recovered { logger.notice("uploads: the store answers again; sending the queue, oldest first") }
            // Not a file changed while it was sent (it is queued again, to be sent as it is now).
            if settings.deleteAfterUpload, (try? journal.state(row.id)) == .uploaded { await deleteIfConfirmed(row, etag: etag, size: Int64(size)) }
        } catch is CancellationError {
            settle { try self.journal.retry(row.id, error: "stopped while sending", next: 0) }
        } catch {
            if Task.isCancelled {
                settle { try self.journal.retry(row.id, error: "stopped while sending", next: 0) }
                return
            }
            let s3 = error as? S3Error
            let (delay, log) = health.withLock { h -> (Duration, String?) in
                h.consecutiveFailures += 1
                h.failedTries += 1
                h.lastFailure = "\(error)"
                let delay = backoff(h.consecutiveFailures)
                // The whole queue waits on what every file would meet (no network, keys
                // refused, the store failing): one probe per backoff, not a request per file.
                if s3.map({ [.unreachable, .refused, .busy].contains($0.kind) }) ?? false { h.pausedUntil = .now + delay }
                let kind = s3.map { "\($0.kind) \($0.status)" } ?? "\(error)"
                defer { h.lastLogged = kind }
                return (delay, h.lastLogged == kind ? nil : kind)
            }
            let next = UploadJournal.wallNow() + delay.nanosecondsValue
            settle { try self.journal.retry(row.id, error: "\(error)", next: next) }
            if log != nil {
                logger.warning("uploads: \(row.key): \(error); tried \(row.attempts) time\(row.attempts == 1 ? "" : "s"), next in \(String(format: "%.1f", delay.secondsValue)) s (the queue waits; the photos stay on the card)")
            }
        }
    }

    /// Sends the file; returns its MD5 (hex) and the object's ETag.
    func upload(_ row: UploadJournal.Row, size: UInt64) async throws -> (String, String) {
        let partSize = UInt64(settings.partSize)
        let parts = size > partSize ? Int((size + partSize - 1) / partSize) : 1
        // Hashed on a thread of its own at low priority (a 24 MB DNG is some 60 ms on a Pi 4).
        let digests: [[UInt8]] = try await Self.offPool {
            if parts == 1 { return [try MD5.file(row.path, length: size)] }
            return try (0..<parts).map { i in
                let offset = UInt64(i) * partSize
                return try MD5.file(row.path, offset: offset, length: min(partSize, size - offset))
            }
        }
        let expected = parts == 1 ? MD5.hex(digests[0]) : MD5.multipartETag(digests)
        let fileMD5 = parts == 1 ? expected : try await Self.offPool { MD5.hex(try MD5.file(row.path, length: size)) }
        // Tried before (a try cut by a kill, a power cut, a lost answer): the object may be there
        // whole already; it is not sent again.
        if row.attempts > 1, let head = try await bucket.head(key: row.key), head.etag.lowercased() == expected, head.bytes == Int64(size) {
            return (fileMD5, head.etag)
        }
        if parts == 1 {
            let etag = try await bucket.put(key: row.key, path: row.path, length: size, md5: digests[0])
            try verify(etag, expected: expected, key: row.key)
            return (fileMD5, etag)
        }
        // Parts a killed try sent under an upload id it never journalled: aborted first, so
        // the store keeps no half upload of this key.
        if row.attempts > 1 { try await bucket.abortOpenUploads(key: row.key) }
        let id = try await bucket.createMultipart(key: row.key)
        try? journal.setMultipart(row.id, id)
        do {
            var etags: [String] = []
            for i in 0..<parts {
                try Task.checkCancellation()
                let offset = UInt64(i) * partSize
                etags.append(try await bucket.uploadPart(key: row.key, uploadID: id, part: i + 1, path: row.path, offset: offset,
                                                         length: min(partSize, size - offset), md5: digests[i]))
            }
            let etag = try await bucket.completeMultipart(key: row.key, uploadID: id, parts: etags)
            try verify(etag, expected: expected, key: row.key)
            return (fileMD5, etag)
        } catch {
            try? await bucket.abortMultipart(key: row.key, uploadID: id)
            throw error
        }
    }

    /// The store's ETag is the MD5 we sent (for stores that make ETags another way, such as
    /// with KMS encryption, the `Content-MD5` they checked stands).
    func verify(_ etag: String, expected: String, key: String) throws {
        let e = etag.lowercased()
        let md5Like = e.split(separator: "-").first.map { $0.count == 32 && $0.allSatisfy(\.isHexDigit) } ?? false
        guard !md5Like || e == expected else {
            throw S3Error(kind: .rejected, status: 200, code: "ETagMismatch", message: "\(key): the store's ETag \(etag) is not the file's \(expected)")
        }
    }

    func deleteIfConfirmed(_ row: UploadJournal.Row, etag: String, size: Int64) async {
        do {
            guard let head = try await bucket.head(key: row.key), head.etag == etag, head.bytes == size else {
                logger.warning("uploads: \(row.key) is not in the bucket as sent; \(row.path) is kept")
                return
            }
            guard unlink(row.path) == 0 || errno == ENOENT else {
                logger.warning("uploads: cannot delete \(row.path) after its upload: \(String(cString: strerror(errno)))")
                return
            }
            try journal.deleted(row.id)
        } catch {
            logger.warning("uploads: \(row.path) is kept: its object could not be confirmed (\(error))")
        }
    }

    /// `body` on a thread of its own at nice 10: hashing never takes a core from capture.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                HTTPTransfer.lowerThreadPriority()
                continuation.resume(with: Result { try body() })
            }
        }
    }

    /// What the status, the metrics and MQTT show.
    public struct Status: Sendable, Codable, Hashable {
        public var bucket: String
        public var endpoint: String
        public var waiting: Int
        public var waitingBytes: Int64
        public var sending: Int
        public var oldestWaitingSeconds: Double?
        public var uploaded: Int
        public var uploadedBytes: Int64
        public var failed: Int
        public var deletedAfterUpload: Int
        /// Tries that failed since the service started (each retried).
        public var failedTries: Int
        public var lastError: String?
        /// While the whole queue waits for the store: until when, in seconds from now.
        public var retryingInSeconds: Double?
    }

    public func status() -> Status {
        let c = (try? journal.counts()) ?? .init()
        let h = health.withLock { $0 }
        let now = UploadJournal.wallNow()
        return Status(bucket: settings.bucket, endpoint: settings.endpoint, waiting: c.waiting, waitingBytes: c.waitingBytes, sending: c.sending,
                      oldestWaitingSeconds: c.oldestWaitingWallNs.map { Double(now - $0) / 1e9 }, uploaded: c.uploaded, uploadedBytes: c.uploadedBytes,
                      failed: c.failed, deletedAfterUpload: c.deleted, failedTries: h.failedTries, lastError: c.lastError ?? h.lastFailure,
                      retryingInSeconds: h.pausedUntil.map { max(0, ($0 - .now).secondsValue) })
    }
}

/// A wake-up that is never lost: a signal with nobody waiting is kept for the next wait.
final class WakeSignal: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Until a signal, `limit`, or the task's cancellation.
    func wait(upTo limit: Duration) async {
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(for: limit)) != nil else { return }
            self?.signal()
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.pending {
                        s.pending = false
                        return true
                    }
                    s.waiter = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            signal()
        }
    }
}
