/// A JSON object written one key at a time, keys in insertion order, for `--json` output (one
/// object per line) and the sidecar files.
public struct JSONObject: Sendable {
    public init() {}
    private var parts: [String] = []

    public mutating func add(_ key: String, _ value: String?) {
        parts.append("\(quote(key)):\(value.map(quote) ?? "null")")
    }
    public mutating func add(_ key: String, _ value: Int?) {
        add(key, value.map(Int64.init))
    }
    /// An integer; one beyond ±2^53, which JSON readers hold as a double and round, is written
    /// as a string of its digits instead.
    public mutating func add(_ key: String, _ value: Int64?) {
        parts.append("\(quote(key)):\(value.map { $0.magnitude > Self.exactIntegerLimit ? quote(String($0)) : String($0) } ?? "null")")
    }
    /// An integer that may exceed 2^53 (wall-clock nanoseconds), always as a string of digits
    /// so its type does not depend on its value.
    public mutating func add(_ key: String, digits value: Int64?) {
        parts.append("\(quote(key)):\(value.map { quote(String($0)) } ?? "null")")
    }
    /// The largest integer every JSON reader holds exactly (IEEE double).
    public static let exactIntegerLimit: UInt64 = 1 << 53
    public mutating func add(_ key: String, _ value: Double?) {
        parts.append("\(quote(key)):\(value.map(number) ?? "null")")
    }
    public mutating func add(_ key: String, _ value: Bool) {
        parts.append("\(quote(key)):\(value)")
    }
    public mutating func add(_ key: String, _ values: [String]) {
        parts.append("\(quote(key)):[\(values.map(quote).joined(separator: ","))]")
    }
    public mutating func add(_ key: String, numbers: [Double]) {
        parts.append("\(quote(key)):[\(numbers.map(number).joined(separator: ","))]")
    }
    public mutating func add(_ key: String, object: JSONObject) {
        parts.append("\(quote(key)):\(object.text)")
    }
    public mutating func add(_ key: String, objects: [JSONObject]) {
        parts.append("\(quote(key)):[\(objects.map(\.text).joined(separator: ","))]")
    }

    /// The members of an encoded JSON object (a Codable report's `JSONEncoder` text), in its
    /// order, after those added so far: a command adds its own keys to a shared report.
    public mutating func add(membersOf encoded: String) {
        var inner = Substring(encoded)
        while let f = inner.first, f == " " || f == "\n" { inner = inner.dropFirst() }
        while let l = inner.last, l == " " || l == "\n" { inner = inner.dropLast() }
        guard inner.first == "{", inner.last == "}" else { return }
        inner = inner.dropFirst().dropLast()
        if !inner.isEmpty { parts.append(String(inner)) }
    }

    public var text: String { "{" + parts.joined(separator: ",") + "}" }

    private func number(_ v: Double) -> String {
        guard v.isFinite else { return "null" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }

    private func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}

extension JSONObject {
    /// What the camera reports of a frame beyond exposure and gain, where it does: the colour
    /// correction matrix, black levels, sensor temperature, focus figure of merit, AF state and
    /// wall clock. Absent fields are left out (a camera that does not report them).
    public mutating func addReportedExtras(_ m: FrameMetadata) {
        if let v = m.colourCorrectionMatrix { add("colourCorrectionMatrix", numbers: v) }
        if let v = m.sensorBlackLevels { add("sensorBlackLevels", numbers: v.map(Double.init)) }
        if let v = m.sensorTemperature { add("sensorTemperatureC", v) }
        if let v = m.focusFoM { add("focusFoM", v) }
        if let v = m.afState { add("afState", v.description) }
        if let v = m.wallClock {
            add("wallClockNs", digits: v.nanoseconds)
            add("wallClockUTC", v.description)
        }
    }
}
