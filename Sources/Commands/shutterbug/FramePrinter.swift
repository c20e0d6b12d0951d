import CSystemShims
import Capture
import ShutterbugCore

/// Prints one line (or JSON object) per frame, noting what changed and where frames were lost,
/// and a summary naming the first frame that carries the requested settings.
struct FramePrinter: Sendable {
    let json: Bool
    let tolerance: Duration
    private var previous: FrameMetadata?
    private var frames = 0
    private var dropped = 0
    private var errors = 0
    private var startup = 0
    private var pairedFrame: UInt32?
    private var syncFrame: FrameMetadata?
    private var firstTimestamp: SensorTime?
    private var lastTimestamp: SensorTime?

    private var pairedRequest: UInt64?
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
            var line = ""
            line.reserveCapacity(160)
            line += "#"
            pad(String(m.sequence), 5, into: &line)
            line += "  t="
            line += m.sensorTimestamp?.description ?? "-"
            line += "  exp "
            pad(m.exposureTime.map { "\(Int($0.microsecondsValue.rounded())) µs" } ?? "-", 10, into: &line)
            line += "  gain "
            line += m.analogueGain.map { String(format2: $0.value) } ?? "-"
            line += "×"
            line += m.digitalGain.map { String(format2: $0.value) } ?? "-"
            line += "  fd "
            pad(m.frameDuration?.millisecondsDescription ?? "-", 10, into: &line)
            if let l = m.lensPosition { line += "  lens "; line += String(format2: l.value); line += " dpt" }
            if c.status != .complete { line += "  [\(c.status)]" }
            if gap > 0 { line += "  (\(gap) dropped)" }
            if !changed.isEmpty { line += "  changed: "; line += changed.joined(separator: ", ") }
            if c.carriedControlsFor != nil, pairedFrame == m.sequence { line += "  <- request #\(c.request) with the new settings" }
            if let s = syncFrame, s.sequence == m.sequence, !target.isEmpty { line += "  <- first frame carrying them" }
            emit(line)
        }
        previous = m
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

    private func changes(from a: FrameMetadata?, to b: FrameMetadata) -> [String] {
        guard let a else { return [] }
        var out: [String] = []
        if let x = a.exposureTime, let y = b.exposureTime, x != y { out.append("exposure") }
        if let x = a.analogueGain, let y = b.analogueGain, x != y { out.append("gain") }
        if let x = a.frameDuration, let y = b.frameDuration, x != y { out.append("frame duration") }
        if let x = a.lensPosition, let y = b.lensPosition, x != y { out.append("lens") }
        if let x = a.colourGains, let y = b.colourGains, x != y { out.append("colour gains") }
        return out
    }

    /// Appends `s` right-aligned in `width` columns.
    private func pad(_ s: String, _ width: Int, into line: inout String) {
        let n = s.count
        if n < width { for _ in n..<width { line += " " } }
        line += s
    }

    /// Writes a line to standard output through C stdio: `print` takes `Any...` and casts each
    /// item at run time, which costs more than the rest of a frame's line on a small board.
    private func emit(_ line: String) {
        _ = line.withCString { sbshim_stdout_line($0) }
    }
}
