import Foundation
import HTTPTransfer
import ImageOutput
import Logging
import ShutterbugCore
import TestSupport
import Testing
@testable import Upload

@Suite("Upload settings: endpoint, bucket, key template, sizes and keys, each refused with what is accepted")
struct UploadSettingsTests {
    let keys = S3Credentials(accessKey: "AK", secretKey: "SK")

    @Test("bad settings are refused naming the problem and the range; good ones are normalised")
    func validation() throws {
        func refused(_ make: () throws -> UploadSettings, _ words: String) {
            do {
                _ = try make()
                Issue.record("accepted: \(words)")
            } catch {
                #expect("\(error)".contains(words), "\(error)")
            }
        }
        refused({ try UploadSettings(endpoint: "ftp://x", bucket: "photos", credentials: keys) }, "not an http:// or https:// URL")
        refused({ try UploadSettings(endpoint: "https://s3.example.com/photos", bucket: "photos", credentials: keys) }, "no path or query")
        refused({ try UploadSettings(endpoint: "https://AK:SK@s3.example.com", bucket: "photos", credentials: keys) }, "must not carry keys")
        refused({ try UploadSettings(endpoint: "https://s3.example.com", bucket: "Photos_2026", credentials: keys) }, "3 to 63 of a-z")
        refused({ try UploadSettings(endpoint: "https://s3.example.com", bucket: "ab", credentials: keys) }, "3 to 63")
        refused({ try UploadSettings(endpoint: "https://s3.example.com", bucket: "photos", credentials: keys, maxInFlight: 0) }, "within 1...16")
        refused({ try UploadSettings(endpoint: "https://s3.example.com", bucket: "photos", credentials: keys, bandwidth: 100) }, "16 KiB/s or more")
        refused({ try UploadSettings(endpoint: "https://s3.example.com", bucket: "photos", credentials: keys, partSize: 1 << 20) }, "within 5M...1G")
        let s = try UploadSettings(endpoint: "https://s3.example.com:9000/", bucket: "photos.2026", credentials: keys)
        #expect(s.endpoint == "https://s3.example.com:9000")
        #expect(try UploadSettings.parseBytes("2M", what: "x") == 2 << 20)
        #expect(try UploadSettings.parseBytes("512k", what: "x") == 512 << 10)
        #expect(try UploadSettings.parseBytes("1.5G", what: "x") == 3 << 29)
        #expect(throws: ShutterbugError.self) { try UploadSettings.parseBytes("fast", what: "--upload-bandwidth") }
    }

    @Test("the key template: {path} required, unknown tokens named, keys made from the file's path in the folder")
    func keyTemplate() throws {
        #expect(throws: ShutterbugError.self) { try KeyTemplate("{host}/{name}") }
        do {
            _ = try KeyTemplate("{host}/{day}/{path}")
            Issue.record("accepted {day}")
        } catch {
            #expect("\(error)".contains("unknown token {day}"), "\(error)")
        }
        #expect(throws: ShutterbugError.self) { try KeyTemplate("../{path}") }
        let t = try KeyTemplate("roof/{host}/{folder}/{path}")
        #expect(t.render(relative: "2026-11-26/120000_0001_1.dng", folder: "/srv/photos", host: "pi4") == "roof/pi4/photos/2026-11-26/120000_0001_1.dng")
        // S3's canonical path: unreserved bytes and '/' as they are, the rest percent-encoded.
        #expect(S3Bucket.encode("a b/ü+.dng", keepSlash: true) == "a%20b/%C3%BC%2B.dng")
    }

    @Test("credentials from a file (one line, or the AWS CLI's names) and the environment; never shown")
    func credentials() throws {
        let a = try S3Credentials.parse("AKIA123:abc/def+ghi\n", source: "f")
        #expect(a == S3Credentials(accessKey: "AKIA123", secretKey: "abc/def+ghi"))
        let b = try S3Credentials.parse("[default]\naws_access_key_id = AKIA9\naws_secret_access_key = s3cr3t\n", source: "f")
        #expect(b == S3Credentials(accessKey: "AKIA9", secretKey: "s3cr3t"))
        #expect(!"\(b)".contains("s3cr3t"))
        #expect(throws: ShutterbugError.self) { try S3Credentials.parse("# nothing\n", source: "f") }
        #expect(S3Credentials.fromEnvironment(["AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "S"]) == S3Credentials(accessKey: "A", secretKey: "S"))
        #expect(S3Credentials.fromEnvironment(["AWS_ACCESS_KEY_ID": "A"]) == nil)
    }

    @Test("MD5 of a file, of a part of it, and a multipart ETag, against md5sum")
    func md5() async throws {
        let path = NSTemporaryDirectory() + "sb-md5-\(UUID().uuidString)"
        let bytes = (0..<3_000_001).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 7) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let r = try await runChild("/usr/bin/md5sum", [path])
        #expect(MD5.hex(try MD5.file(path, length: UInt64(bytes.count))) == String(r.out.prefix(32)))
        #expect(try MD5.file(path, offset: 1000, length: 5000) == MD5.bytes(Array(bytes[1000..<6000])))
        #expect(throws: ShutterbugError.self) { try MD5.file(path, offset: 2_999_000, length: 5000) }
        #expect(MD5.multipartETag([MD5.bytes([1]), MD5.bytes([2])]) == MD5.hex(MD5.bytes(MD5.bytes([1]) + MD5.bytes([2]))) + "-2")
    }
}

/// The uploader against a real S3-compatible store (SeaweedFS), files handed to it as a
/// capture's writer hands them.
@Suite("Uploads to SeaweedFS: every file once, verified, through a store restart and refused keys", .serialized, .timeLimit(.minutes(8)))
struct UploaderTests {
    static func logger() -> Logger {
        var l = Logger(label: "upload-test")
        l.logLevel = .notice
        return l
    }

    /// A store with the bucket made (the gateway takes a few seconds to accept one).
    static func store() async throws -> (ObjectStore, S3Bucket) {
        let store = try ObjectStore()
        try await store.start()
        let bucket = S3Bucket(endpoint: store.endpoint, bucket: "photos", region: "us-east-1",
                              credentials: S3Credentials(accessKey: store.accessKey, secretKey: store.secretKey))
        try await withDeadline(.seconds(60), "the store to create the bucket") {
            while true {
                do {
                    try await bucket.createBucket()
                    return
                } catch {
                    try await Task.sleep(for: .milliseconds(200))
                }
            }
        }
        return (store, bucket)
    }

    /// The uploader stopped: its run cancelled and waited for, no more files queued by it.
    static func finish(_ run: Task<Void, Never>, _ uploader: Uploader) async {
        run.cancel()
        await run.value
        uploader.stopObserving()
    }

    /// `count` files of random sizes in dated folders, written as the photo writer does and
    /// handed to the observers as a capture's files are; returns their paths.
    static func write(_ count: Int, into folder: String, sizes: ClosedRange<Int> = 1_000...40_000, from start: Int = 0) throws -> [String] {
        let directory = try OutputDirectory(path: folder, reserve: 0)
        var paths: [String] = []
        for i in start..<(start + count) {
            let size = Int.random(in: sizes)
            var bytes = [UInt8](repeating: 0, count: size)
            for j in stride(from: 0, to: size, by: 8) { bytes[j] = UInt8.random(in: 0...255) }
            let (path, _) = try directory.write("2026-11-\(10 + i % 5)/\(String(format: "%05d", i))_1.jpg") { try OutputDirectory.writeAll($0, bytes) }
            paths.append(path)
        }
        CaptureObservers.captured(paths)
        return paths
    }

    /// The bucket and the journal agree: every file uploaded once under its key, the object's
    /// ETag the file's MD5 (or the parts'), nothing else in the bucket.
    static func agree(_ uploader: Uploader, _ bucket: S3Bucket, files: [String], partSize: Int) async throws {
        let listed = try await bucket.list()
        let entries = try uploader.journal.entries()
        #expect(entries.count == files.count)
        #expect(Set(entries.map(\.path)) == Set(files.map(CaptureObservers.absolute)))
        #expect(listed.count == files.count, "the bucket holds \(listed.count) objects for \(files.count) files")
        #expect(Set(listed.map(\.key)).count == listed.count)
        let byKey = Dictionary(uniqueKeysWithValues: listed.map { ($0.key, $0) })
        for e in entries {
            #expect(e.state == .uploaded, "\(e.path): \(e.state) \(e.error ?? "")")
            guard let object = byKey[e.key] else {
                Issue.record("\(e.key) is not in the bucket")
                continue
            }
            let size = UInt64(e.bytes)
            let parts = size > UInt64(partSize) ? Int((size + UInt64(partSize) - 1) / UInt64(partSize)) : 1
            let expected = parts == 1 ? MD5.hex(try MD5.file(e.path, length: size))
                : MD5.multipartETag(try (0..<parts).map { try MD5.file(e.path, offset: UInt64($0 * partSize), length: min(UInt64(partSize), size - UInt64($0 * partSize))) })
            #expect(object.etag == expected, "\(e.key): the object's ETag \(object.etag), the file's \(expected)")
            #expect(object.bytes == e.bytes)
            #expect(e.etag == object.etag)
        }
    }

    @Test("1,000 files and two of 12 MB in parts: each object once under its key, its ETag the file's MD5, the journal and the bucket agreeing")
    func thousand() async throws {
        let (store, bucket) = try await Self.store()
        let folder = store.dir + "/photos"
        let settings = try UploadSettings(endpoint: store.endpoint, bucket: "photos", credentials: bucket.credentials,
                                          keyTemplate: try KeyTemplate("cam/{path}"), maxInFlight: 4, partSize: 5 << 20)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let uploader = try Uploader(settings, folder: folder, logger: Self.logger())
        let run = Task { await uploader.run() }
        var files = try Self.write(1000, into: folder)
        files += try Self.write(2, into: folder, sizes: 12_000_000...12_500_000, from: 5000)
        let drained = await uploader.drained(within: .seconds(300))
        #expect(drained, "still waiting: \(uploader.status())")
        let status = uploader.status()
        #expect(status.uploaded == 1002 && status.waiting == 0 && status.failed == 0, "\(status)")
        await Self.finish(run, uploader)
        try await Self.agree(uploader, bucket, files: files, partSize: 5 << 20)
        try await store.stop()
    }

    @Test("keys the store refuses: the files stay queued, the reason in the status, one try per backoff (no busy loop); the right keys later send each once")
    func refusedKeys() async throws {
        let (store, bucket) = try await Self.store()
        let folder = store.dir + "/photos"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let wrong = try UploadSettings(endpoint: store.endpoint, bucket: "photos", credentials: S3Credentials(accessKey: store.accessKey, secretKey: "wrong"),
                                       maxInFlight: 4, retryBase: .milliseconds(400), retryCap: .seconds(2))
        let refused = try Uploader(wrong, folder: folder, logger: Self.logger())
        let run = Task { await refused.run() }
        let files = try Self.write(40, into: folder)
        try await withDeadline(.seconds(30), "the refusal in the status") {
            while refused.status().lastError == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        try await Task.sleep(for: .seconds(4))
        let status = refused.status()
        #expect(status.waiting == 40 && status.uploaded == 0, "\(status)")
        // The PUT's reason (SignatureDoesNotMatch), or a HEAD's, which has no body to say it.
        #expect(status.lastError?.contains("403") == true && (status.lastError?.contains("SignatureDoesNotMatch") == true || status.lastError?.contains("the keys") == true), "\(status)")
        // Four at once at first, then one probe at a time, one per backoff (1–2 s here, the
        // four first failures having doubled it to its cap): at most four more in some 4 s.
        // (Rounds of four probes, each failure doubling the wait, made 12 to 16.)
        #expect(status.failedTries <= 8, "\(status.failedTries) tries in some 4 s")
        await Self.finish(run, refused)
        #expect(try await bucket.list().isEmpty)

        // The keys put right (a new start of the service): the queue drains, each file once.
        let right = try UploadSettings(endpoint: store.endpoint, bucket: "photos", credentials: bucket.credentials, maxInFlight: 4)
        let uploader = try Uploader(right, folder: folder, logger: Self.logger())
        let again = Task { await uploader.run() }
        #expect(await uploader.drained(within: .seconds(120)), "\(uploader.status())")
        await Self.finish(again, uploader)
        try await Self.agree(uploader, bucket, files: files, partSize: UploadSettings.defaultPartSize)
        try await store.stop()
    }

    @Test("the store killed during uploads and started again a while later: capture goes on queueing, the queue drains oldest first once it is back, each file once")
    func storeRestarted() async throws {
        let (store, bucket) = try await Self.store()
        let folder = store.dir + "/photos"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let settings = try UploadSettings(endpoint: store.endpoint, bucket: "photos", credentials: bucket.credentials, maxInFlight: 2,
                                          retryBase: .milliseconds(300), retryCap: .seconds(2))
        let uploader = try Uploader(settings, folder: folder, logger: Self.logger())
        let run = Task { await uploader.run() }
        var files = try Self.write(200, into: folder, sizes: 50_000...200_000)
        try await withDeadline(.seconds(60), "some uploads before the store is killed") {
            while uploader.status().uploaded < 20 { try await Task.sleep(for: .milliseconds(20)) }
        }
        try await store.stop()
        // Photos keep coming while the store is away.
        files += try Self.write(100, into: folder, from: 1000)
        try await withDeadline(.seconds(30), "the uploader to see the store gone") {
            while uploader.status().retryingInSeconds == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let away = uploader.status()
        #expect(away.lastError?.contains("cannot be reached") == true, "\(away)")
        try await store.start()
        #expect(await uploader.drained(within: .seconds(180)), "\(uploader.status())")
        await Self.finish(run, uploader)
        try await Self.agree(uploader, bucket, files: files, partSize: UploadSettings.defaultPartSize)
        try await store.stop()
    }

    @Test("--upload-delete-after: each file leaves the card only once its object is confirmed; a file rewritten after its upload is sent again under the same key; one gone before its upload fails for good, with why")
    func deleteAfterAndChanges() async throws {
        let (store, bucket) = try await Self.store()
        let folder = store.dir + "/photos"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let keep = folder + "/keep"
        try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder + "/del", withIntermediateDirectories: true)
        // One folder's files deleted after upload, another's kept (two uploaders, two journals).
        let deleting = try Uploader(try UploadSettings(endpoint: store.endpoint, bucket: "photos", credentials: bucket.credentials,
                                                       keyTemplate: try KeyTemplate("del/{path}"), deleteAfterUpload: true),
                                    folder: folder + "/del", logger: Self.logger())
        let keeping = try Uploader(try UploadSettings(endpoint: store.endpoint, bucket: "photos", credentials: bucket.credentials, keyTemplate: try KeyTemplate("keep/{path}")),
                                   folder: keep, logger: Self.logger())
        let runs = [Task { await deleting.run() }, Task { await keeping.run() }]
        let deleted = try Self.write(20, into: folder + "/del")
        let kept = try Self.write(5, into: keep)
        let drainedDeleting = await deleting.drained(within: .seconds(60))
        let drainedKeeping = await keeping.drained(within: .seconds(60))
        #expect(drainedDeleting && drainedKeeping, "\(deleting.status()) \(keeping.status())")
        #expect(deleting.status().deletedAfterUpload == 20, "\(deleting.status())")
        for f in deleted { #expect(!FileManager.default.fileExists(atPath: f), "\(f) is still on the card") }
        #expect(try await bucket.list(prefix: "del/").count == 20)

        // A kept file rewritten whole (a sidecar's final version) and queued again: sent again,
        // the object now the new content, still one object under its key.
        let changed = kept[0]
        try await Task.sleep(for: .milliseconds(20))
        try Data(repeating: 7, count: 12_345).write(to: URL(fileURLWithPath: changed))
        CaptureObservers.captured([changed])
        try await withDeadline(.seconds(60), "the rewritten file sent again") {
            while true {
                let listed = try await bucket.list(prefix: "keep/")
                if listed.contains(where: { $0.bytes == 12_345 }) { return }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(await keeping.drained(within: .seconds(30)))
        let listed = try await bucket.list(prefix: "keep/")
        #expect(listed.count == 5)
        #expect(listed.first { $0.bytes == 12_345 }?.etag == MD5.hex(MD5.bytes([UInt8](repeating: 7, count: 12_345))))

        // A file deleted before its upload (retention, a person): failed for good, never retried.
        runs[1].cancel()
        await runs[1].value
        let gone = try Self.write(1, into: keep, from: 900)[0]
        #expect(keeping.status().waiting == 1)
        unlink(gone)
        let again = Task { await keeping.run() }
        try await withDeadline(.seconds(30), "the missing file to be marked failed") {
            while keeping.status().failed != 1 { try await Task.sleep(for: .milliseconds(50)) }
        }
        let entry = try #require(try keeping.journal.entries().first { $0.path == CaptureObservers.absolute(gone) })
        #expect(entry.state == .failed && entry.error?.contains("gone") == true, "\(entry)")
        for r in [runs[0], again] { r.cancel(); await r.value }
        deleting.stopObserving()
        keeping.stopObserving()
        try await store.stop()
    }

    @Test("a full store (one volume of 1 MB) answers 500 InternalError: the files stay queued and on the card, the status names it, one probe per backoff; keys that may not reach a missing bucket are refused, named")
    func fullStoreAndMissingBucket() async throws {
        let writer = #"{"name": "writer", "credentials": [{"accessKey": "WRITER", "secretKey": "writer-secret"}], "actions": ["Read", "Write", "List"]}"#
        let store = try ObjectStore(identities: [writer], volumeSizeLimitMB: 1, volumes: 1)
        try await store.start()
        let admin = S3Bucket(endpoint: store.endpoint, bucket: "photos", region: "us-east-1", credentials: S3Credentials(accessKey: store.accessKey, secretKey: store.secretKey))
        try await withDeadline(.seconds(60), "the store to create the bucket") {
            while (try? await admin.createBucket()) == nil { try await Task.sleep(for: .milliseconds(200)) }
        }
        let folder = store.dir + "/photos"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let settings = try UploadSettings(endpoint: store.endpoint, bucket: "photos", credentials: admin.credentials, maxInFlight: 2,
                                          retryBase: .milliseconds(400), retryCap: .seconds(2))
        let uploader = try Uploader(settings, folder: folder, logger: Self.logger())
        let run = Task { await uploader.run() }
        let files = try Self.write(30, into: folder, sizes: 200_000...300_000)
        try await withDeadline(.seconds(60), "the store to fill and answer 500") {
            while !(uploader.status().lastError?.contains("500") ?? false) { try await Task.sleep(for: .milliseconds(50)) }
        }
        let tries = uploader.status().failedTries
        try await Task.sleep(for: .seconds(4))
        let full = uploader.status()
        #expect(full.lastError?.contains("InternalError") == true, "\(full)")
        #expect(full.uploaded > 0 && full.uploaded < 30 && full.waiting == 30 - full.uploaded && full.failed == 0, "\(full)")
        // The queue waits on a failing store: some 0.2–2 s between probes, not a request per file.
        #expect(full.failedTries - tries <= 12, "\(full.failedTries - tries) tries in 4 s")
        for f in files { #expect(FileManager.default.fileExists(atPath: f)) }
        await Self.finish(run, uploader)

        // A bucket that does not exist, for keys that may not create one: refused, named.
        let other = store.dir + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let missing = try Uploader(try UploadSettings(endpoint: store.endpoint, bucket: "no-such-bucket", credentials: S3Credentials(accessKey: "WRITER", secretKey: "writer-secret"),
                                                      retryBase: .milliseconds(400), retryCap: .seconds(2)),
                                   folder: other, logger: Self.logger())
        let run2 = Task { await missing.run() }
        _ = try Self.write(3, into: other)
        try await withDeadline(.seconds(30), "the refusal") {
            while missing.status().lastError == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let refused = missing.status()
        #expect(refused.lastError?.contains("403") == true && refused.waiting == 3 && refused.uploaded == 0, "\(refused)")
        await Self.finish(run2, missing)
        try await store.stop()
    }

    @Test("the bandwidth limit holds for all transfers together: 12 MB at 4 MiB/s over two transfers takes 2.8 s or more, and is all there")
    func bandwidth() async throws {
        let (store, bucket) = try await Self.store()
        let folder = store.dir + "/photos"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let settings = try UploadSettings(endpoint: store.endpoint, bucket: "photos", credentials: bucket.credentials, maxInFlight: 2, bandwidth: 4 << 20)
        let uploader = try Uploader(settings, folder: folder, logger: Self.logger())
        let files = try Self.write(3, into: folder, sizes: 4_000_000...4_000_000)
        let began = ContinuousClock.now
        let run = Task { await uploader.run() }
        #expect(await uploader.drained(within: .seconds(120)), "\(uploader.status())")
        let took = ContinuousClock.now - began
        await Self.finish(run, uploader)
        // 12,000,000 bytes at 4,194,304 a second: 2.86 s; never faster (a loaded machine is slower).
        #expect(took >= .milliseconds(2_800), "12 MB sent in \(took)")
        try await Self.agree(uploader, bucket, files: files, partSize: UploadSettings.defaultPartSize)
        try await store.stop()
    }
}
