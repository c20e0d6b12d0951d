import ArgumentParser
import Fleet
import FleetService
import Foundation
import JobOptions
import MQTT
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// `shutterbug fleet`: many Pis as one camera, over their MQTT broker.
struct FleetCommandLine: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Many cameras as one, over MQTT: capture on every node at one wall-clock instant, list the nodes.",
        discussion: "Talks to the nodes (shutterbug serve --mqtt-url …) through their broker; docs/fleet.md.",
        subcommands: [FleetCapture.self, FleetStatus.self])
}

/// Where the broker is and as whom the coordinator connects.
struct BrokerOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The broker: mqtt://HOST[:PORT] or mqtts://HOST[:PORT] (default mqtt://127.0.0.1:1883; SHUTTERBUG_MQTT_URL).", valueName: "url"))
    var broker: String?

    @Option(name: .long, help: ArgumentHelp("The nodes' topic prefix.", valueName: "prefix"))
    var topicPrefix: String = "shutterbug"

    @Option(name: .long, help: ArgumentHelp("The user name on the broker.", valueName: "name"))
    var username: String?

    @Option(name: .long, help: ArgumentHelp("A file holding the broker password.", valueName: "file"))
    var passwordFile: String?

    @Option(name: .long, help: ArgumentHelp("The CA certificate the broker's is checked against (implies TLS).", valueName: "file"))
    var tlsCA: String?

    @Flag(name: .long, help: "Print JSON.")
    var json = false

    var url: String { broker ?? ProcessInfo.processInfo.environment["SHUTTERBUG_MQTT_URL"] ?? "mqtt://127.0.0.1:1883" }

    func validate() throws {
        do { _ = try MQTTOptions.endpoint(url) } catch let e as ShutterbugError { throw ValidationError(e.message) }
        guard !topicPrefix.isEmpty, !topicPrefix.contains(where: { "+#".contains($0) }) else { throw ValidationError("--topic-prefix must be a topic without '+' or '#', not '\(topicPrefix)'") }
    }

    /// A connected client, its reply topic subscribed; the nodes' availability and state
    /// (retained) as they come.
    func connect() async throws -> (MQTTClient, Roster, String) {
        let (host, port, tls) = try MQTTOptions.endpoint(url)
        var password: String?
        if let passwordFile {
            guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) else { throw ValidationError("--password-file \(passwordFile): cannot read it") }
            password = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let id = "shutterbug-fleet-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var o = MQTTOptions(host: host, port: port, clientID: id, username: username, password: password)
        if tls || tlsCA != nil { o.tls = .init(caFile: tlsCA) }
        // Every node's availability, state and reply, for rigs of thousands.
        o.inboxLimit = 1 << 16
        let client = try MQTTClient(o)
        let replies = "\(topicPrefix)/coordinator/\(id)/reply"
        client.subscribe("\(topicPrefix)/+/availability")
        client.subscribe("\(topicPrefix)/+/state")
        client.subscribe(replies)
        let roster = Roster(prefix: topicPrefix)
        Task { for await m in client.messages { await roster.add(m) } }
        let deadline = ContinuousClock.now + .seconds(10)
        while !client.status.connected {
            guard ContinuousClock.now < deadline else {
                client.stop()
                throw ShutterbugError(.timeout, "cannot reach the broker at \(host):\(port) in 10 s\(client.status.problem.map { ": \($0)" } ?? "")")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        // The retained availability and state come right after the subscriptions: a quiet
        // spell of 300 ms (at most 3 s) ends them.
        await roster.settle(quiet: .milliseconds(300), limit: .seconds(3))
        return (client, roster, replies)
    }
}

/// The nodes as their retained messages say, and the replies to a command.
actor Roster {
    let prefix: String
    var availability: [String: String] = [:]
    /// Payloads as they came (JSON objects), by node.
    var states: [String: [UInt8]] = [:]
    var replies: [String: [UInt8]] = [:]
    var correlation: [UInt8] = []
    var lastMessage = ContinuousClock.now

    init(prefix: String) { self.prefix = prefix }

    func expect(_ c: [UInt8]) { correlation = c }

    func add(_ m: MQTTMessage) {
        lastMessage = .now
        let parts = m.topic.split(separator: "/", omittingEmptySubsequences: false)
        let object = (try? JSONSerialization.jsonObject(with: Data(m.payload))) as? [String: Any]
        if m.topic.hasPrefix(prefix + "/coordinator/") {
            guard m.correlationData == correlation, let object, let node = object["node"] as? String else { return }
            replies[node] = m.payload
        } else if parts.count >= 2, parts[parts.count - 1] == "availability" {
            availability[String(parts[parts.count - 2])] = String(decoding: m.payload, as: UTF8.self)
        } else if parts.count >= 2, parts[parts.count - 1] == "state", object != nil {
            states[String(parts[parts.count - 2])] = m.payload
        }
    }

    func settle(quiet: Duration, limit: Duration) async {
        let end = ContinuousClock.now + limit
        while ContinuousClock.now < end, ContinuousClock.now - lastMessage < quiet {
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The nodes online now, those in `group` (nil: all).
    func online(group: String?) -> [String] {
        availability.filter { $0.value == "online" }.keys.filter { node in
            guard let group else { return true }
            return ((Self.object(states[node])?["groups"] as? [String]) ?? []).contains(group)
        }.sorted()
    }

    func snapshot() -> (availability: [String: String], states: [String: [UInt8]], replies: [String: [UInt8]]) {
        (availability, states, replies)
    }

    static func object(_ payload: [UInt8]?) -> [String: Any]? {
        payload.flatMap { (try? JSONSerialization.jsonObject(with: Data($0))) as? [String: Any] }
    }
}

struct FleetCapture: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture",
        abstract: "A photo or bracket on every node (or a group), each starting its exposure at the same wall-clock instant.",
        discussion: """
            Each node maps the instant to its camera's clock and phase-locks so a frame's \
            exposure starts at it, or says why it could not (too soon for its lock's lead, \
            camera busy, clock not synchronised). Prints per node its exposure start in wall \
            time and its error from the instant, its files, its clock's synchronisation, and \
            the spread of the starts. Exits 1 when a node online did not take the capture, or \
            took it without starting at the instant (its phase lock missed: a dropped frame, the \
            camera busy; its reply says by how much).
            """)

    @OptionGroup var broker: BrokerOptions

    @Option(name: .long, help: ArgumentHelp("When: +5s (from now), or an instant: 2026-11-26T18:00:00.000Z, 2026-11-26T18:00 (local time). A node needs some 25 frames' notice (its phase lock's lead).", valueName: "instant"))
    var at: String = "+5s"

    @Flag(name: .long, help: "Capture now on each node as the command arrives (no common instant).")
    var now = false

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("A bracket of EV biases around each node's current exposure: -2,0,2.", valueName: "ev,..."))
    var ev: String?

    @Option(name: .long, help: ArgumentHelp("A bracket of manual exposures: 1/250,1/60,1/15 or 4ms,16ms.", valueName: "time,..."))
    var exposures: String?

    @Option(name: .long, help: ArgumentHelp("The analogue gain for --exposures, 1...64 (default 1).", valueName: "gain"))
    var gain: Double?

    @Option(name: .long, help: ArgumentHelp("Only the nodes in this group.", valueName: "name"))
    var group: String?

    @Option(name: .long, help: ArgumentHelp("How long to wait for the replies after the instant.", valueName: "time"))
    var timeout: String = "30s"

    func run() async throws {
        let wait = try NumericInput.period(timeout, "--timeout", in: 1...3600)
        var command: [String: JSONValue] = ["command": "capture", "id": .string("fleet-\(UUID().uuidString.prefix(8).lowercased())")]
        if let ev { command["ev"] = .array(try NumericInput.numbers(ev, "--ev", in: -8...8, unit: "EV", example: "-2,0,2").map(JSONValue.number)) }
        if let exposures {
            guard ev == nil else { throw ValidationError("give --ev or --exposures, not both") }
            command["exposuresUs"] = .array(try NumericInput.list(exposures, "--exposures", example: "1/250,1/60").map {
                .number(try NumericInput.exposure(Substring($0.trimmingCharacters(in: .whitespaces)), "--exposures").microsecondsValue)
            })
        }
        if let gain {
            try NumericInput.check(gain, "--gain", in: 1...64)
            command["gain"] = .number(gain)
        }
        if let group { command["group"] = .string(group) }
        // The instant checked now, before the broker is asked; a relative one counts from
        // when the command is sent (connecting takes a moment).
        var relative: Duration?
        var instant: WallClockTime?
        if !now {
            if at.hasPrefix("+") {
                relative = try NumericInput.period(String(at.dropFirst()), "--at", in: 0...3600)
            } else if let t = Fleet.FleetCommand.instant(at) {
                instant = t
            } else {
                instant = try NumericInput.wallTime(at, "--at")
            }
        }
        let (client, roster, replies) = try await broker.connect()
        defer { client.stop() }
        let expected = await roster.online(group: group)
        let wallNow = WallClockTime(nanoseconds: Int64(Date().timeIntervalSince1970 * 1e9))
        if let relative { instant = WallClockTime(nanoseconds: wallNow.nanoseconds + relative.nanosecondsValue) }
        if let instant { command["at"] = .string(Self.iso(instant)) }
        let correlation = Array(UUID().uuidString.utf8)
        await roster.expect(correlation)
        client.publish("\(broker.topicPrefix)/fleet/cmd", Array(JSONValue.object(command).encoded.utf8), qos: 1, responseTopic: replies, correlationData: correlation)
        let sent = ContinuousClock.now
        let until = sent + Duration.nanoseconds(max(0, (instant?.nanoseconds ?? wallNow.nanoseconds) - wallNow.nanoseconds)) + wait
        while ContinuousClock.now < until {
            let got = await roster.snapshot().replies
            if !expected.isEmpty, expected.allSatisfy({ got[$0] != nil }) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let got = await roster.snapshot().replies.compactMapValues(Roster.object)
        let missing = expected.filter { got[$0] == nil }
        print(Self.render(got, missing: missing, instant: instant, json: broker.json))
        // Every node online took it, each starting at the instant (phase-locked), or exit 1.
        let unlocked = got.values.contains { (($0["result"] as? [String: Any])?["locked"] as? Bool) == false }
        if got.isEmpty || missing.count > 0 || got.values.contains(where: { ($0["ok"] as? Bool) != true }) || unlocked { throw ExitCode.failure }
    }

    /// An instant as a node reads it: ISO 8601 in UTC to the nanosecond.
    static func iso(_ t: WallClockTime) -> String {
        let ms = t.description.dropLast(5)  // "…:SS.mmmZ" less ".mmmZ"
        var frac = String(t.nanoseconds % 1_000_000_000)
        frac = String(repeating: "0", count: 9 - frac.count) + frac
        return ms + "." + frac + "Z"
    }

    static func render(_ replies: [String: [String: Any]], missing: [String], instant: WallClockTime?, json: Bool) -> String {
        let starts = replies.values.compactMap { ($0["result"] as? [String: Any])?["exposureStartWallNs"] as? NSNumber }.map { WallClockTime(nanoseconds: $0.int64Value) }
        let spread = FleetCapturePlan.spread(starts)
        let worstBound = replies.values.compactMap { ((($0["result"] as? [String: Any])?["clock"] as? [String: Any])?["errorBoundNs"] as? Double) }.max()
        // A locked node started within its own line of the instant: the spread of locked
        // nodes is within the slowest line among them.
        let slowestLine = replies.values.compactMap { (($0["result"] as? [String: Any])?["lineTimeNs"] as? NSNumber)?.doubleValue }.max()
        if json {
            var o: [String: Any] = ["nodes": replies, "missing": missing]
            if let instant { o["at"] = iso(instant) }
            if let spread { o["spreadUs"] = Double(spread.nanosecondsValue) / 1000 }
            if let worstBound { o["largestClockErrorBoundUs"] = worstBound / 1000 }
            if let slowestLine { o["slowestLineUs"] = slowestLine / 1000 }
            let data = (try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
        var lines: [String] = []
        if let instant { lines.append("at \(iso(instant))") }
        for node in replies.keys.sorted() {
            let r = replies[node]!
            guard (r["ok"] as? Bool) == true, let result = r["result"] as? [String: Any] else {
                lines.append("  \(node): not taken: \(r["error"] as? String ?? "no reason given")")
                continue
            }
            var parts = [String]()
            if let s = result["exposureStartWall"] as? String { parts.append("exposure start \(s)") }
            if let e = result["errorUs"] as? Double { parts.append(String(format: "%+.1f µs from the instant", e)) }
            if (result["locked"] as? Bool) == false { parts.append("NOT phase-locked (\(result["phaseLock"] as? String ?? "no reason given"))") }
            if let files = result["files"] as? [String] { parts.append("\(files.count) file\(files.count == 1 ? "" : "s")\(files.first.map { " (\($0)\(files.count > 1 ? ", …" : ""))" } ?? "")") }
            if let clock = result["clock"] as? [String: Any] {
                let synced = (clock["synchronised"] as? Bool) == true
                let bound = (clock["errorBoundNs"] as? Double).map { String(format: ", error bound %.3f ms", $0 / 1e6) } ?? ""
                parts.append("clock \(clock["source"] as? String ?? "?") \(synced ? "synchronised" : "not synchronised")\(bound)")
            }
            lines.append("  \(node): " + parts.joined(separator: "; "))
        }
        for node in missing { lines.append("  \(node): no reply") }
        if let spread {
            let line = slowestLine.map { String(format: " (a locked node starts within its line; the slowest is %.2f µs)", $0 / 1000) } ?? ""
            lines.append(String(format: "spread of exposure starts: %.1f µs over %d node%@", Double(spread.nanosecondsValue) / 1000, starts.count, starts.count == 1 ? "" : "s") + line)
        }
        if let worstBound { lines.append(String(format: "largest clock error bound a node reports: %.3f ms (the spread cannot show it)", worstBound / 1e6)) }
        if replies.isEmpty && missing.isEmpty { lines.append("no node is online on this broker") }
        return lines.joined(separator: "\n")
    }
}

struct FleetStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "The nodes on the broker, from their retained state: camera, streaming, clock, disk, jobs.")

    @OptionGroup var broker: BrokerOptions

    func run() async throws {
        let (client, roster, _) = try await broker.connect()
        defer { client.stop() }
        let (availability, raw, _) = await roster.snapshot()
        let states = raw.compactMapValues(Roster.object)
        if broker.json {
            var nodes: [String: Any] = [:]
            for node in Set(availability.keys).union(states.keys) {
                var o = states[node] ?? [:]
                o["availability"] = availability[node] ?? "unknown"
                nodes[node] = o
            }
            let data = (try? JSONSerialization.data(withJSONObject: ["nodes": nodes], options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])) ?? Data()
            print(String(decoding: data, as: UTF8.self))
            return
        }
        if availability.isEmpty && states.isEmpty {
            print("no node has announced itself under \(broker.topicPrefix)/ on \(broker.url)")
            return
        }
        for node in Set(availability.keys).union(states.keys).sorted() {
            let s = states[node] ?? [:]
            var parts = [availability[node] ?? "unknown"]
            if let cam = s["camera"] as? String { parts.append("\(cam) (\(s["model"] as? String ?? "?"))") }
            if let streaming = s["streaming"] as? Bool { parts.append(streaming ? "streaming" : "not streaming\((s["problem"] as? String).map { ": \($0)" } ?? "")") }
            if let clock = s["clock"] as? [String: Any] {
                let bound = (clock["errorBoundNs"] as? Double).map { String(format: " ±%.3f ms", $0 / 1e6) } ?? ""
                parts.append("clock \((clock["synchronised"] as? Bool) == true ? "synchronised" : "not synchronised")\(bound)")
            }
            if let free = (s["disk"] as? [String: Any])?["freeBytes"] as? Double { parts.append(String(format: "%.1f GB free", free / 1e9)) }
            if let jobs = s["jobs"] as? [String: String], !jobs.isEmpty { parts.append("jobs " + jobs.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")) }
            if let groups = s["groups"] as? [String], !groups.isEmpty { parts.append("groups \(groups.joined(separator: ","))") }
            print("\(node): " + parts.joined(separator: "; "))
        }
    }
}
