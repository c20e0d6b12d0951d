import Fleet
import FleetService
import Foundation
import MQTT
import ShutterbugCore
import TestSupport
import Testing

/// The service a node speaks for, as seen from the fleet: it records what it was asked.
actor RecordingService: FleetNodeService {
    var jobs = ["roof", "side"]
    var performed: [FleetCommand] = []

    func setJobs(_ j: [String]) { jobs = j }
    func fleetState() async -> JSONValue { .object(["streaming": .bool(true), "jobs": .object(Dictionary(uniqueKeysWithValues: jobs.map { ($0, JSONValue.string("running")) }))]) }
    func fleetJobs() async -> [String] { jobs }
    func perform(_ command: FleetCommand) async throws -> JSONValue {
        performed.append(command)
        if case .stop(let job) = command.action, !jobs.contains(job) { throw ShutterbugError(.invalidArgument, "no job '\(job)'") }
        return .object(["done": .bool(true)])
    }
}

/// A service whose commands wait until released (captures waiting for their instants).
actor GatedService: FleetNodeService {
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private(set) var started = 0
    private var open = true
    func hold() { open = false }
    func fleetState() async -> JSONValue { .object(["streaming": .bool(true)]) }
    func fleetJobs() async -> [String] { [] }
    func perform(_ command: FleetCommand) async throws -> JSONValue {
        started += 1
        if !open { await withCheckedContinuation { waiting.append($0) } }
        return .object(["done": .bool(true)])
    }
    func release() {
        open = true
        for w in waiting { w.resume() }
        waiting = []
    }
}

@Suite("A fleet node on a real Mosquitto broker: commands once, replies, groups, retained commands, Home Assistant discovery", .serialized, .timeLimit(.minutes(2)))
struct FleetNodeTests {
    @Test("past 32 commands in flight (captures waiting for their instants) the next is answered at once as busy, not waited on: the node keeps answering, and the refused id is carried out when sent again")
    func busyNodeAnswers() async throws {
        let broker = try Broker()
        try await broker.start()
        let topics = try FleetTopics(node: "pi-b")
        let service = GatedService()
        let client = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "pi-b"))
        defer { client.stop() }
        let node = FleetNode(client: client, topics: topics, groups: [], discovery: nil, service: service)
        let running = Task { await node.run() }
        defer { running.cancel() }
        let coordinator = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "coordinator-b"))
        defer { coordinator.stop() }
        let inbox = Inbox.of(coordinator)
        coordinator.subscribe("busy-test/replies")
        try await withDeadline(.seconds(20), "both connections") {
            while !(client.status.connected && coordinator.status.connected) { try await Task.sleep(for: .milliseconds(20)) }
        }
        func send(_ id: String) {
            coordinator.publish(topics.commands, Array(#"{"id": "\#(id)", "command": "status"}"#.utf8), qos: 1, responseTopic: "busy-test/replies", correlationData: Array(id.utf8))
        }
        // The node has subscribed once a probe is answered (the gate open).
        let probing = Task { () -> Int in
            var n = 0
            while !Task.isCancelled {
                send("probe\(n)")
                n += 1
                try? await Task.sleep(for: .milliseconds(100))
            }
            return n
        }
        _ = try await withDeadline(.seconds(20), "an answer to a probe") {
            await inbox.next { $0.topic == "busy-test/replies" && $0.correlationData.map { String(decoding: $0, as: UTF8.self).hasPrefix("probe") } == true }
        }
        probing.cancel()
        // Every probe sent (a retry of none: each its own id) carried out before the gate shuts.
        let probes = await probing.value
        try await withDeadline(.seconds(20), "the \(probes) probes carried out") {
            while await node.counts.performed < probes { try await Task.sleep(for: .milliseconds(20)) }
        }
        await service.hold()
        for i in 0..<FleetNode.maxInFlight { send("c\(i)") }
        try await withDeadline(.seconds(20), "\(FleetNode.maxInFlight) commands in flight") {
            while await service.started < probes + FleetNode.maxInFlight { try await Task.sleep(for: .milliseconds(20)) }
        }
        send("extra")
        let refused = try await withDeadline(.seconds(20), "the answer to the command past the limit") {
            await inbox.next { $0.topic == "busy-test/replies" && $0.correlationData == Array("extra".utf8) }
        }
        let o = Self.json(refused)
        #expect(o["ok"] as? Bool == false && o["busy"] as? Bool == true && (o["error"] as? String)?.contains("busy") == true, "\(o)")
        #expect(await node.counts.busy == 1)
        await service.release()
        try await withDeadline(.seconds(20), "the held commands carried out") {
            while await node.counts.performed < probes + FleetNode.maxInFlight { try await Task.sleep(for: .milliseconds(20)) }
        }
        // Sent again once there is room: carried out, not answered as a repeat.
        send("extra")
        let again = try await withDeadline(.seconds(20), "the command sent again") {
            await inbox.next { $0.topic == "busy-test/replies" && $0.correlationData == Array("extra".utf8) }
        }
        let a = Self.json(again)
        #expect(a["ok"] as? Bool == true && a["repeat"] == nil, "\(a)")
        try await broker.stop()
    }

    static func json(_ m: MQTTMessage) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(m.payload)) as? [String: Any]) ?? [:] }

    @Test("each command id carried out once (a repeat answered as one), bad commands answered with the field, other groups' and retained commands not carried out; discovery retained, again when Home Assistant starts, a removed job's switch removed")
    func node() async throws {
        let broker = try Broker()
        try await broker.start()
        let topics = try FleetTopics(node: "pi-a")
        let service = RecordingService()
        // A command someone left retained on the node's topic: the node sees it when it
        // subscribes, and must not carry it out (it would run again on every reconnection).
        let leaver = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "leaver"))
        try await withDeadline(.seconds(20), "the leaver's connection") { while !leaver.status.connected { try await Task.sleep(for: .milliseconds(20)) } }
        #expect(leaver.publish(topics.commands, Array(#"{"id": "r1", "command": "reload"}"#.utf8), qos: 1, retain: true))
        leaver.stop()
        let client = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "pi-a", will: (topics.availability, Array("offline".utf8))))
        defer { client.stop() }
        let discovery = HomeAssistantDiscovery(topics: topics, model: "imx477", version: "test")
        let node = FleetNode(client: client, topics: topics, groups: ["north"], discovery: discovery, service: service)
        let running = Task { await node.run() }
        defer { running.cancel() }

        let coordinator = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "coordinator"))
        defer { coordinator.stop() }
        let inbox = Inbox.of(coordinator)
        coordinator.subscribe("homeassistant/#")
        coordinator.subscribe("fleet-test/replies")
        coordinator.subscribe(topics.availability)
        let expected = discovery.configs(jobs: ["roof", "side"]).count
        try await withDeadline(.seconds(30), "the node's \(expected) discovery configs") {
            var seen = Set<String>()
            while seen.count < expected {
                let m = await inbox.next { $0.topic.hasPrefix("homeassistant/") && $0.topic.hasSuffix("/config") && !$0.payload.isEmpty }
                seen.insert(m.topic)
            }
        }
        try await withDeadline(.seconds(20), "the retained command to be seen and left") {
            while await node.counts.retainedIgnored < 1 { try await Task.sleep(for: .milliseconds(20)) }
        }
        try await withDeadline(.seconds(20), "the coordinator's connection") { while !coordinator.status.connected { try await Task.sleep(for: .milliseconds(20)) } }
        coordinator.clearRetained(topics.commands)

        func ask(_ payload: String, correlation: [UInt8]) async throws -> [String: Any] {
            #expect(coordinator.publish(topics.commands, Array(payload.utf8), qos: 1, responseTopic: "fleet-test/replies", correlationData: correlation))
            let m = try await withDeadline(.seconds(20), "the reply to \(payload)") { await inbox.next { $0.topic == "fleet-test/replies" && $0.correlationData == correlation } }
            return Self.json(m)
        }
        let first = try await ask(#"{"id": "a1", "command": "pause", "job": "roof"}"#, correlation: [1])
        #expect(first["ok"] as? Bool == true && first["id"] as? String == "a1" && first["node"] as? String == "pi-a" && (first["result"] as? [String: Any])?["done"] as? Bool == true, "\(first)")
        let again = try await ask(#"{"id": "a1", "command": "pause", "job": "roof"}"#, correlation: [2])
        #expect(again["ok"] as? Bool == true && again["repeat"] as? Bool == true, "\(again)")
        let bad = try await ask(#"{"id": "a2", "command": "capture", "ev": [0, 40]}"#, correlation: [3])
        #expect(bad["ok"] as? Bool == false && (bad["error"] as? String)?.contains("'ev' must be") == true, "\(bad)")
        let failed = try await ask(#"{"id": "a3", "command": "stop", "job": "nope"}"#, correlation: [4])
        #expect(failed["ok"] as? Bool == false && (failed["error"] as? String)?.contains("no job 'nope'") == true, "\(failed)")
        // A fleet command for another group: not carried out.
        coordinator.publish(topics.fleetCommands, Array(#"{"id": "g1", "command": "reload", "group": "south"}"#.utf8), qos: 1)
        try await withDeadline(.seconds(20), "the other group's command to be seen and left") {
            while await node.counts.notForThisNode < 1 { try await Task.sleep(for: .milliseconds(20)) }
        }
        // A command published retained while the node is online: the broker forwards it at once
        // and, without "retain as published", with its retain flag cleared. Not carried out.
        let before = await node.counts.retainedIgnored
        #expect(coordinator.publish(topics.commands, Array(#"{"id": "r2", "command": "reload"}"#.utf8), qos: 1, retain: true))
        try await withDeadline(.seconds(20), "the command retained while the node was online to be seen and left") {
            while await node.counts.retainedIgnored <= before { try await Task.sleep(for: .milliseconds(20)) }
        }
        coordinator.clearRetained(topics.commands)
        let performed = await service.performed.map(\.id)
        #expect(performed == ["a1", "a3"], "each id once; the bad one and the retained ones never reached the service: \(performed)")

        // A job goes; a reload publishes discovery again and removes the job's switch.
        await service.setJobs(["roof"])
        let reloaded = try await ask(#"{"id": "a4", "command": "reload"}"#, correlation: [5])
        #expect(reloaded["ok"] as? Bool == true)
        let removed = try await withDeadline(.seconds(20), "the removed job's switch") { await inbox.next { $0.topic == "homeassistant/switch/pi-a/job_side/config" && $0.payload.isEmpty } }
        #expect(removed.payload.isEmpty)
        // Home Assistant starting again gets every config again, as the node's jobs are now. A job
        // added without a reload has a switch only in what is published for that 'online', so a
        // copy of the reload's configs still on its way to the inbox cannot be taken for it.
        await service.setJobs(["roof", "north"])
        coordinator.publish(topics.homeAssistantStatus, Array("online".utf8), qos: 1)
        _ = try await withDeadline(.seconds(20), "discovery published again after Home Assistant's 'online', with the job added since") {
            await inbox.next { $0.topic == "homeassistant/switch/pi-a/job_north/config" && !$0.payload.isEmpty }
        }
        try await broker.stop()
    }
}
