import Fleet
import Foundation
import Logging
import MQTT
import Server
import ShutterbugCore
import Synchronization

/// The service's MQTT settings (`mqtt:` in serve.yaml, `--mqtt-*` on the command line). The
/// password is read from its file; it is never shown.
public struct MQTTSettings: Sendable, Hashable {
    public var url: String
    public var clientID: String?
    public var username: String?
    public var passwordFile: String?
    public var tls: MQTTOptions.TLS?
    public var topicPrefix: String = "shutterbug"
    /// The node's name in topics and in Home Assistant (default: the host's name).
    public var node: String?
    public var groups: Set<String> = []
    /// Home Assistant's discovery prefix; nil: no discovery.
    public var discoveryPrefix: String? = "homeassistant"
    public var requireClockSync = true
    public var maxClockError: Duration?
    /// How often the state is published while it changes (at once after a capture or a slot).
    public var statePeriod: Duration = .seconds(10)

    public init(url: String) { self.url = url }

    /// The host's name as a node name: the characters Home Assistant takes, the rest as `-`.
    public static func defaultNode() -> String {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "camera"
        let name = String(host.prefix(64).map { FleetTopics.idCharacters.contains($0) ? $0 : "-" })
        return name.isEmpty ? "camera" : name
    }

    /// The client's options and the node's topics.
    ///
    /// - Throws: `.invalidArgument` naming what is wrong (the URL, the node's name, a prefix,
    ///   a password file that cannot be read).
    public func resolved() throws -> (MQTTOptions, FleetTopics) {
        let (host, port, secure) = try MQTTOptions.endpoint(url)
        let topics = try FleetTopics(prefix: topicPrefix, node: node ?? Self.defaultNode(), discoveryPrefix: discoveryPrefix ?? "homeassistant")
        var password: String?
        if let passwordFile {
            guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                throw ShutterbugError(.invalidArgument, "mqtt password-file \(passwordFile): cannot read it")
            }
            password = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        var o = MQTTOptions(host: host, port: port, clientID: clientID ?? "shutterbug-\(topics.node)", username: username, password: password,
                            will: (topics.availability, Array("offline".utf8)))
        o.tls = tls ?? (secure ? MQTTOptions.TLS() : nil)
        return (o, topics)
    }

    /// The settings as words for the effective configuration: no password, only its file.
    public var description: String {
        var words = ["url \(url)", "topic-prefix \(topicPrefix)", "node \(node ?? Self.defaultNode())"]
        if let username { words.append("username \(username)") }
        if let passwordFile { words.append("password-file \(passwordFile)") }
        if tls != nil { words.append("tls") }
        return words.joined(separator: ", ")
    }
}

/// Something happened that the state shows.
final class Flag: Sendable {
    let value = Atomic<Bool>(true)
}

/// The service on MQTT: a fleet node answering commands, its state retained (at once after a
/// capture or a slot, and every `statePeriod` while it changes), its events published as they
/// happen, the newest frame as the camera entity's picture, Home Assistant's discovery. Nothing
/// here waits on the network: a broker that is down costs the camera nothing.
public final class FleetLink: Sendable {
    public let client: MQTTClient
    public let node: FleetNode
    public let topics: FleetTopics
    public let settings: MQTTSettings
    private let tasks = Mutex<[Task<Void, Never>]>([])
    private let dirty = Flag()

    public init(_ settings: MQTTSettings, service: CameraService, reload: (@Sendable () async throws -> CameraService.Reload)?, version: String,
                logger: Logger, clock: ClockSyncReader = ClockSyncReader()) throws {
        let (options, topics) = try settings.resolved()
        self.settings = settings
        self.topics = topics
        client = try MQTTClient(options)
        let camera = CameraNode(service: service, reload: reload, clock: clock, requireSync: settings.requireClockSync, maxClockError: settings.maxClockError)
        let discovery = settings.discoveryPrefix.map { _ in HomeAssistantDiscovery(topics: topics, model: service.camera.info.model, version: version) }
        node = FleetNode(client: client, topics: topics, groups: settings.groups, discovery: discovery, service: camera, log: { logger.warning("\($0)") })
        let (node, client, dirty) = (node, client, dirty)
        let period = settings.statePeriod
        let where_ = "\(options.host):\(options.port)"
        let events = service.events.subscribe()
        tasks.withLock {
            $0.append(Task { await node.run() })
            // The connection's changes, logged once each.
            $0.append(Task {
                for await up in client.connectionChanges {
                    if up { logger.notice("MQTT: connected to \(where_) as \(topics.node)") }
                    else { logger.warning("MQTT: the connection to \(where_) was lost; reconnecting with backoff (capture goes on)") }
                }
            })
            // Never connected after 15 s: said once (a wrong port, a broker down, TLS refused:
            // libmosquitto only retries), and capture goes on.
            $0.append(Task {
                try? await Task.sleep(for: .seconds(15))
                let s = client.status
                if !Task.isCancelled, s.connections == 0 {
                    logger.warning("MQTT: not connected to \(where_) after 15 s: \(s.problem ?? "no answer (is the broker up on that port? for mqtts://, is its certificate trusted?)"); retrying with backoff (capture goes on)")
                }
            })
            $0.append(Task {
                for await e in events {
                    Self.publish(e, client: client, topics: topics)
                    dirty.value.store(true, ordering: .relaxed)
                }
            })
            // The state when something happened (at most once a second), and every period
            // while it changes; the picture after each capture and every minute.
            $0.append(Task {
                var last = ""
                var lastAt = ContinuousClock.now - period
                var pictureAt = ContinuousClock.now - .seconds(60)
                var captures = -1.0
                while !Task.isCancelled {
                    let now = ContinuousClock.now
                    // Each second until the camera's first frame shows in it.
                    let early = last.isEmpty || last.contains(#""sequence":null"#)
                    if dirty.value.exchange(false, ordering: .relaxed) || now - lastAt >= period || early {
                        let state = await node.stateDocument()
                        let text = state.encoded
                        if text != last {
                            client.publish(topics.state, Array(text.utf8), qos: 1, retain: true)
                            last = text
                        }
                        lastAt = now
                        let taken = state["capturesTaken"]?.number ?? 0
                        if taken != captures || now - pictureAt >= .seconds(60) {
                            // Until the first frame there is none to show: tried again.
                            if let jpeg = try? await service.frameJPEG() {
                                client.publish(topics.picture, jpeg, qos: 0, retain: true)
                                captures = taken
                                pictureAt = now
                            }
                        }
                    }
                    try? await Task.sleep(for: .seconds(1))
                }
            })
        }
        if settings.discoveryPrefix == nil { logger.notice("MQTT: Home Assistant discovery is off") }
    }

    /// An event on the node's event topics (not retained): `event/capture` for every capture
    /// done or failed, `event/trigger` too for a trigger's, `event/slot` for a job's slot.
    static func publish(_ e: ServiceEvent, client: MQTTClient, topics: FleetTopics) {
        var kinds: [String] = []
        var body: [String: JSONValue] = ["node": .string(topics.node)]
        switch e {
        case .captured(var record):
            record.report = nil
            body["ok"] = .bool(true)
            body["capture"] = (try? JSONValue(encoding: record)) ?? .null
            kinds = record.trigger == nil ? ["capture"] : ["capture", "trigger"]
            if let t = record.trigger { body["trigger"] = .string(t) }
        case .captureFailed(let id, let trigger, let reason):
            body["ok"] = .bool(false)
            body["error"] = .string(reason)
            if let id { body["id"] = .string(id) }
            if let trigger { body["trigger"] = .string(trigger) }
            kinds = trigger == nil ? ["capture"] : ["capture", "trigger"]
        case .slot(let job, let slot):
            body["job"] = .string(job)
            body["slot"] = (try? JSONValue(encoding: slot)) ?? .null
            kinds = ["slot"]
        }
        let payload = Array(JSONValue.object(body).encoded.utf8)
        for k in kinds { client.publish(topics.event(k), payload, qos: 1) }
    }

    /// Stops: the tasks cancelled, "offline" through the last will (the broker publishes it),
    /// the network thread ended. `forget`: the node's retained messages are removed first (its
    /// state, picture, availability, and Home Assistant's device), as when it is renamed.
    public func stop(forget: Bool = false) async {
        for t in tasks.withLock({ $0 }) { t.cancel() }
        if forget {
            await node.forget()
            for topic in [topics.state, topics.picture] { client.clearRetained(topic) }
            await client.flush()
            client.stop()
            return
        }
        await client.flush()
        client.stop(sendingWill: true)
    }
}
