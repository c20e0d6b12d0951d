import CSystemShims
import Capture
import ShutterbugCore

/// Prints one line (or JSON object) per frame, noting what changed and where frames were lost,
/// and a summary naming the first frame that carries the requested settings.
struct FramePrinter: Sendable {
    let json: Bool
    let tolerance: Duration
    /// What the previous frame's line is compared with (not the whole metadata: a copy of a
    /// few hundred bytes per frame).
    private struct Compared: Sendable {
        var sequence: UInt32
        var exposureTime: Duration?
        var analogueGain: Gain?
        var frameDuration: Duration?
        var lensPosition: Dioptres?
        var colourGains: ColourGains?
        init(_ m: FrameMetadata) {
            sequence = m.sequence
            exposureTime = m.exposureTime
            analogueGain = m.analogueGain
            frameDuration = m.frameDuration
            lensPosition = m.lensPosition
            colourGains = m.colourGains
        }
    }
    private var previous: Compared?
    private var frames = 0
    private var dropped = 0
    private var errors = 0
    private var startup = 0
    private var pairedFrame: UInt32?
    private var syncFrame: FrameMetadata?
    private var firstTimestamp: SensorTime?
    private var lastTimestamp: SensorTime?

    private var pairedRequest: UInt64?
    /// The text line's buffer, reused frame after frame.
    private let line = TextLine()
    /// The settings were in force from the start (no request carried them).
    private let startedWithThem: Bool

    init(json: Bool, tolerance: Duration, startedWithThem: Bool) {
        self.json = json
        self.tolerance = tolerance
        self.startedWithThem = startedWithThem
    }

    mutating func frame(_ c: CaptureSession.RequestRecord, target: ManualSettings) {
        let m = c.metadata
        frames += 1
        if c.status == .error { errors += 1 }
        if c.status == .startup { startup += 1 }
        let gap = previous.map { Int(m.sequence) - Int($0.sequence) - 1 } ?? 0
        if gap > 0 { dropped += gap }
        if c.carriedControlsFor != nil, pairedFrame == nil { pairedFrame = m.sequence; pairedRequest = c.request }
        let requestQueued = pairedFrame != nil || startedWithThem
        if syncFrame == nil, !target.isEmpty, requestQueued, c.status != .error, target.isCarried(by: m) { syncFrame = m }
        if firstTimestamp == nil { firstTimestamp = m.sensorTimestamp }
        lastTimestamp = m.sensorTimestamp ?? lastTimestamp

        let changed = changes(from: previous, to: m)
        if json {
            var o = JSONObject()
            o.add("sequence", Int(m.sequence))
            o.add("request", Int(c.request))
            o.add("status", "\(c.status)")
            o.add("sensorTimestampNs", m.sensorTimestamp?.nanoseconds)
            o.add("exposureTimeUs", m.exposureTime.map { $0.microsecondsValue })
            o.add("analogueGain", m.analogueGain?.value)
            o.add("digitalGain", m.digitalGain?.value)
            o.add("frameDurationUs", m.frameDuration.map { $0.microsecondsValue })
            o.add("lensPosition", m.lensPosition?.value)
            o.add("colourGainRed", m.colourGains?.red)
            o.add("colourGainBlue", m.colourGains?.blue)
            o.addReportedExtras(m)
            o.add("dropped", gap)
            o.add("changed", changed)
            emit(o.text)
        } else {
            // Into a reused byte buffer: no String per frame (bench-cam.sh weighs this line
            // against cam's).
            let line = self.line  // the reused buffer
            line.clear()
            line.append("#")
            line.rightAligned(5) { $0.append(Int(m.sequence)) }
            line.append("  t=")
            if let t = m.sensorTimestamp { line.append(t) } else { line.append("-") }
            line.append("  exp ")
            line.rightAligned(10) { l in
                if let e = m.exposureTime {
                    l.append(Int(e.microsecondsValue.rounded()))
                    l.append(" µs")
                } else {
                    l.append("-")
                }
            }
            line.append("  gain ")
            if let g = m.analogueGain { line.appendFixed2(g.value) } else { line.append("-") }
            line.append("×")
            if let g = m.digitalGain { line.appendFixed2(g.value) } else { line.append("-") }
            line.append("  fd ")
            line.rightAligned(10) { l in
                if let f = m.frameDuration { l.appendMilliseconds(f) } else { l.append("-") }
            }
            if let l = m.lensPosition { line.append("  lens "); line.appendFixed2(l.value); line.append(" dpt") }
            if c.status != .complete { line.append("  ["); line.append("\(c.status)"); line.append("]") }
            if gap > 0 { line.append("  ("); line.append(gap); line.append(" dropped)") }
            if !changed.isEmpty { line.append("  changed: "); line.append(changed.joined(separator: ", ")) }
            if c.carriedControlsFor != nil, pairedFrame == m.sequence { line.append("  <- request #"); line.append(Int(c.request)); line.append(" with the new settings") }
            if let s = syncFrame, s.sequence == m.sequence, !target.isEmpty { line.append("  <- first frame carrying them") }
            line.write()
        }
        previous = Compared(m)
    }

    func summary(camera: String, unsupported: ControlSet, target: ManualSettings, mode: SensorModeReport? = nil, bufferBytes: Int? = nil) {
        let span = (firstTimestamp != nil && lastTimestamp != nil) ? (lastTimestamp! - firstTimestamp!) : nil
        if json {
            var o = JSONObject()
            o.add("summary", true)
            o.add("camera", camera)
            o.add("frames", frames)
            o.add("dropped", dropped)
            o.add("errors", errors)
            o.add("startupFrames", startup)
            o.add("spanUs", span.map { $0.microsecondsValue })
            o.add("requestFrame", pairedFrame.map { Int($0) })
            o.add("syncFrame", syncFrame.map { Int($0.sequence) })
            o.add("syncTimestampNs", syncFrame?.sensorTimestamp?.nanoseconds)
            o.add("unsupportedControls", unsupported.names)
            if let mode { o.add("sensorMode", object: mode.json) }
            o.add("bufferBytes", bufferBytes)
            print(o.text)
            return
        }
        var line = "\(frames) frames (\(startup) start-up), \(dropped) dropped, \(errors) with errors"
        if let span { line += ", over \(span.millisecondsDescription)" }
        print(line)
        if !unsupported.isEmpty {
            print("\(camera) does not support \(unsupported.description): those settings were not applied")
        }
        guard !target.isEmpty else { return }
        if let s = syncFrame {
            var l = "requested settings first carried by frame \(s.sequence)"
            if let t = s.sensorTimestamp { l += " (t=\(t))" }
            if let p = pairedFrame { l += ", \(Int(s.sequence) - Int(p)) frames after the request's own frame \(p)" }
            print(l)
        } else if unsupported.isEmpty {
            print("no frame carried the requested settings within \(frames) frames")
        }
    }

    private func changes(from a: Compared?, to b: FrameMetadata) -> [String] {
        // Nothing to compare (vimc reports none of these): no array.
        guard let a, a.exposureTime != nil || a.analogueGain != nil || a.frameDuration != nil || a.lensPosition != nil || a.colourGains != nil else { return [] }
        var out: [String] = []
        if let x = a.exposureTime, let y = b.exposureTime, x != y { out.append("exposure") }
        if let x = a.analogueGain, let y = b.analogueGain, x != y { out.append("gain") }
        if let x = a.frameDuration, let y = b.frameDuration, x != y { out.append("frame duration") }
        if let x = a.lensPosition, let y = b.lensPosition, x != y { out.append("lens") }
        if let x = a.colourGains, let y = b.colourGains, x != y { out.append("colour gains") }
        return out
    }

    /// Writes a line to standard output through C stdio: `print` takes `Any...` and casts each
    /// item at run time, which costs more than the rest of a frame's line on a small board.
    private func emit(_ line: String) {
        _ = line.withCString { sbshim_stdout_line($0) }
    }
}
