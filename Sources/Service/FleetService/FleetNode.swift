import Fleet
import MQTT
import ShutterbugCore

/// What a fleet node asks of the service it speaks for: its state, its jobs, and the commands
/// carried out (the service's capture, its jobs' pause/resume/stop, a reload).
public protocol FleetNodeService: Sendable {
    /// The retained state document: camera, streaming, newest frame, disk, jobs, clock.
    func fleetState() async -> JSONValue
    /// The names of the jobs now running or paused (a switch each in Home Assistant).
    func fleetJobs() async -> [String]
    /// Carries out a command; its result goes back to the sender.
    func perform(_ command: FleetCommand) async throws -> JSONValue
}

/// One node of a fleet on MQTT: answers commands sent to it (and to the fleet, or to a group it
/// is in), each id carried out once; keeps its state and Home Assistant's discovery configs
/// retained on the broker, again whenever Home Assistant says it started; removes a job's
/// switch when the job goes.
///
/// Replies go to the command's MQTT 5 response topic with its correlation data, else to the
/// node's `event/response` topic:
///
///     {"id": "c-17", "ok": true, "result": {...}}
///     {"id": "c-17", "ok": false, "error": "'ev' must be a list of 1 to 32 numbers, each in -8...8"}
///     {"id": "c-17", "ok": true, "repeat": true}      (a second delivery: not carried out again)
public actor FleetNode {
    public let client: MQTTClient
    public let topics: FleetTopics
    public let groups: Set<String>
    let discovery: HomeAssistantDiscovery?
    let service: any FleetNodeService
    var ledger = CommandLedger()
    var discoveredJobs: [String] = []
    /// Where a refused or ignored command is said, once each (the service's log).
    let log: @Sendable (String) -> Void

    /// What the node has seen, for its status and tests.
    public struct Counts: Sendable, Hashable {
        public var performed = 0
        public var repeats = 0
        public var refused = 0
        /// Commands left retained on the broker: never carried out (they would run again on
        /// every reconnection).
        public var retainedIgnored = 0
        public var notForThisNode = 0
        /// Messages the client dropped unread (its inbox full): commands that got no answer.
        public var droppedUnread = 0
        /// Commands refused because `maxInFlight` were being carried out.
        public var busy = 0
    }
    public private(set) var counts = Counts()

    public init(client: MQTTClient, topics: FleetTopics, groups: Set<String> = [], discovery: HomeAssistantDiscovery?, service: any FleetNodeService,
                log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.log = log
        self.client = client
        self.topics = topics
        self.groups = groups
        self.discovery = discovery
        self.service = service
        client.subscribe(topics.commands, qos: 1)
        client.subscribe(topics.fleetCommands, qos: 1)
        if discovery != nil { client.subscribe(topics.homeAssistantStatus, qos: 1) }
    }

    /// Takes commands until the client stops. The node is "online" (retained) from here, and
    /// "offline" through the client's last will when it goes away without a goodbye.
    public func run() async {
        client.publish(topics.availability, Array("online".utf8), qos: 1, retain: true)
        await publishState()
        await publishDiscovery()
        for await m in client.messages {
            noteDropped()
            await handle(m)
        }
    }

    /// Says (once per new loss) that messages were dropped unread because the node fell behind:
    /// a command among them was never answered, and its sender should know why.
    private func noteDropped() {
        let dropped = client.inboxDropped
        guard dropped > counts.droppedUnread else { return }
        log("MQTT: \(dropped - counts.droppedUnread) message\(dropped - counts.droppedUnread == 1 ? "" : "s") dropped unread (\(dropped) in all): commands came faster than the node carries them out and its inbox was full; commands among them got no answer")
        counts.droppedUnread = dropped
    }

    /// Publishes the state document again (retained), after anything it shows changed.
    public func publishState() async {
        client.publish(topics.state, Array(await stateDocument().encoded.utf8), qos: 1, retain: true)
    }

    /// The service's state with the node's groups (what `fleet status` lists).
    public func stateDocument() async -> JSONValue {
        var state = await service.fleetState()
        if case .object(var o) = state {
            o["groups"] = .array(groups.sorted().map(JSONValue.string))
            o["node"] = .string(topics.node)
            state = .object(o)
        }
        return state
    }

    /// Publishes every discovery config (retained), and an empty one for each job gone since
    /// the last time, which removes its switch.
    public func publishDiscovery() async {
        guard let discovery else { return }
        let jobs = await service.fleetJobs()
        for config in discovery.configs(jobs: jobs) {
            client.publish(config.topic, Array(JSONValue.object(config.payload).encoded.utf8), qos: 1, retain: true)
        }
        for gone in discovery.removals(before: discoveredJobs, now: jobs) { client.clearRetained(gone) }
        discoveredJobs = jobs
    }

    /// Removes the node's discovery configs (Home Assistant drops the device) and its
    /// availability: the node is going away for good under this name.
    public func forget() {
        if let discovery {
            for config in discovery.configs(jobs: discoveredJobs) { client.clearRetained(config.topic) }
        }
        client.clearRetained(topics.availability)
        discoveredJobs = []
    }

    func handle(_ m: MQTTMessage) async {
        if m.topic == topics.homeAssistantStatus {
            if m.payload == Array("online".utf8) { await publishDiscovery() }
            return
        }
        guard m.topic == topics.commands || m.topic == topics.fleetCommands else { return }
        if m.retained {
            counts.retainedIgnored += 1
            log("MQTT: a command left retained on \(m.topic) is not carried out (clear it: mosquitto_pub -r -n -t \(m.topic))")
            return
        }
        let command: FleetCommand
        do {
            command = try FleetCommand.decode(m.payload)
        } catch {
            counts.refused += 1
            log("MQTT: a command on \(m.topic) was refused: \(error)")
            reply(to: m, id: nil, .object(["ok": .bool(false), "error": .string("\(error)")]))
            return
        }
        if let group = command.group, !groups.contains(group) {
            counts.notForThisNode += 1
            return
        }
        if let id = command.id, ledger.contains(id) {
            counts.repeats += 1
            reply(to: m, id: id, .object(["ok": .bool(true), "repeat": .bool(true)]))
            return
        }
        // Carried out beside the next commands: a capture waiting for its instant does not hold
        // up a status, a pause, or the next capture (whose instant may come a second later).
        // Past `maxInFlight` at once, a command is answered at once as refused (the loop that
        // reads commands never waits on one: the 33rd capture scheduled ahead once stopped the
        // node answering anything), and not remembered: sent again later, it is carried out.
        guard inFlight < Self.maxInFlight else {
            counts.refused += 1
            counts.busy += 1
            let why = "busy: \(Self.maxInFlight) commands are being carried out (captures waiting for their instants among them); this one was not, send it again once one is done"
            log("MQTT: command \(command.id ?? "without an id") refused: \(why)")
            reply(to: m, id: command.id, .object(["ok": .bool(false), "busy": .bool(true), "error": .string(why)]))
            return
        }
        if let id = command.id { _ = ledger.first(id) }
        inFlight += 1
        Task {
            await self.carryOut(command, m)
            self.finished()
        }
    }

    /// Commands carried out at once, at most.
    public static let maxInFlight = 32
    var inFlight = 0
    func finished() { inFlight -= 1 }

    func carryOut(_ command: FleetCommand, _ m: MQTTMessage) async {
        do {
            let result = try await service.perform(command)
            counts.performed += 1
            reply(to: m, id: command.id, .object(["ok": .bool(true), "result": result]))
        } catch {
            counts.refused += 1
            let message = (error as? ShutterbugError)?.message ?? "\(error)"
            log("MQTT: command \(command.id ?? "without an id") not carried out: \(message)")
            reply(to: m, id: command.id, .object(["ok": .bool(false), "error": .string(message)]))
        }
        await publishState()
        if case .reload = command.action { await publishDiscovery() }
    }

    func reply(to m: MQTTMessage, id: String?, _ body: JSONValue) {
        var payload = body
        if case .object(var o) = body {
            o["node"] = .string(topics.node)
            if let id { o["id"] = .string(id) }
            payload = .object(o)
        }
        client.publish(m.responseTopic ?? topics.event("response"), Array(payload.encoded.utf8), qos: 1, correlationData: m.correlationData)
    }
}
