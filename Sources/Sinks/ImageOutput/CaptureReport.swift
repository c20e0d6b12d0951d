import Capture
import Foundation
import CaptureScheduler
import ShutterbugCore

/// What one capture did, as `bracket --json` prints it and the HTTP API answers it: one Codable
/// type, made from the capture's output events by `Builder`, so the command line and the service
/// say the same thing in the same words. Times are the camera's clock (CLOCK_MONOTONIC on a
/// real camera) in nanoseconds; exposures in microseconds.
public struct CaptureReport: Sendable, Codable, Equatable {
    /// One step's plan and the frame that carried it.
    public struct Step: Sendable, Codable, Equatable {
        public var step: Int
        public var requested: String
        public var plannedExposureUs: Double?
        public var plannedGain: Double?
        public var plannedLens: Double?
        public var sequence: Int
        public var sensorTimestampNs: Int64?
        public var exposureStartNs: Int64?
        public var exposureTimeUs: Double?
        public var analogueGain: Double?
        public var digitalGain: Double?
        public var frameDurationUs: Double?
        public var lensPosition: Double?
        public var colourTemperatureK: Int?
        public var lux: Double?
        public var controlListSequence: Int64?
        /// The step's files (paths as the writer gave them), when the capture wrote files.
        public var files: [String]?
    }

    /// A file the capture wrote: a step's photo, or the capture's sidecar or contact sheet.
    public struct File: Sendable, Codable, Equatable {
        public var path: String
        public var format: String
        public var bytes: Int64
        public var step: Int?
    }

    public var uniqueID: Int64
    /// "photo" or "bracket".
    public var kind: String
    /// Steps asked for.
    public var stepCount: Int
    /// Steps captured, in step order.
    public var steps: [Step]
    /// Every step was captured (files aside: `failures` lists files that could not be written).
    public var complete: Bool
    /// Why the capture ended early, and the steps (from 1) it lacks.
    public var error: String?
    public var missingSteps: [Int]?
    /// Sensor frames from the first step's to the last's (the step count: consecutive frames).
    public var framesFirstToLast: Int?
    public var retries: Int
    /// Steps in the order their frames came off the sensor.
    public var captureOrder: [Int]
    public var capturedInStepOrder: Bool
    /// Frames looked at and not taken, and why.
    public var discarded: [String]
    /// What the camera could not do as asked, and what it did instead.
    public var adjustments: [String]
    public var meteredExposureUs: Double?
    public var meteredGain: Double?
    public var phaseLock: String?
    public var exposureStartedNs: Int64?
    public var exposureEndedNs: Int64?
    public var files: [File]
    public var failures: [String]

    /// Folds a capture's output events into its report.
    public struct Builder: Sendable {
        let settings: PhotoSettings
        var planned: ResolvedPhotoSettings?
        var resolved: ResolvedPhotoSettings?
        var photos: [(step: ResolvedStep, metadata: FrameMetadata)] = []
        var started: SensorTime?
        var ended: SensorTime?
        var files: [WrittenFile] = []
        var failures: [String] = []

        public init(_ settings: PhotoSettings) { self.settings = settings }

        public mutating func observe(_ event: OutputEvent) {
            switch event {
            case .settingsResolved(let r): planned = r
            case .exposureStarted(let t): started = t
            case .exposureEnded(let t): ended = t
            case .photoCaptured(let step, let m): photos.append((step, m))
            case .captureFinished(let r): resolved = r
            case .fileWritten(let f): files.append(f)
            case .writeFailed(let step, let format, let error): failures.append("step \(step.map(String.init) ?? "-") \(format): \(error.message)")
            case .backPressure, .photoMetered, .filesFinished, .notice: break
            }
        }

        /// The photos captured so far, in the order they came.
        public var captured: [(step: ResolvedStep, metadata: FrameMetadata)] { photos }
        public var writtenFiles: [WrittenFile] { files }
        /// The capture's resolved settings, or its plan when it ended early.
        public var settingsResolved: ResolvedPhotoSettings? { resolved ?? planned }
        public var exposureStarted: SensorTime? { started }
        public var exposureEnded: SensorTime? { ended }

        /// A value JSON can hold: an infinite or NaN one (a camera's lux, say) is left out, so the
        /// report of a capture that was taken always encodes.
        func finite(_ v: Double?) -> Double? { v.flatMap { $0.isFinite ? $0 : nil } }

        /// The report; `error` when the capture ended early (the steps it got are reported).
        public func report(error: (any Error)? = nil) -> CaptureReport {
            let r = resolved ?? planned
            let stepCount = max(settings.stepCount, 1)
            let inOrder = photos.sorted { $0.step.index < $1.step.index }
            let bySensor = photos.sorted { $0.metadata.sequence < $1.metadata.sequence }.map { $0.step.index + 1 }
            let seqs = photos.map { Int($0.metadata.sequence) }
            let got = Set(photos.map { $0.step.index + 1 })
            let missing = (1...stepCount).filter { !got.contains($0) }
            let message = error.map { ($0 as? ShutterbugError)?.message ?? "\($0)" }
            return CaptureReport(
                uniqueID: settings.uniqueID, kind: settings.bracket != nil ? "bracket" : settings.burst != nil ? "burst" : "photo", stepCount: stepCount,
                steps: inOrder.map { p in
                    let m = p.metadata
                    return Step(step: p.step.index + 1, requested: p.step.requested, plannedExposureUs: finite(p.step.planned.exposure?.microsecondsValue),
                                plannedGain: finite(p.step.planned.gain), plannedLens: finite(p.step.planned.lens), sequence: Int(m.sequence),
                                sensorTimestampNs: m.sensorTimestamp?.nanoseconds, exposureStartNs: m.exposureStart?.nanoseconds,
                                exposureTimeUs: finite(m.exposureTime?.microsecondsValue), analogueGain: finite(m.analogueGain?.value), digitalGain: finite(m.digitalGain?.value),
                                frameDurationUs: finite(m.frameDuration?.microsecondsValue), lensPosition: finite(m.lensPosition?.value),
                                colourTemperatureK: m.colourTemperature, lux: finite(m.lux), controlListSequence: m.controlListSequence,
                                files: files.isEmpty && failures.isEmpty ? nil : files.filter { $0.step == p.step.index + 1 }.map(\.path).sorted())
                },
                complete: missing.isEmpty && error == nil, error: message, missingSteps: missing.isEmpty ? nil : missing,
                framesFirstToLast: seqs.min().map { (seqs.max()! - $0) + 1 }, retries: r?.retries ?? 0,
                captureOrder: bySensor, capturedInStepOrder: bySensor == bySensor.sorted(),
                discarded: r?.discarded.map { "\($0.sequence): \($0.reason)" } ?? [], adjustments: r?.adjustments ?? [],
                meteredExposureUs: finite(r?.meteredExposure?.microsecondsValue), meteredGain: finite(r?.meteredGain), phaseLock: r?.phaseLock,
                exposureStartedNs: started?.nanoseconds, exposureEndedNs: ended?.nanoseconds,
                files: files.map { File(path: $0.path, format: $0.format, bytes: $0.bytes, step: $0.step) }, failures: failures)
        }
    }
}

extension CaptureReport {
    /// One line of JSON (keys sorted, so the same report prints the same; absent values left out).
    public var jsonText: String { Self.jsonText(self) }

    /// Any of the report's parts as one line of JSON.
    public static func jsonText(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

extension CaptureReport {
    /// The same report with file paths relative to `directory` (what the API's `/api/files/`
    /// serves), where they are under it.
    public func paths(relativeTo directory: String) -> CaptureReport {
        func relative(_ p: String) -> String { relativePath(p, under: directory) }
        var r = self
        r.files = files.map { var f = $0; f.path = relative(f.path); return f }
        r.steps = steps.map { var s = $0; s.files = s.files?.map(relative); return s }
        return r
    }
}

/// `path` relative to `directory` where it is under it (what the API's `/api/files/` serves),
/// else as it is.
public func relativePath(_ path: String, under directory: String) -> String {
    let prefix = directory.hasSuffix("/") ? directory : directory + "/"
    return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
}
