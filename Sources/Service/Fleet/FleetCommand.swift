import Foundation
import ShutterbugCore

/// A command a node takes over MQTT, decoded from its JSON payload: what to do, and the id
/// that makes a second delivery of the same message (QoS 1) a repeat, not a second capture. A
/// command without an id is carried out each time it comes: what a sender at QoS 0 sends (Home
/// Assistant's buttons publish the same payload for every press).
///
///     {"id": "c-17", "command": "capture", "at": "2026-11-26T18:00:00.000Z", "ev": [-1, 0, 1]}
///     {"id": "j-3", "command": "pause", "job": "roof"}
public struct FleetCommand: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        /// A photo, or a bracket (EV biases or manual exposures), now or at a wall instant.
        case capture(at: WallClockTime?, ev: [Double]?, exposuresUs: [Double]?, gain: Double?)
        case pause(job: String)
        case resume(job: String)
        case stop(job: String)
        case reload
        /// Publish the state again (a coordinator's `fleet status`).
        case status
    }

    public var id: String?
    public var action: Action
    /// Only the nodes in this group take it (a fleet command); nil: every node.
    public var group: String?

    public init(id: String?, action: Action, group: String?) {
        (self.id, self.action, self.group) = (id, action, group)
    }

    /// The largest payload taken; a larger one is refused before it is parsed.
    public static let maxPayload = 16 * 1024

    /// The payload's fields as sent.
    struct Wire: Decodable {
        var id: String?
        var command: String?
        var group: String?
        var at: String?
        var ev: [Double]?
        var exposuresUs: [Double]?
        var gain: Double?
        var job: String?
    }

    static let fields: Set<String> = ["id", "command", "group", "at", "ev", "exposuresUs", "gain", "job"]
    static let accepted: [String: String] = [
        "id": "a string of 1 to 128 bytes naming the command (a repeat of an id is not carried out twice)",
        "command": "one of capture, pause, resume, stop, reload, status",
        "group": "a name of 1 to 64 bytes", "at": "an ISO 8601 instant in UTC, e.g. 2026-11-26T18:00:00.000Z",
        "ev": "a list of 1 to 32 numbers, each in -8...8", "exposuresUs": "a list of 1 to 32 numbers, each in 1...3600000000",
        "gain": "a number in 1...64", "job": "the name of a job on the node, 1 to 64 bytes",
    ]

    static func refuse(_ field: String) -> ShutterbugError {
        ShutterbugError(.invalidArgument, "'\(field)' must be \(accepted[field] ?? "as documented")")
    }

    /// Decodes a payload.
    ///
    /// - Throws: `.invalidArgument` naming the field and what it accepts.
    public static func decode(_ payload: [UInt8]) throws -> FleetCommand {
        guard payload.count <= maxPayload else {
            throw ShutterbugError(.invalidArgument, "the command is \(payload.count) bytes, more than the \(maxPayload) accepted")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else {
            throw ShutterbugError(.invalidArgument, "the command is not a JSON object")
        }
        if let unknown = object.keys.filter({ !fields.contains($0) }).sorted().first {
            throw ShutterbugError(.invalidArgument, "'\(unknown.prefix(40))' is not a command field (accepted: \(fields.sorted().joined(separator: ", ")))")
        }
        let w: Wire
        do {
            w = try JSONDecoder().decode(Wire.self, from: Data(payload))
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context), let DecodingError.dataCorrupted(context) {
            throw refuse(context.codingPath.first?.stringValue ?? "command")
        } catch {
            throw ShutterbugError(.invalidArgument, "the command could not be read: \(error)")
        }
        if let id = w.id, !(1...128).contains(id.utf8.count) { throw refuse("id") }
        if let g = w.group, !(1...64).contains(g.utf8.count) { throw refuse("group") }
        func job() throws -> String {
            guard let j = w.job, (1...64).contains(j.utf8.count) else {
                throw ShutterbugError(.invalidArgument, "'\(w.command ?? "")' needs 'job', \(accepted["job"]!)")
            }
            return j
        }
        func list(_ values: [Double]?, _ name: String, _ range: ClosedRange<Double>) throws -> [Double]? {
            guard let values else { return nil }
            guard (1...32).contains(values.count), values.allSatisfy({ $0.isFinite && range.contains($0) }) else { throw refuse(name) }
            return values
        }
        let action: Action
        switch w.command {
        case "capture":
            var at: WallClockTime?
            if let text = w.at {
                guard let t = Self.instant(text) else { throw refuse("at") }
                at = t
            }
            let ev = try list(w.ev, "ev", -8...8)
            let exposures = try list(w.exposuresUs, "exposuresUs", 1...3_600_000_000)
            if ev != nil, exposures != nil { throw ShutterbugError(.invalidArgument, "give 'ev' or 'exposuresUs', not both") }
            if let g = w.gain, !(g.isFinite && (1...64).contains(g)) { throw refuse("gain") }
            action = .capture(at: at, ev: ev, exposuresUs: exposures, gain: w.gain)
        case "pause": action = .pause(job: try job())
        case "resume": action = .resume(job: try job())
        case "stop": action = .stop(job: try job())
        case "reload": action = .reload
        case "status": action = .status
        case nil: throw refuse("command")
        case let other?:
            throw ShutterbugError(.invalidArgument, "'\(other.prefix(40))' is not a command (accepted: capture, pause, resume, stop, reload, status)")
        }
        return FleetCommand(id: w.id, action: action, group: w.group)
    }

    /// An ISO 8601 instant with a zone (`Z` or an offset), with or without fractional seconds,
    /// to the nanosecond (the fraction is read as digits, not through a `Date`'s double).
    public static func instant(_ text: String) -> WallClockTime? {
        guard text.utf8.count <= 64 else { return nil }
        var base = text
        var fraction: Int64 = 0
        if let dot = text.firstIndex(of: ".") {
            guard let zone = text[dot...].firstIndex(where: { $0 == "Z" || $0 == "+" || $0 == "-" }) else { return nil }
            let digits = text[text.index(after: dot)..<zone]
            guard (1...9).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let ns = Int64(digits + String(repeating: "0", count: 9 - digits.count)) else { return nil }
            fraction = ns
            base = String(text[..<dot] + text[zone...])
        }
        guard let date = ISO8601DateFormatter().date(from: base) else { return nil }
        let seconds = date.timeIntervalSince1970.rounded()
        guard seconds.isFinite, abs(seconds) < 9e9 else { return nil }
        return WallClockTime(nanoseconds: Int64(seconds) * 1_000_000_000 + fraction)
    }
}

/// The ids of the commands a node has carried out, so that a message delivered twice (MQTT's
/// QoS 1 may) is answered again but not carried out again. Bounded: the oldest ids are
/// forgotten past `capacity`.
public struct CommandLedger: Sendable {
    public let capacity: Int
    private var order: [String] = []
    private var seen: Set<String> = []

    public init(capacity: Int = 1024) { self.capacity = max(1, capacity) }

    /// True the first time `id` is seen (carry it out), false for a repeat.
    public mutating func first(_ id: String) -> Bool {
        guard seen.insert(id).inserted else { return false }
        order.append(id)
        if order.count > capacity {
            let drop = order.count - capacity
            for old in order.prefix(drop) { seen.remove(old) }
            order.removeFirst(drop)
        }
        return true
    }

    public var count: Int { order.count }

    /// Whether `id` was seen (and is still remembered).
    public func contains(_ id: String) -> Bool { seen.contains(id) }
}
