import ArgumentParser
import Capture
import Fleet
import FleetService
import Foundation
import Soak
import ImageOutput
import Logging
import MQTT
import Server
import ShutterbugCore
import SimulatedCamera
import Synchronization

/// `shutterbug-bench fleet-scale`: what one Mosquitto broker and the nodes' MQTT side do with a
/// rig of many nodes, side by side in one run: the time from a fleet command to every node's
/// reply with a small rig and a large one, the replies and broker messages a second under a
/// flood of commands, and a real node's timelapse slot error with the broker idle and busy.
struct BenchFleet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet-scale",
        abstract: "A fleet command to 10 and to 100 nodes on one Mosquitto broker: time to all replies, messages a second, and a real node's slot error while the broker is busy.",
        discussion: """
            Starts Debian's mosquitto twice on free loopback ports, once as configured by \
            default and once with set_tcp_nodelay, and times the same rounds on both. The nodes are real MQTT sessions \
            in this process, each a FleetNode (commands decoded, carried out once per id, \
            answered with the correlation data, state republished after each) over a service \
            that answers at once: what the broker and the nodes' MQTT side cost, not the \
            cameras'. Beside them one real node: the simulated HQ camera streaming in real time, \
            CameraService with a timelapse job every second and its FleetLink on the same \
            broker, whose slot errors (exposure start less the slot's instant) are compared \
            with the broker idle and under the flood.
            """)

    @Option(name: .long, help: "Nodes in the large rig (10...1000).")
    var nodes = 100

    @Option(name: .long, help: "Nodes in the small rig (1...nodes).")
    var small = 10

    @Option(name: .long, help: "Fleet commands timed per rig (5...1000).")
    var rounds = 30

    @Option(name: .long, help: "Commands published back to back in the flood (10...10000).")
    var flood = 200

    @Option(name: .long, help: ArgumentHelp("The broker binary.", valueName: "path"))
    var mosquitto = "/usr/sbin/mosquitto"

    func validate() throws {
        guard (10...1000).contains(nodes) else { throw ValidationError("--nodes must be 10...1000, not \(nodes)") }
        guard (1...nodes).contains(small) else { throw ValidationError("--small must be 1...\(nodes), not \(small)") }
        guard (5...1000).contains(rounds) else { throw ValidationError("--rounds must be 5...1000, not \(rounds)") }
        guard (10...10_000).contains(flood) else { throw ValidationError("--flood must be 10...10000, not \(flood)") }
        guard FileManager.default.isExecutableFile(atPath: mosquitto) else { throw ValidationError("no broker at \(mosquitto): sudo apt install mosquitto") }
    }

    /// A node's service that answers at once.
    struct Stub: FleetNodeService {
        func fleetState() async -> JSONValue { .object(["streaming": .bool(true), "jobs": .object([:])]) }
        func fleetJobs() async -> [String] { [] }
        func perform(_ command: FleetCommand) async throws -> JSONValue { .object(["done": .bool(true)]) }
    }

    /// The replies to the coordinator's commands, counted per correlation.
    final class Replies: Sendable {
        let counts = Mutex<[String: Int]>([:])
        func add(_ m: MQTTMessage) {
            guard let c = m.correlationData else { return }
            counts.withLock { $0[String(decoding: c, as: UTF8.self), default: 0] += 1 }
        }
        func count(_ c: String) -> Int { counts.withLock { $0[c] ?? 0 } }
        func total() -> Int { counts.withLock { $0.values.reduce(0, +) } }
    }

    /// The real node's slot errors, in microseconds, as its slot events report them.
    final class Slots: Sendable {
        let errors = Mutex<[(ContinuousClock.Instant, Double)]>([])
        func add(_ m: MQTTMessage) {
            guard let o = (try? JSONSerialization.jsonObject(with: Data(m.payload))) as? [String: Any],
                  let slot = o["slot"] as? [String: Any], let e = slot["scheduleErrorUs"] as? Double else { return }
            errors.withLock { $0.append((.now, e)) }
        }
        func between(_ a: ContinuousClock.Instant, _ b: ContinuousClock.Instant) -> [Double] {
            errors.withLock { $0.filter { $0.0 >= a && $0.0 <= b }.map(\.1) }
        }
    }

    static func freePort() -> Int { SeaweedStore.freePort() }

    static func wait(_ what: String, _ limit: Duration, _ condition: () -> Bool) async throws {
        let end = ContinuousClock.now + limit
        while !condition() {
            guard ContinuousClock.now < end else { throw ValidationError("waited \(limit) for \(what)") }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    func run() async throws {
        let dir = NSTemporaryDirectory() + "sb-bench-fleet-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/photos", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Two brokers side by side: Mosquitto as configured by default, and with
        // set_tcp_nodelay (small packets sent at once); the rig runs on the second.
        func startBroker(_ name: String, nodelay: Bool) throws -> (Process, Int) {
            let port = Self.freePort()
            try "listener \(port) 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 100000\n\(nodelay ? "set_tcp_nodelay true\n" : "")"
                .write(toFile: dir + "/\(name).conf", atomically: true, encoding: .utf8)
            let broker = Process()
            broker.executableURL = URL(fileURLWithPath: mosquitto)
            broker.arguments = ["-c", dir + "/\(name).conf"]
            broker.standardOutput = FileHandle.nullDevice
            broker.standardError = FileHandle.nullDevice
            try broker.run()
            return (broker, port)
        }
        let (broker, port) = try startBroker("nodelay", nodelay: true)
        defer { kill(broker.processIdentifier, SIGKILL) }
        let (plainBroker, plainPort) = try startBroker("default", nodelay: false)
        defer { kill(plainBroker.processIdentifier, SIGKILL) }

        // The real node: the simulated camera in real time, a job every second.
        let cam = SimulatedCamera(profile: .imx477, options: SimulationOptions())
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let config = try await session.start(stream: StreamRequest(role: .still, width: 640, height: 480), preparedBracketCount: 3)
        let directory = try OutputDirectory(path: dir + "/photos")
        let writer = try PhotoFileWriter(directory: directory, streams: config.streams, camera: CameraDescription(profile: .imx477))
        let service = CameraService(session: session, camera: cam, writer: writer, directory: directory, sensorModes: cam.capabilities.sensorModes)
        var settings = MQTTSettings(url: "mqtt://127.0.0.1:\(port)")
        settings.node = "real"
        settings.discoveryPrefix = nil
        settings.requireClockSync = false
        let real = try FleetLink(settings, service: service, reload: nil, version: "bench", logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
        _ = try await service.createJob(JobDefinition(name: "slots", words: ["--interval", "1s", "--until", "stopped"]))

        // The stub nodes: groups "large" (all) and "small" (the first --small), on each broker.
        var clients: [MQTTClient] = []
        var runs: [Task<Void, Never>] = []
        func stubs(_ port: Int) throws {
            for i in 0..<nodes {
                let topics = try FleetTopics(node: "n\(i)")
                let c = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: port, clientID: "n\(i)", will: (topics.availability, Array("offline".utf8))))
                let node = FleetNode(client: c, topics: topics, groups: i < small ? ["small", "large"] : ["large"], discovery: nil, service: Stub())
                clients.append(c)
                runs.append(Task { await node.run() })
            }
        }
        try stubs(port)
        try stubs(plainPort)
        func coordinatorClient(_ port: Int, _ replies: Replies, _ slots: Slots?) throws -> (MQTTClient, Task<Void, Never>) {
            var co = MQTTOptions(host: "127.0.0.1", port: port, clientID: "coordinator")
            co.inboxLimit = 1 << 22
            let c = try MQTTClient(co)
            c.subscribe("bench/replies")
            if slots != nil { c.subscribe("shutterbug/real/event/slot") }
            return (c, Task { for await m in c.messages { if m.topic == "bench/replies" { replies.add(m) } else { slots?.add(m) } } })
        }
        let replies = Replies()
        let slots = Slots()
        let (coordinator, reader) = try coordinatorClient(port, replies, slots)
        let plainReplies = Replies()
        let (plainCoordinator, plainReader) = try coordinatorClient(plainPort, plainReplies, nil)
        defer {
            reader.cancel()
            plainReader.cancel()
            for r in runs { r.cancel() }
            for c in clients { c.stop() }
            coordinator.stop()
            plainCoordinator.stop()
        }
        do {
            try await Self.wait("\(2 * nodes) nodes and the coordinators to connect", .seconds(60)) {
                clients.allSatisfy { $0.status.connected } && coordinator.status.connected && plainCoordinator.status.connected && real.client.status.connected
            }
        } catch {
            // Which did not, and what the broker said to them.
            let problems = Set((clients + [coordinator, plainCoordinator, real.client]).compactMap(\.status.problem))
            throw ValidationError("\(error): \(clients.filter { $0.status.connected }.count) of \(clients.count) stub nodes connected, coordinators \(coordinator.status.connected)/\(plainCoordinator.status.connected), the real node \(real.client.status.connected)\(problems.isEmpty ? "" : "; the brokers said: " + problems.sorted().joined(separator: "; "))")
        }
        // The job's first slots (the lock settling in) are not counted.
        try await Task.sleep(for: .seconds(4))

        // The broker idle: the real node's slots for 8 s.
        let idleFrom = ContinuousClock.now
        try await Task.sleep(for: .seconds(8))
        let idleTo = ContinuousClock.now

        var serial = 0
        /// Publishes a capture for `group` and returns the time until `expected` replies.
        func round(_ client: MQTTClient, _ replies: Replies, _ group: String, expected: Int) async throws -> Duration {
            serial += 1
            let c = "r\(serial)"
            let sent = ContinuousClock.now
            client.publish("shutterbug/fleet/cmd", Array(#"{"id": "\#(c)", "command": "capture", "group": "\#(group)"}"#.utf8), qos: 1,
                           responseTopic: "bench/replies", correlationData: Array(c.utf8))
            try await Self.wait("\(expected) replies to \(c)", .seconds(60)) { replies.count(c) >= expected }
            return ContinuousClock.now - sent
        }
        var times: [String: [Duration]] = [:]
        for _ in 0..<rounds {
            times["small", default: []].append(try await round(coordinator, replies, "small", expected: small))
            times["large", default: []].append(try await round(coordinator, replies, "large", expected: nodes))
            times["plain small", default: []].append(try await round(plainCoordinator, plainReplies, "small", expected: small))
            times["plain large", default: []].append(try await round(plainCoordinator, plainReplies, "large", expected: nodes))
        }

        // The flood: commands back to back to every node, the real node's slots meanwhile.
        let floodFrom = ContinuousClock.now
        let before = replies.total()
        for k in 0..<flood {
            let c = "f\(k)"
            coordinator.publish("shutterbug/fleet/cmd", Array(#"{"id": "\#(c)", "command": "capture", "group": "large"}"#.utf8), qos: 1,
                                responseTopic: "bench/replies", correlationData: Array(c.utf8))
        }
        try await Self.wait("\(flood * nodes) flood replies", .seconds(300)) { replies.total() - before >= flood * nodes }
        let floodTo = ContinuousClock.now
        // Keep the broker as busy for 8 s more if the flood was shorter, so slots fall in it.
        while ContinuousClock.now - floodFrom < .seconds(8) {
            let c = "g\(serial)"
            serial += 1
            coordinator.publish("shutterbug/fleet/cmd", Array(#"{"id": "\#(c)", "command": "capture", "group": "large"}"#.utf8), qos: 1,
                                responseTopic: "bench/replies", correlationData: Array(c.utf8))
            try await Self.wait("replies to \(c)", .seconds(60)) { replies.count(c) >= nodes }
        }
        let busyTo = ContinuousClock.now
        await real.stop()
        await service.stopAll("the benchmark is over")
        await session.stop()

        func pct(_ d: [Duration], _ p: Double) -> Duration {
            let s = d.sorted()
            return s[min(s.count - 1, Int((Double(s.count - 1) * p).rounded()))]
        }
        func pctD(_ d: [Double], _ p: Double) -> Double? {
            guard !d.isEmpty else { return nil }
            let s = d.sorted()
            return s[min(s.count - 1, Int((Double(s.count - 1) * p).rounded()))]
        }
        let floodSeconds = (floodTo - floodFrom).secondsValue
        // Through the broker per flood command: the command to each node, each node's reply and
        // its state published again.
        let messages = Double(flood * nodes * 3)
        print("fleet-scale: \(nodes) nodes (real MQTT sessions, a FleetNode each) on each of two Mosquitto brokers (its defaults; set_tcp_nodelay), + 1 real node (simulated imx477, a slot a second) on the second")
        print("")
        print("command to all replies                       p50          p99          max")
        for (name, count) in [("plain small", small), ("plain large", nodes), ("small", small), ("large", nodes)] {
            let t = times[name] ?? []
            let label = "\(count) nodes, " + (name.hasPrefix("plain") ? "broker's defaults" : "set_tcp_nodelay")
            print("\(label.padding(toLength: 45, withPad: " ", startingAt: 0))\(pct(t, 0.5).millisecondsDescription.padding(toLength: 13, withPad: " ", startingAt: 0))\(pct(t, 0.99).millisecondsDescription.padding(toLength: 13, withPad: " ", startingAt: 0))\(pct(t, 1).millisecondsDescription)")
        }
        let ratio50 = pct(times["large"] ?? [], 0.5).secondsValue / pct(times["small"] ?? [], 0.5).secondsValue
        let ratio99 = pct(times["large"] ?? [], 0.99).secondsValue / pct(times["small"] ?? [], 0.99).secondsValue
        print("ratio \(nodes) / \(small) nodes (set_tcp_nodelay): p50 \(String(format: "%.2f", ratio50)), p99 \(String(format: "%.2f", ratio99))")
        let nd = pct(times["plain large"] ?? [], 0.5).secondsValue / pct(times["large"] ?? [], 0.5).secondsValue
        print("ratio broker's defaults / set_tcp_nodelay, \(nodes) nodes: p50 \(String(format: "%.2f", nd))")
        print("")
        print("flood: \(flood) commands to \(nodes) nodes back to back: \(flood * nodes) replies in \(String(format: "%.2f", floodSeconds)) s = \(Int(Double(flood * nodes) / floodSeconds)) replies/s, \(Int(messages / floodSeconds)) broker messages/s (command, reply, state per node)")
        let idle = slots.between(idleFrom, idleTo)
        let busy = slots.between(floodFrom, busyTo)
        if let i99 = pctD(idle, 0.99), let b99 = pctD(busy, 0.99), let i50 = pctD(idle, 0.5), let b50 = pctD(busy, 0.5) {
            print("real node's slot error      p50          p99          slots")
            print("broker idle                 \(String(format: "%.1f µs", i50).padding(toLength: 13, withPad: " ", startingAt: 0))\(String(format: "%.1f µs", i99).padding(toLength: 13, withPad: " ", startingAt: 0))\(idle.count)")
            print("broker busy (flood)         \(String(format: "%.1f µs", b50).padding(toLength: 13, withPad: " ", startingAt: 0))\(String(format: "%.1f µs", b99).padding(toLength: 13, withPad: " ", startingAt: 0))\(busy.count)")
            print("ratio busy / idle: p50 \(String(format: "%.2f", b50 / max(i50, 0.001))), p99 \(String(format: "%.2f", b99 / max(i99, 0.001)))")
        } else {
            print("real node's slot error: too few slots (idle \(idle.count), busy \(busy.count))")
        }
    }
}
