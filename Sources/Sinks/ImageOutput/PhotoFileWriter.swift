import Capture
import CaptureScheduler
import ShutterbugCore
import Synchronization

/// A file a capture produced.
public struct WrittenFile: Sendable, Hashable {
    /// Bracket step from 1, or `nil` for the capture's sidecar and contact sheet.
    public var step: Int?
    /// "dng", "jpeg", "json" (the sidecar) or "contact-sheet".
    public var format: String
    public var path: String
    public var bytes: Int64
    /// The image's size in pixels (nil for the sidecar and contact sheet).
    public var width: Int? = nil
    public var height: Int? = nil
    /// The file's CRC-32 as written, read back before anyone else heard of the file (only when
    /// the capture asked for checksums: a timelapse journals them).
    public var crc32: UInt32? = nil
}

/// What the writer did with one capture.
public struct OutputSummary: Sendable {
    public var captureID: Int64
    /// The capture's number in this directory (`{capture}` in file names).
    public var captureNumber: Int
    public var files: [WrittenFile]
    public var failures: [(step: Int?, format: String, error: ShutterbugError)]
}

/// The phases of a capture written to disk: the capture's own phases, then each file as it
/// lands. Files of different steps may land in any order; `filesFinished` comes last.
public enum OutputEvent: Sendable {
    case settingsResolved(ResolvedPhotoSettings)
    /// The capture waited this long for the processing pool to have room (back-pressure).
    case backPressure(waited: Duration)
    case exposureStarted(SensorTime)
    case exposureEnded(SensorTime)
    /// A step's frame is captured and copied; its camera buffer is already back in use.
    case photoCaptured(ResolvedStep, FrameMetadata)
    /// With `metersLuma`: the step's processed frame's mean luma (0...255, every 4th pixel of
    /// every 4th row), for software exposure control, and its middle column for a keogram.
    case photoMetered(ResolvedStep, meanLuma: Double, keogramColumn: [UInt8], thumbnail: Thumbnailer)
    case captureFinished(ResolvedPhotoSettings)
    /// A file is on disk under its final name, synced.
    case fileWritten(WrittenFile)
    /// A file could not be written; nothing is left under its name. Other files are unaffected.
    case writeFailed(step: Int?, format: String, error: ShutterbugError)
    case filesFinished(OutputSummary)
    /// Something the user should know that did not stop the capture (a broken capture
    /// counter, and how numbering went on without it).
    case notice(String)
}

extension OutputEvent {
    /// A capture's events as output events, with its files written by `writer`, or none: with
    /// no writer each photo's buffers go back to the camera as it comes (`.photoCaptured` carries
    /// its metadata) and there is no file event. One loop serves a command with `--output` and
    /// one without. Without a writer the events are mapped as the caller reads them, in the
    /// caller's task: no task in between, so they come exactly when the session's own would
    /// (a virtual-time trigger job's feeder depends on when a capture's frames are seen).
    ///
    /// - Parameter queued: called once the session has the capture in its queue (with a writer,
    ///   after the writer has reserved its memory and number): from then on every frame the
    ///   camera makes is judged for it. Not called when the capture fails before.
    public static func capture(_ settings: PhotoSettings, on session: CaptureSession, writer: PhotoFileWriter?,
                               queued: (@Sendable () -> Void)? = nil) async -> OutputEvents {
        if let writer { return OutputEvents(.written(writer.capture(settings, on: session, queued: queued))) }
        let events = await session.capture(settings)
        queued?()
        return OutputEvents(.captured(events))
    }
}

/// The output events of one capture: a writer's, or a capture's own mapped as they are read.
public struct OutputEvents: AsyncSequence, Sendable {
    public typealias Element = OutputEvent
    public typealias Failure = any Error

    enum Source: Sendable {
        case written(AsyncThrowingStream<OutputEvent, any Error>)
        case captured(AsyncThrowingStream<CaptureEvent, any Error>)
    }

    let source: Source
    init(_ source: Source) { self.source = source }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var written: AsyncThrowingStream<OutputEvent, any Error>.AsyncIterator?
        var captured: AsyncThrowingStream<CaptureEvent, any Error>.AsyncIterator?

        public mutating func next() async throws -> OutputEvent? {
            if written != nil { return try await written!.next() }
            guard let e = try await captured?.next() else { return nil }
            switch e {
            case .settingsResolved(let r): return .settingsResolved(r)
            case .exposureStarted(let t): return .exposureStarted(t)
            case .exposureEnded(let t): return .exposureEnded(t)
            case .photo(let p):
                let (step, metadata) = (p.step, p.metadata)
                p.release()
                return .photoCaptured(step, metadata)
            case .captureFinished(let r): return .captureFinished(r)
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .written(let s): AsyncIterator(written: s.makeAsyncIterator(), captured: nil)
        case .captured(let s): AsyncIterator(written: nil, captured: s.makeAsyncIterator())
        }
    }
}

/// Writes captures as DNG and JPEG files plus one JSON sidecar each, durably, encoding on a
/// worker pool so the camera never waits for the disk. AVFoundation's photo output with its
/// file-writing delegate folded in.
public final class PhotoFileWriter: Sendable {
    public let directory: OutputDirectory
    public let pool: ProcessingPool
    public let camera: CameraDescription
    public let template: FileNameTemplate
    public let jpegQuality: Int
    /// Also write a contact sheet per capture (`..._sheet.jpg`): every step side by side,
    /// labelled, with histograms.
    public let contactSheet: Bool
    /// The session's streams, in the order of a photo's buffers.
    public let streams: [StreamConfiguration]
    private let scratch: ScratchMemory
    /// Report each photo's mean luma, keogram column and thumbnail (`photoMetered`).
    public let metersLuma: Bool

    /// Mean of a luma plane, every 4th pixel of every 4th row.
    static func meanLuma(_ bytes: [UInt8], plane: PlaneLayout, width: Int, height: Int) -> Double {
        var sum = 0, n = 0
        bytes.withUnsafeBufferPointer { p in
            var y = 0
            while y < height {
                let row = plane.offset + y * plane.stride
                var x = 0
                while x < width, row + x < p.count {
                    sum += Int(p[row + x])
                    n += 1
                    x += 4
                }
                y += 4
            }
        }
        return n == 0 ? 0 : Double(sum) / Double(n)
    }

    /// - Throws: `.invalidArgument` for a JPEG quality outside 1...100.
    public init(directory: OutputDirectory, streams: [StreamConfiguration], camera: CameraDescription, pool: ProcessingPool = ProcessingPool(),
                template: FileNameTemplate = .default, jpegQuality: Int = 92, contactSheet: Bool = false, metersLuma: Bool = false) throws {
        guard JPEGEncoder.qualityRange.contains(jpegQuality) else {
            throw ShutterbugError(.invalidArgument, "JPEG quality must be in 1...100, not \(jpegQuality)")
        }
        self.directory = directory
        self.streams = streams
        self.camera = camera
        self.pool = pool
        self.template = template
        self.jpegQuality = jpegQuality
        self.contactSheet = contactSheet
        self.metersLuma = metersLuma
        scratch = ScratchMemory(workers: pool.workers)
        directory.removeStaleTemporaries()
    }

    var rawIndex: Int? { streams.firstIndex { $0.pixelFormat.bayer != nil } }
    /// The stream JPEG is written from: YUV420, or else packed RGB (converted).
    var yuvIndex: Int? { streams.firstIndex { $0.pixelFormat == .yuv420 } ?? streams.firstIndex { FrameCopy.encodesToJPEG($0.pixelFormat) } }

    /// Which formats these streams can write, and why not the others.
    public func check(_ formats: Set<PhotoFormat>) throws {
        if formats.contains(.dng) && rawIndex == nil {
            throw ShutterbugError(.invalidArgument, "DNG needs a raw stream; the session streams \(streams.map { "\($0.pixelFormat)" }.joined(separator: ", "))")
        }
        if formats.contains(.jpeg) && yuvIndex == nil {
            throw ShutterbugError(.invalidArgument, "JPEG needs a YUV420 or RGB stream; the session streams \(streams.map { "\($0.pixelFormat)" }.joined(separator: ", "))")
        }
    }

    /// Bytes of frame copies one photo holds in the pool, and its files' size on disk
    /// (DNG: 16-bit samples; JPEG: at most half a byte per pixel at high quality).
    /// About how many bytes a capture of `steps` photos in `formats` puts on disk (what
    /// `capture` checks against the directory's reserve before it starts).
    public func diskEstimate(_ formats: Set<PhotoFormat>, steps: Int) -> Int64 {
        footprint(formats).disk * Int64(steps) + (256 << 10)
    }

    func footprint(_ formats: Set<PhotoFormat>) -> (memory: Int, disk: Int64) {
        var memory = 0
        var disk: Int64 = 64 << 10
        if formats.contains(.dng), let r = rawIndex {
            memory += streams[r].frameSize
            disk += Int64(streams[r].width * streams[r].height * 2)
        }
        if formats.contains(.jpeg), let y = yuvIndex {
            memory += streams[y].frameSize
            disk += Int64(streams[y].width * streams[y].height / 2)
        }
        return (memory, disk)
    }

    /// Captures `settings` on `session` and writes each photo in `settings.formats`, then the
    /// sidecar. Checks the free space first (the stream fails with `.noSpace` before capturing
    /// when the capture would eat into the reserve) and waits for room in the pool.
    /// `number`: the capture's number, when the caller took it already (a timelapse journals
    /// it before any file is written); by default the directory's next.
    /// `checksums`: each file's CRC-32 in its `WrittenFile`, read back as it is written (before
    /// an uploader told of the file could delete it).
    public func capture(_ settings: PhotoSettings, on session: CaptureSession, number: Int? = nil, checksums: Bool = false,
                        queued: (@Sendable () -> Void)? = nil) -> AsyncThrowingStream<OutputEvent, any Error> {
        let (stream, out) = AsyncThrowingStream<OutputEvent, any Error>.makeStream()
        let task = Task {
            do {
                try await self.run(settings, session: session, number: number, checksums: checksums, queued: queued, out: out)
            } catch {
                out.finish(throwing: error)
            }
        }
        out.onTermination = { _ in task.cancel() }
        return stream
    }

    private func run(_ settings: PhotoSettings, session: CaptureSession, number given: Int?, checksums: Bool, queued: (@Sendable () -> Void)?,
                     out: AsyncThrowingStream<OutputEvent, any Error>.Continuation) async throws {
        try check(settings.formats)
        let steps = max(settings.stepCount, 1)
        let (memory, disk) = footprint(settings.formats)
        try directory.checkSpace(for: disk * Int64(steps) + (256 << 10))
        let waited = await pool.reserve(memory * steps)
        if waited > .zero { out.yield(.backPressure(waited: waited)) }
        var unused = memory * steps
        defer { if unused > 0 { pool.unreserve(unused) } }

        let number: Int
        if let given {
            number = given
        } else {
            let numbered = try directory.nextCaptureNumber(template: template)
            if let notice = numbered.notice { out.yield(.notice(notice)) }
            number = numbered.number
        }
        let record = CaptureRecord(steps: steps, clock: FrameClock.sample(), checksums: checksums)
        var name: ((Int?) -> String)?
        var resolved: ResolvedPhotoSettings?
        var planned: ResolvedPhotoSettings?
        // A capture that fails part-way (a stalled or lost camera) still writes every step it
        // captured, and its sidecar says which are missing; then the stream throws.
        var failure: ShutterbugError?
        do {
            let events = await session.capture(settings)
            queued?()
            for try await event in events {
                switch event {
                case .settingsResolved(let r):
                    planned = r
                    out.yield(.settingsResolved(r))
                case .exposureStarted(let t):
                    record.set(exposureStarted: t)
                    out.yield(.exposureStarted(t))
                case .exposureEnded(let t):
                    record.set(exposureEnded: t)
                    out.yield(.exposureEnded(t))
                case .photo(let photo):
                    let stepNumber = photo.step.index + 1
                    let bias: Double? = if case .exposureBias(let b)? = settings.bracket, photo.step.index < b.count { b[photo.step.index] } else { nil }
                    let facts = PhotoFacts(photo: photo, captureID: settings.uniqueID, stepCount: steps, bias: bias, camera: camera, clock: record.clock)
                    if name == nil {
                        let time = facts.exposureStart
                        let (template, model, id) = (template, camera.model, settings.uniqueID)
                        name = { step in template.render(time: time, capture: number, id: id, step: step, steps: steps, camera: model) }
                    }
                    let raw = settings.formats.contains(.dng) ? rawIndex.map { FrameCopy(photo.buffers[$0]) } : nil
                    let copy = settings.formats.contains(.jpeg) ? yuvIndex.map { FrameCopy(photo.buffers[$0]) } : nil
                    let metadata = photo.metadata
                    let step = photo.step
                    photo.release()
                    // Packed RGB is converted once the camera has its buffer back.
                    let yuv = copy?.yuv420()
                    record.add(step: step, metadata: metadata, facts: facts)
                    out.yield(.photoCaptured(step, metadata))
                    if metersLuma, let yuv, let luma = yuv.planes.first {
                        out.yield(.photoMetered(step, meanLuma: Self.meanLuma(yuv.bytes, plane: luma, width: yuv.width, height: yuv.height),
                                                keogramColumn: Keogram.column(yuv), thumbnail: Thumbnailer(frame: yuv)))
                    }
                    let base = name!(stepNumber)
                    let interim = planned.map { ($0, name!(nil) + ".json") }
                    unused -= memory
                    record.jobStarted()
                    pool.submit(bytes: memory) { [self] worker in
                        // The interim sidecar is on disk before any photo is named (by whichever
                        // step's job comes first, off the capture's event loop): a process killed
                        // between a photo and its sidecar left a photo nothing listed (the serve
                        // kill test found two). A restart completes it from the files found.
                        if let (planned, relative) = interim {
                            self.writeInterimSidecar(settings, planned: planned, record: record, relative: relative, onlyTheFirst: true)
                        }
                        if let raw {
                            self.writeFile(base + ".dng", step: stepNumber, format: "dng", size: (raw.width, raw.height), record: record, out: out) { fd in
                                try DNGEncoder.write(raw, facts: facts, colourGains: metadata.colourGains, to: fd)
                            }
                        }
                        if let yuv {
                            self.writeFile(base + ".jpg", step: stepNumber, format: "jpeg", size: (yuv.width, yuv.height), record: record, out: out) { fd in
                                try JPEGEncoder.encode(yuv, quality: self.jpegQuality, facts: facts, scratch: self.scratch.jpeg(worker)) {
                                    try OutputDirectory.writeAll(fd, $0)
                                }
                            }
                        }
                        if self.contactSheet {
                            let labels = ContactSheet.labels(step: stepNumber, of: steps, requested: step.requested, metadata: metadata)
                            if let yuv {
                                record.add(tile: ContactSheet.tile(yuv: yuv, labels: labels), step: stepNumber)
                            } else if let raw, let p = try? DNGEncoder.preview(raw, facts: facts, colourGains: metadata.colourGains) {
                                record.add(tile: ContactSheet.tile(rgb: p.rgb, width: p.width, height: p.height, labels: labels), step: stepNumber)
                            }
                        }
                        if steps > 1, let (planned, relative) = interim {
                            self.writeInterimSidecar(settings, planned: planned, record: record, relative: relative)
                        }
                        record.jobFinished()
                    }
                case .captureFinished(let r):
                    resolved = r
                    out.yield(.captureFinished(r))
                }
            }
        } catch {
            let e = error as? ShutterbugError ?? ShutterbugError(.system, "\(error)")
            let got = record.capturedSteps
            // Not taken on purpose (too late to begin): nothing was captured, nothing to say.
            guard e.code != .late else {
                out.finish(throwing: e)
                return
            }
            let missing = (1...steps).filter { !got.contains($0) }
            let kept = got.isEmpty ? "no step was captured" : "step\(got.count == 1 ? "" : "s") \(got.map(String.init).joined(separator: ",")) captured and written"
            failure = ShutterbugError(e.code, "\(e.message); \(kept), step\(missing.count == 1 ? "" : "s") \(missing.map(String.init).joined(separator: ",")) missing", errno: e.errno)
            record.set(failure: failure!.description, missing: missing)
        }
        await record.allJobsFinished()
        if contactSheet, let name {
            let tiles = record.state.withLock { $0.tiles }.sorted { $0.key < $1.key }.map(\.value)
            if !tiles.isEmpty {
                writeFile(name(nil) + "_sheet.jpg", step: nil, format: "contact-sheet", record: record, out: out) { fd in
                    try OutputDirectory.writeAll(fd, try ContactSheet.jpeg(tiles))
                }
            }
        }
        if let resolved = resolved ?? planned, let name {
            let relative = name(nil) + ".json"
            let sidecar = Sidecar(settings: settings, resolved: resolved, camera: camera, record: record, jpegQuality: jpegQuality,
                                  directory: directory.path, sidecarPath: relative)
            if let interim = record.sidecarPath.withLock({ $0 }) {
                // A bracket's interim sidecar is replaced whole by the finished one. Where that
                // cannot be written (a full disk), the interim one goes: it would say the process
                // ended before steps that were written, and the failure says what happened.
                let json = sidecar.json()
                writeFile(interim, step: nil, format: "json", size: nil, record: record, out: out, written: {
                    do {
                        return (try directory.replace(interim, with: json), Int64(json.count))
                    } catch let e as ShutterbugError {
                        let removed = (try? directory.remove(interim)) != nil
                        throw ShutterbugError(e.code, "\(e.message); the sidecar written while the capture ran \(removed ? "was removed (it said the process ended before steps that were written)" : "could not be removed either and says the capture was cut short")", errno: e.errno)
                    }
                })
            } else {
                writeFile(relative, step: nil, format: "json", record: record, out: out) { fd in
                    try OutputDirectory.writeAll(fd, sidecar.json())
                }
            }
        }
        let summary = record.summary(captureID: settings.uniqueID, number: number)
        CaptureObservers.captured(summary.files.map(\.path))
        out.yield(.filesFinished(summary))
        if let failure {
            out.finish(throwing: failure)
        } else {
            out.finish()
        }
    }

    /// After each of a bracket's steps: the sidecar as it stands (the steps written so far, those
    /// still to come), so a process killed mid-bracket leaves no step undescribed. The first
    /// one takes a new name as every file does; later ones and the final sidecar replace it.
    /// Best effort: the final sidecar reports a write that fails.
    /// `onlyTheFirst`: written only where none is yet (before a step's files are named).
    private func writeInterimSidecar(_ settings: PhotoSettings, planned: ResolvedPhotoSettings, record: CaptureRecord, relative: String,
                                     onlyTheFirst: Bool = false) {
        record.sidecarPath.withLock { path in
            if onlyTheFirst && path != nil { return }
            let sidecar = Sidecar(settings: settings, resolved: planned, camera: camera, record: record, jpegQuality: jpegQuality,
                                  directory: directory.path, sidecarPath: relative, inProgress: true)
            if let path {
                _ = try? directory.replace(path, with: sidecar.json())
            } else if let (full, _) = try? directory.write(relative, { try OutputDirectory.writeAll($0, sidecar.json()) }) {
                path = String(full.dropFirst(directory.path.count + 1))
            }
        }
    }

    private func writeFile(_ relative: String, step: Int?, format: String, size: (Int, Int)? = nil, record: CaptureRecord,
                           out: AsyncThrowingStream<OutputEvent, any Error>.Continuation, _ body: (Int32) throws -> Void) {
        writeFile(relative, step: step, format: format, size: size, record: record, out: out, written: { try directory.write(relative, body) })
    }

    private func writeFile(_ relative: String, step: Int?, format: String, size: (Int, Int)?, record: CaptureRecord,
                           out: AsyncThrowingStream<OutputEvent, any Error>.Continuation, written: () throws -> (path: String, bytes: Int64)) {
        do {
            let (path, bytes) = try written()
            let crc = record.checksums ? try OutputDirectory.crc32(of: path) : nil
            let file = WrittenFile(step: step, format: format, path: path, bytes: bytes, width: size?.0, height: size?.1, crc32: crc)
            record.written(file)
            out.yield(.fileWritten(file))
        } catch {
            let e = error as? ShutterbugError ?? ShutterbugError(.system, "\(error)")
            let named = ShutterbugError(e.code, "cannot write \(directory.path)/\(relative): \(e.message)", errno: e.errno)
            record.failed(step: step, format: format, error: named)
            out.yield(.writeFailed(step: step, format: format, error: named))
        }
    }
}

/// Per-worker JPEG output memory, reused from photo to photo. Only worker `index`'s thread
/// uses `jpeg(index)`, so no two threads share one.
final class ScratchMemory: Sendable {
    private let jpegs: [JPEGScratch]
    init(workers: Int) { jpegs = (0..<workers).map { _ in JPEGScratch() } }
    func jpeg(_ index: Int) -> JPEGScratch { jpegs[index] }
}

/// What one capture produced so far, shared by the capture loop and the workers.
final class CaptureRecord: Sendable {
    struct Step: Sendable {
        var step: ResolvedStep
        var metadata: FrameMetadata
        var facts: PhotoFacts
    }
    struct State: Sendable {
        var steps: [Step] = []
        var files: [WrittenFile] = []
        var failures: [(step: Int?, format: String, error: ShutterbugError)] = []
        var exposureStarted: SensorTime?
        var exposureEnded: SensorTime?
        /// Why the capture ended before every step was captured, and the steps (from 1) missing.
        var failure: String?
        var missing: [Int] = []
        var pendingJobs = 0
        /// Contact-sheet tiles by step.
        var tiles: [Int: ContactSheet.Tile] = [:]
        var idle: [CheckedContinuation<Void, Never>] = []
    }
    let stepCount: Int
    let clock: FrameClock
    let state = Mutex(State())
    /// The interim sidecar's path under the output (a bracket's, once its first step is written);
    /// its lock also keeps two workers from writing it at once.
    let sidecarPath = Mutex<String?>(nil)

    let checksums: Bool

    init(steps: Int, clock: FrameClock, checksums: Bool = false) {
        stepCount = steps
        self.clock = clock
        self.checksums = checksums
    }

    func set(exposureStarted t: SensorTime) { state.withLock { $0.exposureStarted = t } }
    func set(exposureEnded t: SensorTime) { state.withLock { $0.exposureEnded = t } }
    func add(step: ResolvedStep, metadata: FrameMetadata, facts: PhotoFacts) {
        state.withLock { $0.steps.append(Step(step: step, metadata: metadata, facts: facts)) }
    }
    func set(failure: String, missing: [Int]) {
        state.withLock {
            $0.failure = failure
            $0.missing = missing
        }
    }
    /// The steps (from 1) whose frames are in, in order.
    var capturedSteps: [Int] { state.withLock { $0.steps.map { $0.step.index + 1 } }.sorted() }
    func add(tile: ContactSheet.Tile, step: Int) { state.withLock { $0.tiles[step] = tile } }
    func written(_ f: WrittenFile) { state.withLock { $0.files.append(f) } }
    func failed(step: Int?, format: String, error: ShutterbugError) { state.withLock { $0.failures.append((step, format, error)) } }
    func jobStarted() { state.withLock { $0.pendingJobs += 1 } }
    func jobFinished() {
        let waiting: [CheckedContinuation<Void, Never>] = state.withLock { s in
            s.pendingJobs -= 1
            guard s.pendingJobs == 0 else { return [] }
            defer { s.idle = [] }
            return s.idle
        }
        for c in waiting { c.resume() }
    }
    func allJobsFinished() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = state.withLock { s in
                if s.pendingJobs == 0 { return true }
                s.idle.append(c)
                return false
            }
            if now { c.resume() }
        }
    }
    func summary(captureID: Int64, number: Int) -> OutputSummary {
        state.withLock { OutputSummary(captureID: captureID, captureNumber: number, files: $0.files, failures: $0.failures) }
    }
}

/// A photo's processed frame, kept for a thumbnail made only if asked for (a timelapse keeps
/// one of a slot's photos, and of few slots).
public struct Thumbnailer: Sendable {
    let frame: FrameCopy
    /// The picture `width` pixels wide (box-averaged), 8-bit sRGB.
    public func make(width: Int = RunSheet.thumbWidth) -> (rgb: [UInt8], width: Int, height: Int) {
        ContactSheet.thumbnail(yuv: frame, width: width)
    }
}
