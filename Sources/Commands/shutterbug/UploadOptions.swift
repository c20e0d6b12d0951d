import ArgumentParser
import Foundation
import JobOptions
import Logging
import ShutterbugCore
import Upload

/// Upload to S3-compatible object storage: `serve`'s `upload:` mapping in serve.yaml (`url`,
/// `bucket`, `region`, `key`, `credentials-file`, `max-in-flight`, `bandwidth`, `part-size`,
/// `delete-after`), and the same options on `timelapse` and `upload`.
struct UploadOptions: ParsableArguments {
    @Option(name: .customLong("upload-url"), help: ArgumentHelp("An S3-compatible store to send every photo to: https://s3.REGION.amazonaws.com, or a Garage, SeaweedFS, Ceph or MinIO on the site (docs/upload.md).", valueName: "url"))
    var url: String?

    @Option(name: .customLong("upload-bucket"), help: ArgumentHelp("The bucket (it must exist).", valueName: "name"))
    var bucket: String?

    @Option(name: .customLong("upload-region"), help: ArgumentHelp("The region the signature names (AWS: the bucket's; most stores on a site take any).", valueName: "region"))
    var region: String = "us-east-1"

    @Option(name: .customLong("upload-key"), help: ArgumentHelp("Each object's key: {path} (the file's path in the output folder, required), {name}, {folder}, {host}.", valueName: "template"))
    var key: String = KeyTemplate.default.pattern

    @Option(name: .customLong("upload-credentials-file"), help: ArgumentHelp("A file with the keys: 'ACCESS_KEY:SECRET_KEY', or aws_access_key_id = … and aws_secret_access_key = … lines (default AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment). Never shown or logged.", valueName: "file"))
    var credentialsFile: String?

    @Option(name: .customLong("upload-max-in-flight"), help: ArgumentHelp("Files sent at once, 1...16.", valueName: "n"))
    var maxInFlight: Int = 2

    @Option(name: .customLong("upload-bandwidth"), help: ArgumentHelp("Bytes a second for all uploads together: 2M, 512k (default no limit).", valueName: "size"))
    var bandwidth: String?

    @Option(name: .customLong("upload-part-size"), help: ArgumentHelp("Files larger than this go in parts of this size, 5M...1G.", valueName: "size"))
    var partSize: String = "16M"

    @Flag(name: [.customLong("upload-delete-after"), .customLong("delete-after-upload")],
          help: "Delete each file from the card once its object's checksum is confirmed in the bucket (a HEAD showing its ETag and size).")
    var deleteAfter = false

    func validate() throws {
        guard url != nil || (bucket == nil && credentialsFile == nil && bandwidth == nil && !deleteAfter) else {
            throw ValidationError("the upload options need --upload-url (url: in the configuration's upload:), the store to send to")
        }
        if url != nil, bucket == nil { throw ValidationError("--upload-url needs --upload-bucket, the bucket to send to") }
        _ = try settings(checkingKeys: false)
    }

    /// The settings, or nil without `--upload-url`.
    ///
    /// - Throws: `ValidationError` naming the option and what it accepts.
    func settings(checkingKeys: Bool = true) throws -> UploadSettings? {
        guard let url, let bucket else { return nil }
        do {
            var credentials = S3Credentials(accessKey: "-", secretKey: "-")
            if checkingKeys {
                if let credentialsFile {
                    credentials = try S3Credentials.load(file: credentialsFile)
                } else if let env = S3Credentials.fromEnvironment() {
                    credentials = env
                } else {
                    throw ShutterbugError(.invalidArgument, "no keys for the store: give --upload-credentials-file (credentials-file: in upload:), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
                }
            }
            return try UploadSettings(endpoint: url, bucket: bucket, region: region, credentials: credentials, keyTemplate: try KeyTemplate(key),
                                      maxInFlight: maxInFlight, bandwidth: try bandwidth.map { try UploadSettings.parseBytes($0, what: "--upload-bandwidth") },
                                      partSize: try UploadSettings.parseBytes(partSize, what: "--upload-part-size"), deleteAfterUpload: deleteAfter)
        } catch let e as ShutterbugError {
            throw ValidationError(e.message)
        }
    }
}

/// A command's uploads: an uploader on its output folder from the start, and at the end the
/// queue given a while to drain, with a line saying how it went.
struct CommandUploads {
    let uploader: Uploader
    let task: Task<Void, Never>
    let output: String

    /// nil without --upload-url (or without an output folder).
    init?(_ options: UploadOptions, output: String?) throws {
        guard let output else { return nil }
        let settings: UploadSettings
        do {
            guard let s = try options.settings() else { return nil }
            settings = s
        }
        var logger = Logger(label: "shutterbug") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .notice
        do {
            uploader = try Uploader(settings, folder: output, logger: logger)
        } catch let e as ShutterbugError {
            throw ValidationError(e.message)
        }
        let u = uploader
        task = Task { await u.run() }
        self.output = output
    }

    /// Waits up to `drain` for the queue to empty, stops, and says what is in the bucket and
    /// what is left (and how it will be sent).
    func finish(drain: Duration = .seconds(120)) async {
        let drained = await uploader.drained(within: drain)
        task.cancel()
        await task.value
        uploader.stopObserving()
        let s = uploader.status()
        notice("uploads: \(s.uploaded) file\(s.uploaded == 1 ? "" : "s") in \(s.endpoint)/\(s.bucket)" + (drained ? "" : "; \(s.waiting) still queued (\(s.lastError ?? "the store is slow")): the next run, or shutterbug upload --output \(output) with the same --upload options, sends them"))
    }

    func cancel() { task.cancel() }
}

/// `shutterbug upload`: a folder's upload queue sent now, or shown.
struct UploadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Send a folder's photos to S3-compatible object storage from its upload journal, or show the queue.",
        discussion: """
            Every capture's files under --output are queued in OUTPUT/uploads.sqlite as they are \
            written (by serve or timelapse with --upload-url); this sends what is queued (and \
            photos written since the journal began that it does not know, such as those of a \
            bracket or trigger run into the folder), oldest first, each verified by its MD5, and \
            exits when none is left. Killed at any moment and run again, it sends each file \
            once under its key. --status shows the queue without sending. docs/upload.md.
            """)

    @Option(name: .long, help: ArgumentHelp("The folder whose photos are sent.", valueName: "dir"))
    var output: String

    @OptionGroup(title: "Upload") var upload: UploadOptions

    @Flag(name: .long, help: "Show the queue (waiting, uploaded, failed, the last error) and send nothing.")
    var status = false

    @Option(name: .long, help: ArgumentHelp("Give up (exit 1, the rest stays queued) when the queue is not empty after this long: 30s, 10m, 2h.", valueName: "period"))
    var timeout: String = "1h"

    @Flag(name: .long, help: "JSON instead of text.")
    var json = false

    @Flag(name: .long, help: "Send the folder's photos written before its upload journal began too (by default a new journal takes those written from then on).")
    var includeExisting = false

    func validate() throws {
        if !status, upload.url == nil { throw ValidationError("give --upload-url and --upload-bucket (the store to send to), or --status to show the queue") }
        _ = try NumericInput.period(timeout, "--timeout", in: 1...604_800)
    }

    func run() async throws {
        do {
            try await send()
        } catch let e as ShutterbugError where e.code == .invalidArgument {
            throw ValidationError(e.message)
        }
    }

    func send() async throws {
        if status {
            let journal = try UploadJournal(folder: output)
            let c = try journal.counts()
            print(try render(c, settings: nil, status: nil))
            return
        }
        guard let settings = try upload.settings() else { return }
        var logger = Logger(label: "shutterbug-upload") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .notice
        let uploader = try Uploader(settings, folder: output, logger: logger)
        if includeExisting { try uploader.journal.setSince(0) }
        let run = Task { await uploader.run() }
        let limit = try NumericInput.period(timeout, "--timeout", in: 1...604_800)
        // The queue is looked at only once the run has released abandoned claims and reconciled.
        try? await Task.sleep(for: .milliseconds(200))
        let drained = await uploader.drained(within: limit)
        run.cancel()
        await run.value
        uploader.stopObserving()
        let s = uploader.status()
        print(try render(try uploader.journal.counts(), settings: settings, status: s))
        if !drained { throw ExitCode(1) }
    }

    func render(_ c: UploadJournal.Counts, settings: UploadSettings?, status: Uploader.Status?) throws -> String {
        if json {
            var o: [String: Any] = ["waiting": c.waiting, "waitingBytes": c.waitingBytes, "uploaded": c.uploaded, "uploadedBytes": c.uploadedBytes,
                                    "failed": c.failed, "deletedAfterUpload": c.deleted]
            if let e = c.lastError ?? status?.lastError { o["lastError"] = e }
            if let t = c.oldestWaitingWallNs { o["oldestWaitingSeconds"] = Double(UploadJournal.wallNow() - t) / 1e9 }
            if let settings { o["bucket"] = settings.bucket; o["endpoint"] = settings.endpoint }
            return String(decoding: try JSONSerialization.data(withJSONObject: o, options: [.sortedKeys]), as: UTF8.self)
        }
        var lines = ["\(output)/\(UploadJournal.fileName)\(settings.map { " → \($0.endpoint)/\($0.bucket)" } ?? ""):",
                     "  uploaded \(c.uploaded) file\(c.uploaded == 1 ? "" : "s") (\(TimelapseCommand.bytes(c.uploadedBytes)))\(c.deleted > 0 ? ", \(c.deleted) deleted from the card" : "")",
                     "  waiting \(c.waiting) (\(TimelapseCommand.bytes(c.waitingBytes)))" + (c.oldestWaitingWallNs.map { ", the oldest for \(TimelapseCommand.span(.nanoseconds(UploadJournal.wallNow() - $0)))" } ?? "")]
        if c.failed > 0 { lines.append("  failed for good \(c.failed) (the file was gone before its upload)") }
        if c.waiting > 0, let e = c.lastError ?? status?.lastError { lines.append("  last error: \(e)") }
        return lines.joined(separator: "\n")
    }
}
