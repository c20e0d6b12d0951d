import Foundation

/// What an interrupted slot's sidecar says of its files, to decide on resume whether the slot
/// was taken whole (issue 49: a slot killed between its steps was adopted as taken).
enum SlotFiles {
    /// The parts of a capture's sidecar (ImageOutput's `Sidecar`) that say what was written.
    private struct Sidecar: Decodable {
        struct Step: Decodable {
            struct File: Decodable { var path: String }
            var step: Int
            var files: [File]?
        }
        struct Incomplete: Decodable {
            var missingSteps: [Int]?
            var error: String?
        }
        var steps: [Step]?
        var incomplete: Incomplete?
    }

    /// A path's last component: a sidecar lists its files relative to its own folder.
    static func name(_ path: String) -> String { String(path.split(separator: "/").last ?? Substring(path)) }

    /// Whether `sidecar` (its bytes; nil when there is none) is a finished capture's, every step
    /// it lists has all its files among `present` (names), and none is missing; otherwise what
    /// is missing, in words.
    static func check(sidecar: [UInt8]?, present: Set<String>) -> (whole: Bool, missing: String) {
        guard let bytes = sidecar else { return (false, "no sidecar: no step is known to be whole") }
        guard let s = try? JSONDecoder().decode(Sidecar.self, from: Data(bytes)) else { return (false, "its sidecar cannot be read") }
        var missing = Set(s.incomplete?.missingSteps ?? [])
        for step in s.steps ?? [] where !(step.files ?? []).allSatisfy({ present.contains(name($0.path)) }) {
            missing.insert(step.step)
        }
        if missing.isEmpty, s.incomplete == nil, !(s.steps ?? []).isEmpty { return (true, "") }
        if missing.isEmpty { return (false, s.incomplete?.error ?? "its sidecar lists no step") }
        let list = missing.sorted().map(String.init).joined(separator: ", ")
        return (false, "step\(missing.count == 1 ? "" : "s") \(list) missing")
    }
}
