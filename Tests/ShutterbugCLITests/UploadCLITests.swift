import Foundation
import ImageOutput
import TestSupport
import Testing
@testable import Upload

#if canImport(Glibc)
import Glibc
#endif

/// `shutterbug timelapse --upload-…` and `shutterbug upload` against SeaweedFS: the uploader
/// killed with SIGKILL at random moments and the store killed and started again under it, and
/// afterwards every file in the bucket once, its ETag the file's MD5, the journal agreeing.
@Suite("upload: a timelapse's photos to object storage, exactly once through kill -9 and a store restart", .serialized, .timeLimit(.minutes(10)))
struct UploadCLITests {
    static var exe: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("shutterbug").path
    }

    /// A SeaweedFS of the test's own with the bucket "photos" made (the gateway takes a few
    /// seconds to accept one).
    static func storeWithBucket() async throws -> (ObjectStore, S3Bucket) {
        let store = try ObjectStore()
        try await store.start()
        let bucket = S3Bucket(endpoint: store.endpoint, bucket: "photos", region: "us-east-1", credentials: S3Credentials(accessKey: store.accessKey, secretKey: store.secretKey))
        try await withDeadline(.seconds(60), "the store to create the bucket") {
            while (try? await bucket.createBucket()) == nil { try await Task.sleep(for: .milliseconds(200)) }
        }
        return (store, bucket)
    }

    /// Starts `shutterbug upload …` (its output to files of the test's).
    static func start(_ args: [String], log: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = ["upload"] + args
        var env = ProcessInfo.processInfo.environment
        env["AWS_ACCESS_KEY_ID"] = nil
        env["AWS_SECRET_ACCESS_KEY"] = nil
        p.environment = env
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let out = FileHandle(forWritingAtPath: log)!
        out.seekToEndOfFile()
        (p.standardOutput, p.standardError) = (out, out)
        try p.run()
        return p
    }

    @Test("a virtual-time timelapse uploads as it goes; another folder's photos sent by `shutterbug upload --include-existing` killed -9 at 20 random moments (the store killed and restarted twice meanwhile) leaves each file once in the bucket, verified, the journal and the bucket agreeing, no multipart upload left open")
    func killed() async throws {
        let (store, bucket) = try await Self.storeWithBucket()
        let keyFile = store.dir + "/keys"
        try "\(store.accessKey):\(store.secretKey)\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let upload = ["--upload-url", store.endpoint, "--upload-bucket", "photos", "--upload-credentials-file", keyFile]
        let timelapse = ["timelapse", "--camera", "sim:imx477", "--virtual-time", "--interval", "10s", "--count", "12", "--size", "1332x990", "--format", "dng,jpeg"]

        // A timelapse sends its slots as it goes: 12 slots of a DNG, a JPEG and a sidecar.
        let t = try await CLITests.shutterbug(timelapse + ["--output", store.dir + "/roof"] + upload + ["--upload-key", "roof/{path}"])
        #expect(t.status == 0, "\(t.stderr)")
        #expect(t.stderr.contains("uploads: 36 files in \(store.endpoint)/photos"), "\(t.stderr)")
        #expect(!t.stderr.contains(store.secretKey) && !t.stdout.contains(store.secretKey))
        #expect(try await bucket.list(prefix: "roof/").count == 36)

        // Another folder, written without uploads, and three files of 12 MB beside (sent in
        // parts of 5 MiB): `shutterbug upload --include-existing` sends them all.
        let out = store.dir + "/out"
        let made = try await CLITests.shutterbug(timelapse + ["--output", out])
        #expect(made.status == 0, "\(made.stderr)")
        for i in 0..<3 {
            var bytes = [UInt8](repeating: 0, count: 12_000_000 + i * 777)
            for j in stride(from: 0, to: bytes.count, by: 4096) { bytes[j] = UInt8.random(in: 0...255) }
            try Data(bytes).write(to: URL(fileURLWithPath: out + "/extra-\(i)_1.dng"))
        }
        let upload2 = upload + ["--upload-key", "out/{path}", "--include-existing"]

        // 20 runs killed at random moments, slowed to 6 MB/s so the kills land in transfers;
        // the store killed before the 7th and 14th and started again before the next.
        let slow = upload2 + ["--upload-bandwidth", "6M", "--upload-max-in-flight", "3", "--upload-part-size", "5M", "--timeout", "10m"]
        var kills = 0
        for k in 0..<20 {
            if k == 7 || k == 14 { try await store.stop() }
            let p = try Self.start(["--output", out] + slow, log: store.dir + "/upload-\(k).log")
            try await Task.sleep(for: .milliseconds(Int.random(in: 300...1500)))
            if p.isRunning {
                kill(p.processIdentifier, SIGKILL)
                kills += 1
            }
            try await offPool { p.waitUntilExit() }
            if k == 7 || k == 14 { try await store.start() }
        }
        #expect(kills >= 15, "only \(kills) of 20 runs were still sending when killed")
        // The last run to the end.
        let last = try await CLITests.shutterbug(["upload", "--output", out, "--json"] + upload2 + ["--upload-part-size", "5M"])
        #expect(last.status == 0, "\(last.stdout) \(last.stderr)")
        let summary = try JSONSerialization.jsonObject(with: Data(last.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(summary["waiting"] as? Int == 0 && summary["failed"] as? Int == 0, "\(summary)")

        // Every file once in the bucket, its ETag the file's MD5 (or its parts'), nothing else.
        let listed = try await bucket.list(prefix: "out/")
        let entries = try UploadJournal(folder: out).entries()
        // 12 slots' DNG, JPEG and sidecar, and the three large files.
        #expect(entries.count == 39, "\(entries.count) journalled")
        #expect(listed.count == entries.count, "the bucket holds \(listed.count) objects for \(entries.count) files")
        let byKey = Dictionary(listed.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        for e in entries {
            #expect(e.state == .uploaded, "\(e.path): \(e.state) \(e.error ?? "")")
            let size = UInt64(e.bytes), part = UInt64(5 << 20)
            let parts = size > part ? Int((size + part - 1) / part) : 1
            let expected = parts == 1 ? MD5.hex(try MD5.file(e.path, length: size))
                : MD5.multipartETag(try (0..<parts).map { try MD5.file(e.path, offset: UInt64($0) * part, length: min(part, size - UInt64($0) * part)) })
            #expect(byKey[e.key]?.etag == expected, "\(e.key): the object's ETag \(byKey[e.key]?.etag ?? "none"), the file's \(expected)")
        }
        // No multipart upload a killed run began is left open in the store.
        let open = try await HTTPTransferHelper.openMultipartUploads(bucket)
        #expect(open == 0, "\(open) multipart uploads left open")
        try await store.stop()
    }
}

extension UploadCLITests {
    @Test("serve --upload-url: the API's captures are in the bucket under the key template, the queue in /api/status and /metrics, the keys shown nowhere")
    func serve() async throws {
        let (store, bucket) = try await Self.storeWithBucket()
        let api = ServeCLITests()
        let s = try await ServeCLITests.Server.start(["--upload-url", store.endpoint, "--upload-bucket", "photos", "--upload-key", "{host}/{folder}/{path}"],
                                                     environment: ["AWS_ACCESS_KEY_ID": store.accessKey, "AWS_SECRET_ACCESS_KEY": store.secretKey])
        defer { s.discard() }
        let bracket = try await api.call(s.base + "api/capture", method: "POST", body: #"{"ev": [-1, 0, 1], "formats": ["jpeg", "dng"]}"#)
        #expect(bracket.status == 201, "\(bracket.text)")
        let files = try #require(bracket.json?["files"] as? [String])
        #expect(files.count == 7, "\(files)")
        try await withDeadline(.seconds(90), "the bracket's \(files.count) files uploaded") {
            while true {
                let u = try await api.call(s.base + "api/status").json?["uploads"] as? [String: Any]
                if u?["uploaded"] as? Int == files.count, u?["waiting"] as? Int == 0 { return }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        let status = try #require(try await api.call(s.base + "api/status").json?["uploads"] as? [String: Any])
        #expect(status["bucket"] as? String == "photos" && status["failed"] as? Int == 0, "\(status)")
        let host = KeyTemplate.hostName, folder = URL(fileURLWithPath: s.dir).lastPathComponent
        let listed = Set(try await bucket.list().map(\.key))
        #expect(listed == Set(files.map { "\(host)/\(folder)/\($0)" }), "\(listed.sorted())")
        let metrics = try await api.call(s.base + "metrics").text
        #expect(metrics.contains("shutterbug_uploads_uploaded_files \(files.count)"), "\(metrics.split(separator: "\n").filter { $0.contains("upload") })")
        #expect(metrics.contains("shutterbug_uploads_waiting_files 0"))
        for path in ["api/config", "api/status", "metrics"] {
            #expect(!(try await api.call(s.base + path).text.contains(store.secretKey)), "\(path) shows the secret key")
        }
        #expect(try await s.stop() == 0)
        try await store.stop()
    }
}

/// A request the uploader has no use for (a test's check), signed the same way.
enum HTTPTransferHelper {
    static func openMultipartUploads(_ bucket: S3Bucket) async throws -> Int {
        let r = try await bucket.perform(bucket.request("GET", nil, query: [("uploads", "")]), doing: "listing multipart uploads")
        return S3XML.all("UploadId", in: String(decoding: r.body, as: UTF8.self)).count
    }
}
