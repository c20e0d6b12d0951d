import Foundation
import ShutterbugCore

/// A node's MQTT topics: its retained state and availability, its events, its commands, its
/// newest picture; the fleet's command topic; Home Assistant's discovery topics.
public struct FleetTopics: Sendable, Hashable {
    public let prefix: String
    public let node: String
    public let discoveryPrefix: String

    /// - Throws: `.invalidArgument` for a node name Home Assistant would refuse as a node id
    ///   (1 to 64 of A-Z, a-z, 0-9, `_` and `-`), or a prefix with MQTT's wildcards.
    public init(prefix: String = "shutterbug", node: String, discoveryPrefix: String = "homeassistant") throws {
        guard (1...64).contains(node.count), node.allSatisfy(Self.idCharacters.contains) else {
            throw ShutterbugError(.invalidArgument, "the node name '\(node.prefix(80))' must be 1 to 64 of A-Z, a-z, 0-9, '_' and '-' (Home Assistant's node id)")
        }
        for (name, p) in [("topic prefix", prefix), ("discovery prefix", discoveryPrefix)] {
            guard !p.isEmpty, p.utf8.count <= 128, !p.contains(where: { "+#\0".contains($0) }), !p.hasPrefix("/"), !p.hasSuffix("/") else {
                throw ShutterbugError(.invalidArgument, "the \(name) '\(p.prefix(80))' must be 1 to 128 bytes without '+', '#' or a leading or trailing '/'")
            }
        }
        (self.prefix, self.node, self.discoveryPrefix) = (prefix, node, discoveryPrefix)
    }

    /// What Home Assistant takes in a node id or an object id.
    public static let idCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")

    public var base: String { "\(prefix)/\(node)" }
    /// Retained JSON: camera, streaming, the newest frame, disk, jobs, clock.
    public var state: String { base + "/state" }
    /// Retained "online", or "offline" (the last will).
    public var availability: String { base + "/availability" }
    /// Commands to this node.
    public var commands: String { base + "/cmd" }
    /// Commands to every node (or a group named in the payload).
    public var fleetCommands: String { prefix + "/fleet/cmd" }
    /// The newest photo or frame as JPEG bytes (Home Assistant's camera entity).
    public var picture: String { base + "/picture" }
    /// Events: capture, slot, trigger (not retained).
    public func event(_ kind: String) -> String { base + "/event/" + kind }
    /// Where Home Assistant says it started ("online"): publish discovery again then.
    public var homeAssistantStatus: String { discoveryPrefix + "/status" }
    public func discovery(_ component: String, _ object: String) -> String { "\(discoveryPrefix)/\(component)/\(node)/\(object)/config" }
}

/// Home Assistant's MQTT discovery for one camera node: one device, its camera entity, buttons,
/// sensors, a binary sensor and a switch per job, each a retained config on its discovery topic
/// pointing at the node's retained state and availability.
public struct HomeAssistantDiscovery: Sendable {
    public let topics: FleetTopics
    public var deviceName: String
    public var model: String
    public var version: String

    public init(topics: FleetTopics, deviceName: String? = nil, model: String, version: String) {
        self.topics = topics
        self.deviceName = deviceName ?? topics.node
        self.model = model
        self.version = version
    }

    /// One entity's config: its discovery topic and payload.
    public struct Config: Sendable, Hashable {
        public var component: String
        public var object: String
        public var topic: String
        public var payload: [String: JSONValue]
    }

    /// A job's switch's object id: the job's name with anything but A-Z, a-z, 0-9, `_` and `-`
    /// as `_`.
    public static func jobObject(_ job: String) -> String {
        "job_" + String(job.prefix(48).map { FleetTopics.idCharacters.contains($0) ? $0 : "_" })
    }

    /// Every entity's config for a node running `jobs`.
    public func configs(jobs: [String]) -> [Config] {
        var out: [Config] = [
            entity("camera", "picture", ["name": "Picture", "topic": .string(topics.picture)], state: false),
            entity("button", "photo", ["name": "Take photo", "command_topic": .string(topics.commands),
                                       "payload_press": .string(#"{"command":"capture"}"#), "icon": "mdi:camera"], state: false),
            entity("button", "bracket", ["name": "Take bracket", "command_topic": .string(topics.commands),
                                         "payload_press": .string(#"{"command":"capture","ev":[-1,0,1]}"#), "icon": "mdi:camera-burst"], state: false),
            // A value the state may not have (no frame yet, no job, no chrony) is `none`, which
            // Home Assistant shows as unknown, instead of a template error.
            sensor("lux", "Light level", template: Self.number("value_json.frame", "lux"), deviceClass: "illuminance", unit: "lx"),
            sensor("exposure", "Exposure", template: Self.number("value_json.frame", "exposureUs", scale: "/ 1000"), deviceClass: "duration", unit: "ms"),
            sensor("gain", "Analogue gain", template: Self.number("value_json.frame", "gain"), deviceClass: nil, unit: nil),
            sensor("sensor_temperature", "Sensor temperature", template: Self.number("value_json.frame", "sensorTemperature"), deviceClass: "temperature", unit: "°C"),
            sensor("disk_free", "Disk free", template: Self.number("value_json.disk", "freeBytes"), deviceClass: "data_size", unit: "B"),
            sensor("captures", "Captures", template: "value_json.capturesTaken", deviceClass: nil, unit: nil, stateClass: "total_increasing"),
            sensor("slot_error", "Slot error", template: Self.number("value_json", "lastSlotErrorUs", scale: "/ 1000"), deviceClass: "duration", unit: "ms"),
            sensor("clock_error", "Clock error bound", template: Self.number("value_json.clock", "errorBoundNs", scale: "/ 1000000"), deviceClass: "duration", unit: "ms"),
            entity("binary_sensor", "streaming", ["name": "Streaming", "device_class": "running",
                                                  "value_template": "{{ 'ON' if value_json.streaming else 'OFF' }}"], state: true),
        ]
        for job in jobs {
            let name = JSONValue.string(job).encoded
            out.append(entity("switch", Self.jobObject(job), [
                "name": .string("Job \(job)"), "command_topic": .string(topics.commands),
                "payload_on": .string(JSONValue.object(["command": "resume", "job": .string(job)]).encoded),
                "payload_off": .string(JSONValue.object(["command": "pause", "job": .string(job)]).encoded),
                "value_template": .string("{{ 'ON' if value_json.jobs.get(\(name)) == 'running' else 'OFF' }}"),
                "state_on": "ON", "state_off": "OFF", "icon": "mdi:timelapse",
            ], state: true))
        }
        return out
    }

    /// The discovery topics of jobs no longer on the node: an empty retained payload on each
    /// removes its switch from Home Assistant.
    public func removals(before: [String], now: [String]) -> [String] {
        let kept = Set(now.map(Self.jobObject))
        return Set(before.map(Self.jobObject)).subtracting(kept).sorted().map { topics.discovery("switch", $0) }
    }

    /// A Jinja expression for `object.key`, scaled and rounded, or `none` where `object` is
    /// absent or null or its key is not a number.
    static func number(_ object: String, _ key: String, scale: String? = nil) -> String {
        let value = "\(object).\(key)"
        let guarded = object == "value_json" ? "\(value) is number" : "\(object) is mapping and \(value) is number"
        return "((\(value) \(scale ?? "")) | round(3)) if \(guarded) else none"
    }

    func sensor(_ object: String, _ name: String, template: String, deviceClass: String?, unit: String?, stateClass: String = "measurement") -> Config {
        var p: [String: JSONValue] = ["name": .string(name), "value_template": .string("{{ \(template) }}"), "state_class": .string(stateClass)]
        if let deviceClass { p["device_class"] = .string(deviceClass) }
        if let unit { p["unit_of_measurement"] = .string(unit) }
        return entity("sensor", object, p, state: true)
    }

    func entity(_ component: String, _ object: String, _ fields: [String: JSONValue], state: Bool) -> Config {
        var p = fields
        p["unique_id"] = .string("shutterbug_\(topics.node)_\(object)")
        p["object_id"] = .string("\(topics.node)_\(object)")
        p["availability_topic"] = .string(topics.availability)
        p["payload_available"] = "online"
        p["payload_not_available"] = "offline"
        if state { p["state_topic"] = .string(topics.state) }
        p["device"] = .object(["identifiers": .array([.string("shutterbug_\(topics.node)")]), "name": .string(deviceName),
                               "manufacturer": "Shutterbug", "model": .string(model), "sw_version": .string(version)])
        p["origin"] = .object(["name": "Shutterbug", "sw_version": .string(version)])
        return Config(component: component, object: object, topic: topics.discovery(component, object), payload: p)
    }
}

/// A JSON value, encoded with its keys sorted, so that a retained config is byte for byte the
/// same each time it is published.
public indirect enum JSONValue: Sendable, Hashable, Codable, ExpressibleByStringLiteral {
    case string(String)
    case number(Double)
    /// A whole number kept exact (nanoseconds since the epoch do not fit a double's 53 bits).
    case integer(Int64)
    case bool(Bool)
    case array([JSONValue])
    case object([String: JSONValue])
    case null

    public init(stringLiteral value: String) { self = .string(value) }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .number(let d): if d.isFinite { try c.encode(d) } else { try c.encodeNil() }
        case .integer(let i): try c.encode(i)
        case .bool(let b): try c.encode(b)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        case .null: try c.encodeNil()
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int64.self) { self = .integer(i) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    /// A Codable value as JSON (a report, a status), to be put in a reply or a state document.
    public init(encoding value: some Encodable) throws {
        self = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value))
    }

    /// A number's value (nil for anything else).
    public var number: Double? {
        switch self {
        case .number(let d): return d
        case .integer(let i): return Double(i)
        default: return nil
        }
    }

    /// The value at `key` of an object (nil for anything else).
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    /// The JSON text, keys sorted, slashes as they are.
    public var encoded: String {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? e.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
    }
}
