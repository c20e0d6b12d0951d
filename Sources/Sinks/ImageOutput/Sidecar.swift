import Capture
import CaptureScheduler
import ShutterbugCore

/// The JSON document written beside a capture's images: the request, the resolved plan, every
/// metadata value of every frame, the bracket's structure and the files.
struct Sidecar {
    var settings: PhotoSettings
    var resolved: ResolvedPhotoSettings
    var camera: CameraDescription
    var record: CaptureRecord
    var jpegQuality: Int
    /// The output directory, and the sidecar's path inside it: file paths in the sidecar are
    /// relative to the sidecar's own folder, so the folder can be moved or copied whole.
    var directory: String
    var sidecarPath: String
    /// Written while a bracket runs, after each step's files: a process killed before the last
    /// step leaves its finished steps described, and this says which never came.
    var inProgress = false

    /// `path` (under `directory`) relative to the sidecar's folder.
    func relative(_ path: String) -> String {
        let inside = path.hasPrefix(directory + "/") ? String(path.dropFirst(directory.count + 1)) : path
        var from = sidecarPath.split(separator: "/").dropLast().map(String.init)
        var to = inside.split(separator: "/").map(String.init)
        while let f = from.first, let t = to.first, to.count > 1, f == t {
            from.removeFirst()
            to.removeFirst()
        }
        return (Array(repeating: "..", count: from.count) + to).joined(separator: "/")
    }

    /// Every value a frame reported, with the facts the files derive from it.
    static func frame(_ m: FrameMetadata, facts: PhotoFacts?) -> JSONObject {
        var f = JSONObject()
        f.add("sequence", Int(m.sequence))
        f.add("sensorTimestampNs", m.sensorTimestamp?.nanoseconds)
        f.add("exposureStartNs", m.exposureStart?.nanoseconds)
        if let facts { f.add("exposureStartLocal", facts.exposureStart?.iso8601) }
        f.add("exposureTimeUs", m.exposureTime?.microsecondsValue)
        f.add("analogueGain", m.analogueGain?.value)
        f.add("digitalGain", m.digitalGain?.value)
        f.add("iso", facts?.iso ?? m.totalGain.map { $0.iso })
        f.add("frameDurationUs", m.frameDuration?.microsecondsValue)
        f.add("lensPosition", m.lensPosition?.value)
        if let facts { f.add("subjectDistanceM", facts.subjectDistance.flatMap { $0.isFinite ? $0 : nil }) }
        f.add("colourGainRed", m.colourGains?.red)
        f.add("colourGainBlue", m.colourGains?.blue)
        f.add("colourTemperatureK", m.colourTemperature)
        f.add("lux", m.lux)
        f.add("controlListSequence", m.controlListSequence)
        f.addReportedExtras(m)
        return f
    }

    func json() -> [UInt8] {
        let state = record.state.withLock { $0 }
        var o = JSONObject()
        o.add("schema", "shutterbug.capture/2")
        o.add("uniqueID", settings.uniqueID)
        var cam = JSONObject()
        cam.add("make", camera.make)
        cam.add("model", camera.model)
        cam.add("uniqueModel", camera.uniqueModel)
        cam.add("blackLevel", camera.blackLevel)
        cam.add("bitDepth", camera.bitDepth)
        o.add("camera", object: cam)
        o.add("formats", settings.formats.map(\.rawValue).sorted())
        if settings.formats.contains(.jpeg) { o.add("jpegQuality", jpegQuality) }

        var bracket = JSONObject()
        switch settings.bracket {
        case .exposureBias(let b)?:
            bracket.add("kind", "exposureBias")
            bracket.add("biasesEV", numbers: b)
        case .manualExposure(let m)?:
            bracket.add("kind", "manualExposure")
            bracket.add("exposuresUs", numbers: m.map { $0.duration.microsecondsValue })
            bracket.add("gains", numbers: m.map { $0.gain.value })
        case .lensPositions(let l)?:
            bracket.add("kind", "lensPositions")
            bracket.add("lensPositionsDioptres", numbers: l.map(\.value))
        case nil where settings.burst != nil:
            bracket.add("kind", "burst")
            bracket.add("framesBefore", settings.burst!.before)
            bracket.add("framesAfter", settings.burst!.after)
            bracket.add("windowBeforeUs", settings.burst!.window?.microsecondsValue)
        case nil:
            bracket.add("kind", "single")
        }
        bracket.add("steps", record.stepCount)
        o.add("bracket", object: bracket)

        var r = JSONObject()
        r.add("adjustments", resolved.adjustments)
        r.add("retries", resolved.retries)
        r.add("discarded", objects: resolved.discarded.map {
            var d = JSONObject()
            d.add("sequence", Int($0.sequence))
            d.add("reason", $0.reason)
            if let m = $0.metadata { d.add("frame", object: Self.frame(m, facts: nil)) }
            return d
        })
        r.add("meteredExposureUs", resolved.meteredExposure?.microsecondsValue)
        r.add("meteredGain", resolved.meteredGain)
        r.add("exposureStartedNs", state.exposureStarted?.nanoseconds)
        r.add("exposureEndedNs", state.exposureEnded?.nanoseconds)
        let seqs = state.steps.map { Int($0.metadata.sequence) }
        if let lo = seqs.min(), let hi = seqs.max() { r.add("framesFirstToLast", hi - lo + 1) }
        o.add("resolved", object: r)
        if inProgress, state.failure == nil {
            // Replaced by the finished capture's sidecar; still here only when the process ended.
            let done = Set(state.files.compactMap(\.step))
            var f = JSONObject()
            f.add("error", "\(OutputDirectory.interruptedSidecarError): the process ended before the steps listed here were written")
            f.add("missingSteps", numbers: (1...max(record.stepCount, 1)).filter { !done.contains($0) }.map(Double.init))
            o.add("incomplete", object: f)
        } else if let failure = state.failure {
            // The capture ended early: the steps it got are written, these are not.
            var f = JSONObject()
            f.add("error", failure)
            f.add("missingSteps", numbers: state.missing.map(Double.init))
            o.add("incomplete", object: f)
        }

        if let instant = settings.exposedAfter {
            // The trigger and the lag to the first exposure (both on the camera's clock); the
            // lags to delivery and to these files are the trigger command's to report.
            var t = JSONObject()
            t.add("instantNs", instant.nanoseconds)
            t.add("source", settings.trigger?.source)
            t.add("sequence", settings.trigger.map { Int($0.sequence) })
            // A burst's lag is its frame at the trigger's, not the first frame's from before.
            let atTrigger = resolved.pivotStep.flatMap { p in state.steps.first { $0.step.index == p }?.metadata.exposureStart } ?? state.exposureStarted
            t.add("lagToExposureStartUs", atTrigger.map { ($0 - instant).microsecondsValue })
            if settings.burst != nil {
                // Each frame's exposure start from the trigger's instant, in step order:
                // negative before it, the frame at it at most zero.
                let steps = state.steps.sorted { $0.step.index < $1.step.index }
                t.add("frameOffsetsUs", numbers: steps.compactMap { $0.metadata.exposureStart.map { ($0 - instant).microsecondsValue } })
            }
            if let z = resolved.zeroShutterLag {
                // Zero shutter lag: the frame exposing at the instant (lag at most zero), or
                // why none was and the first exposed after was taken.
                var zsl = JSONObject()
                zsl.add("covered", z.covered)
                zsl.add("fromHeldFrames", z.fromHeldFrames)
                zsl.add("fallback", z.fallback)
                t.add("zeroShutterLag", object: zsl)
            }
            o.add("trigger", object: t)
        }

        var clock = JSONObject()
        clock.add("source", "SensorTimestamp (CLOCK_MONOTONIC) + (CLOCK_REALTIME - CLOCK_MONOTONIC) sampled at capture")
        // About 1.8e18: a string of digits, since JSON readers would round it as a number.
        clock.add("realtimeMinusMonotonicNs", digits: record.clock.offsetNanoseconds)
        o.add("clock", object: clock)

        let steps = state.steps.sorted { $0.step.index < $1.step.index }
        o.add("steps", objects: steps.map { s in
            var j = JSONObject()
            let m = s.metadata
            j.add("step", s.step.index + 1)
            j.add("requested", s.step.requested)
            var plan = JSONObject()
            plan.add("exposureUs", s.step.planned.exposure?.microsecondsValue)
            plan.add("gain", s.step.planned.gain)
            plan.add("lensPosition", s.step.planned.lens)
            j.add("planned", object: plan)
            let f = Self.frame(m, facts: s.facts)
            j.add("frame", object: f)
            j.add("files", objects: state.files.filter { $0.step == s.step.index + 1 }.sorted { $0.path < $1.path }.map { file in
                var o = JSONObject()
                o.add("path", relative(file.path))
                o.add("format", file.format)
                o.add("bytes", file.bytes)
                o.add("width", file.width)
                o.add("height", file.height)
                if file.format == "jpeg" { o.add("quality", jpegQuality) }
                return o
            })
            return j
        })
        if let sheet = state.files.first(where: { $0.format == "contact-sheet" }) { o.add("contactSheet", relative(sheet.path)) }
        o.add("failures", state.failures.map { "step \($0.step.map(String.init) ?? "-") \($0.format): \($0.error)" })
        return Array((o.text + "\n").utf8)
    }
}
