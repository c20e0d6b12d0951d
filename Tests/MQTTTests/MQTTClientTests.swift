import Foundation
import MQTT
import ShutterbugCore
import TestSupport
import Testing

/// What a client has received, waited on in order.
actor Inbox {
    private var seen: [MQTTMessage] = []
    private var cursor = 0
    private var waiter: (predicate: @Sendable (MQTTMessage) -> Bool, continuation: CheckedContinuation<MQTTMessage, Never>)?

    static func of(_ client: MQTTClient) -> Inbox {
        let inbox = Inbox()
        Task { for await m in client.messages { await inbox.add(m) } }
        return inbox
    }

    func add(_ m: MQTTMessage) {
        seen.append(m)
        if let w = waiter, w.predicate(m) {
            waiter = nil
            cursor = seen.count
            w.continuation.resume(returning: m)
        }
    }

    /// Forgets what came so far: the next wait takes only a message that comes after this.
    func skipAll() { cursor = seen.count }

    /// The first message that matches, of all that came (waited for when none has yet); the
    /// order of the others is left alone.
    func any(_ predicate: @escaping @Sendable (MQTTMessage) -> Bool) async -> MQTTMessage {
        if let m = seen.first(where: predicate) { return m }
        return await next(predicate)
    }

    /// Whether a message that matches has come.
    func has(_ predicate: (MQTTMessage) -> Bool) -> Bool { seen.contains(where: predicate) }

    /// The next message (after the last one waited for) that matches.
    func next(_ predicate: @escaping @Sendable (MQTTMessage) -> Bool) async -> MQTTMessage {
        if let i = seen[cursor...].firstIndex(where: predicate) {
            cursor = i + 1
            return seen[i]
        }
        cursor = seen.count
        return await withCheckedContinuation { waiter = (predicate, $0) }
    }
}

@Suite("MQTT over libmosquitto against a real Mosquitto broker", .serialized, .timeLimit(.minutes(2)))
struct MQTTClientTests {
    static func text(_ m: MQTTMessage) -> String { String(decoding: m.payload, as: UTF8.self) }

    @Test("a reader that falls behind loses the oldest messages past the inbox's limit, and the client counts every one it dropped")
    func inboxDropsAreCounted() async throws {
        let broker = try Broker()
        try await broker.start()
        var options = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "slow-reader")
        options.inboxLimit = 8
        let reader = try MQTTClient(options)
        defer { reader.stop() }
        reader.subscribe("flood/#")
        let sender = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "flooder"))
        defer { sender.stop() }
        try await withDeadline(.seconds(20), "both connections and the subscription") {
            while !(reader.status.connected && sender.status.connected) { try await Task.sleep(for: .milliseconds(20)) }
        }
        // The subscription is in once a probe comes back; nothing is read meanwhile but it.
        let probing = Task {
            while !Task.isCancelled {
                sender.publish("flood/probe", [0], qos: 1)
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        let sawProbe = Task { () -> Bool in
            for await m in reader.messages where m.topic == "flood/probe" { return true }
            return false
        }
        let seen = try await withDeadline(.seconds(20), "a probe through the subscription") { await sawProbe.value }
        probing.cancel()
        _ = await probing.value
        #expect(seen == true)
        let sent = 100
        for i in 0..<sent { #expect(sender.publish("flood/\(i)", [UInt8(i)], qos: 1)) }
        // Nothing read: the client keeps the newest 8 and counts what it dropped.
        let limit = options.inboxLimit
        try await withDeadline(.seconds(20), "\(sent - limit) messages counted as dropped") {
            while reader.inboxDropped < sent - limit { try await Task.sleep(for: .milliseconds(20)) }
        }
        let reading = Task { () -> [String] in
            var kept: [String] = []
            for await m in reader.messages where m.topic != "flood/probe" {
                kept.append(m.topic)
                if kept.count == limit { break }
            }
            return kept
        }
        let kept = try await withDeadline(.seconds(20), "the \(limit) messages kept") { await reading.value }
        #expect(kept == (sent - limit..<sent).map { "flood/\($0)" }, "the newest are kept: \(String(describing: kept))")
        #expect(reader.inboxDropped >= sent - limit)
        try await broker.stop()
    }

    @Test("retained state reaches a later subscriber; a command with MQTT 5's response topic and correlation data is answered on that topic with the same data")
    func commandAndResponse() async throws {
        let broker = try Broker()
        try await broker.start()
        let node = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "node-1", will: ("sb/node-1/availability", Array("offline".utf8))))
        defer { node.stop() }
        let nodeInbox = Inbox.of(node)
        node.subscribe("sb/node-1/cmd")
        node.publish("sb/node-1/availability", Array("online".utf8), qos: 1, retain: true)
        let coordinator = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "coordinator"))
        defer { coordinator.stop() }
        let inbox = Inbox.of(coordinator)
        coordinator.subscribe("sb/node-1/availability")
        coordinator.subscribe("sb/coordinator/reply")
        let online = try await withDeadline(.seconds(20), "the node's retained 'online'") { await inbox.next { $0.topic == "sb/node-1/availability" } }
        #expect(Self.text(online) == "online")
        // The coordinator's command, sent once it is connected (a message sent before is
        // counted as unsent, not queued).
        try await withDeadline(.seconds(20), "the coordinator's connection") { for await up in coordinator.connectionChanges where up { return } }
        #expect(coordinator.publish("sb/node-1/cmd", Array(#"{"command":"status"}"#.utf8), qos: 1, responseTopic: "sb/coordinator/reply", correlationData: [7, 0, 255]))
        let command = try await withDeadline(.seconds(20), "the command at the node") { await nodeInbox.next { $0.topic == "sb/node-1/cmd" } }
        #expect(command.responseTopic == "sb/coordinator/reply" && command.correlationData == [7, 0, 255] && !command.retained, "\(command)")
        #expect(node.publish(try #require(command.responseTopic), Array("ok".utf8), qos: 1, correlationData: command.correlationData))
        let reply = try await withDeadline(.seconds(20), "the node's reply") { await inbox.next { $0.topic == "sb/coordinator/reply" } }
        #expect(Self.text(reply) == "ok" && reply.correlationData == [7, 0, 255])
        try await broker.stop()
    }

    @Test("a connection cut without a goodbye: the broker publishes the last will ('offline'); the client reconnects and publishes its retained 'online' again")
    func lastWill() async throws {
        let broker = try Broker()
        try await broker.start()
        var options = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "node-2", will: ("sb/node-2/availability", Array("offline".utf8)))
        options.reconnectDelay = 1...2
        let node = try MQTTClient(options)
        defer { node.stop() }
        node.publish("sb/node-2/availability", Array("online".utf8), qos: 1, retain: true)
        let watcher = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "watcher"))
        defer { watcher.stop() }
        let inbox = Inbox.of(watcher)
        watcher.subscribe("sb/node-2/availability")
        _ = try await withDeadline(.seconds(20), "'online'") { await inbox.next { Self.text($0) == "online" } }
        node.cutConnection()
        _ = try await withDeadline(.seconds(60), "the last will 'offline' (the broker notices at once, or after the keep-alive)") { await inbox.next { Self.text($0) == "offline" } }
        _ = try await withDeadline(.seconds(30), "'online' again after the node reconnected") { await inbox.next { Self.text($0) == "online" } }
        #expect(node.status.connections >= 2, "\(node.status)")
        try await broker.stop()
    }

    @Test("the broker stopped: publishing returns at once, counted as unsent; the broker started again (its retained messages forgotten): both clients reconnect, subscribe again, and the retained state is there again, as the node last set it (while the broker was away)")
    func brokerRestart() async throws {
        let broker = try Broker()
        try await broker.start()
        var options = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "node-3")
        options.reconnectDelay = 1...2
        let node = try MQTTClient(options)
        defer { node.stop() }
        node.publish("sb/node-3/state", Array(#"{"streaming":true}"#.utf8), qos: 1, retain: true)
        var watcherOptions = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "watcher-3")
        watcherOptions.reconnectDelay = 1...2
        let watcher = try MQTTClient(watcherOptions)
        defer { watcher.stop() }
        let inbox = Inbox.of(watcher)
        watcher.subscribe("sb/node-3/#")
        _ = try await withDeadline(.seconds(20), "the retained state") { await inbox.next { $0.topic == "sb/node-3/state" } }
        try await broker.stop()
        await inbox.skipAll()
        try await withDeadline(.seconds(30), "the node to see the broker gone") { while node.status.connected { try await Task.sleep(for: .milliseconds(20)) } }
        let before = node.status.unsent
        #expect(!node.publish("sb/node-3/event/slot", Array("{}".utf8)), "not connected: not sent")
        #expect(node.status.unsent == before + 1)
        // The state changes while the broker is away: kept, and what the node publishes again.
        // (It also tells the state after the restart from a copy of the old one that was still
        // on its way to the inbox when the broker stopped, on a busy machine.)
        #expect(!node.publish("sb/node-3/state", Array(#"{"streaming":false}"#.utf8), qos: 1, retain: true), "not connected: not sent")
        try await broker.start()
        _ = try await withDeadline(.seconds(60), "the node's newest retained state after the restart (published again by the node)") {
            await inbox.next { $0.topic == "sb/node-3/state" && Self.text($0) == #"{"streaming":false}"# }
        }
        #expect(node.status.connections >= 2 && watcher.status.connections >= 2, "\(node.status) \(watcher.status)")
        try await broker.stop()
    }

    @Test("after a broker outage of some 15 s the client is back within 8 s of the broker's return (its waits grow by a second an attempt, attempts at 1, 3, 6, 10, 15, 21 s; libmosquitto's squared ones try at 1, 5, 14, 30 s)")
    func reconnectsSoonAfterAnOutage() async throws {
        let broker = try Broker()
        try await broker.start()
        var options = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "node-r")
        options.reconnectDelay = 1...30
        let node = try MQTTClient(options)
        defer { node.stop() }
        try await withDeadline(.seconds(20), "the first connection") { while !node.status.connected { try await Task.sleep(for: .milliseconds(20)) } }
        try await broker.stop()
        try await withDeadline(.seconds(30), "the client to see the broker gone") { while node.status.connected { try await Task.sleep(for: .milliseconds(20)) } }
        // The outage itself (its length is what is tested, not a wait for something).
        try await Task.sleep(for: .seconds(15))
        try await broker.start()
        let back = ContinuousClock.now
        try await withDeadline(.seconds(30), "the client to reconnect") { while !node.status.connected { try await Task.sleep(for: .milliseconds(20)) } }
        let late = ContinuousClock.now - back
        #expect(late < .seconds(8), "reconnected \(late) after the broker came back")
        try await broker.stop()
    }

    @Test("no broker: the client starts, publishing returns at once and is counted, and stop returns at once (the reconnection loop is not waited out)")
    func noBroker() async throws {
        var options = MQTTOptions(host: "127.0.0.1", port: try Broker.freePort(), clientID: "alone")
        options.reconnectDelay = 20...30
        let client = try MQTTClient(options)
        client.publish("sb/alone/state", Array("{}".utf8), qos: 1, retain: true)
        #expect(!client.publish("sb/alone/event/slot", Array("{}".utf8)))
        #expect(!client.status.connected && client.status.unsent == 2, "\(client.status)")
        try await withDeadline(.seconds(10), "stop() with the broker unreachable and a 20 s reconnection delay") { try await offPool { client.stop() } }
    }

    @Test("a broker that refuses the client (a password file, no password given) is named in the status; the client is never connected")
    func refused() async throws {
        let broker = try Broker(extra: "password_file /dev/null\nallow_anonymous false\n")
        try await broker.start()
        let client = try MQTTClient(MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "stranger"))
        defer { client.stop() }
        let problem = try await withDeadline(.seconds(20), "the broker's refusal in the status") { () -> String in
            while true {
                if let p = client.status.problem { return p }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(problem.contains("refused") && !client.status.connected, "\(problem)")
        try await broker.stop()
    }

    @Test("TLS (mqtts): a client given the broker's CA connects and exchanges messages; one trusting only the system's store never connects; a CA file that does not exist is refused at once")
    func tls() async throws {
        // A CA and a server certificate for 127.0.0.1, made with openssl for this test.
        let dir = NSTemporaryDirectory() + "sb-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for args in [["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "2", "-subj", "/CN=shutterbug-test-ca"],
                     ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/srv.key", "-out", "\(dir)/srv.csr", "-subj", "/CN=127.0.0.1"],
                     ["x509", "-req", "-in", "\(dir)/srv.csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key", "-CAcreateserial", "-out", "\(dir)/srv.pem", "-days", "2",
                      "-extfile", "\(dir)/ext"]] {
            try "subjectAltName=IP:127.0.0.1\n".write(toFile: "\(dir)/ext", atomically: true, encoding: .utf8)
            let r = try await runChild("/usr/bin/openssl", args)
            try #require(r.status == 0, "openssl \(args[0]): \(r.err)")
        }
        // The broker runs as the mosquitto user: the files readable by it.
        for f in ["ca.pem", "srv.pem", "srv.key"] { chmod("\(dir)/\(f)", 0o644) }
        let broker = try Broker(extra: "cafile \(dir)/ca.pem\ncertfile \(dir)/srv.pem\nkeyfile \(dir)/srv.key\n")
        try await broker.start()
        var trusted = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "trusted")
        trusted.tls = .init(caFile: "\(dir)/ca.pem")
        let a = try MQTTClient(trusted)
        defer { a.stop() }
        var system = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "system")
        system.tls = .init()
        let b = try MQTTClient(system)
        defer { b.stop() }
        let inbox = Inbox.of(a)
        a.subscribe("tls/echo")
        try await withDeadline(.seconds(20), "the TLS client's connection") { while !a.status.connected { try await Task.sleep(for: .milliseconds(20)) } }
        #expect(a.publish("tls/echo", Array("over TLS".utf8), qos: 1))
        let m = try await withDeadline(.seconds(20), "the message back over TLS") { await inbox.next { $0.topic == "tls/echo" } }
        #expect(Self.text(m) == "over TLS")
        // The system's store does not know this CA: the handshake fails (the broker logs the
        // client's alert), and the client is never connected.
        let log = broker.log
        try await withDeadline(.seconds(30), "the broker to log a refused TLS handshake") {
            while !((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("unknown ca") { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(!b.status.connected && b.status.connections == 0)
        var missing = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: "missing")
        missing.tls = .init(caFile: "\(dir)/no-such-ca.pem")
        #expect(throws: ShutterbugError.self) { _ = try MQTTClient(missing) }
        try await broker.stop()
    }
}
