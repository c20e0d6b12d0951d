import ArgumentParser
import Fleet
import FleetService
import JobOptions
import MQTT
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// `serve`'s MQTT options: in serve.yaml, the keys of its `mqtt:` mapping (`url`, `client-id`,
/// `username`, `password-file`, `tls: {ca, cert, key}`, `topic-prefix`, `node`, `groups`,
/// `discovery-prefix`, `no-discovery`, `allow-unsynchronised-clock`, `max-clock-error`).
struct MQTTServeOptions: ParsableArguments {
    @Option(name: .customLong("mqtt-url"), help: ArgumentHelp("An MQTT broker to join as a fleet node: mqtt://HOST[:PORT] or mqtts://HOST[:PORT] (TLS). State retained, events, commands, Home Assistant discovery (docs/fleet.md).", valueName: "url"))
    var url: String?

    @Option(name: .customLong("mqtt-client-id"), help: ArgumentHelp("The MQTT client id (default shutterbug-NODE).", valueName: "id"))
    var clientID: String?

    @Option(name: .customLong("mqtt-username"), help: ArgumentHelp("The user name on the broker.", valueName: "name"))
    var username: String?

    @Option(name: .customLong("mqtt-password-file"), help: ArgumentHelp("A file holding the broker password (never shown or logged).", valueName: "file"))
    var passwordFile: String?

    @Option(name: .customLong("mqtt-tls-ca"), help: ArgumentHelp("The CA certificate the broker's is checked against (default the system's; implies TLS).", valueName: "file"))
    var tlsCA: String?

    @Option(name: .customLong("mqtt-tls-cert"), help: ArgumentHelp("This node's client certificate, for brokers that ask for one.", valueName: "file"))
    var tlsCert: String?

    @Option(name: .customLong("mqtt-tls-key"), help: ArgumentHelp("The client certificate's key.", valueName: "file"))
    var tlsKey: String?

    @Option(name: .customLong("mqtt-topic-prefix"), help: ArgumentHelp("The topics' prefix: PREFIX/NODE/state, PREFIX/fleet/cmd, ….", valueName: "prefix"))
    var topicPrefix: String = "shutterbug"

    @Option(name: .customLong("mqtt-node"), help: ArgumentHelp("This camera's name in topics and in Home Assistant: 1 to 64 of A-Z, a-z, 0-9, _ and - (default the host's name).", valueName: "name"))
    var node: String?

    @Option(name: .customLong("mqtt-groups"), help: ArgumentHelp("Groups this node is in (a fleet command for a group reaches its members only): north,roof.", valueName: "name,..."))
    var groups: String?

    @Option(name: .customLong("mqtt-discovery-prefix"), help: ArgumentHelp("Home Assistant's discovery prefix.", valueName: "prefix"))
    var discoveryPrefix: String = "homeassistant"

    @Flag(name: .customLong("mqtt-no-discovery"), help: "Publish no Home Assistant discovery configs.")
    var noDiscovery = false

    @Flag(name: .customLong("mqtt-allow-unsynchronised-clock"), help: "Take fleet captures at an instant although the system does not say its clock is synchronised (nodes sharing one machine's clock, or a clock set by other means).")
    var allowUnsynchronisedClock = false

    @Option(name: .customLong("mqtt-max-clock-error"), help: ArgumentHelp("Refuse a fleet capture at an instant when chrony's error bound is larger: 2ms, 0.5ms (default any).", valueName: "time"))
    var maxClockError: String?

    func validate() throws {
        guard url != nil || [clientID, username, passwordFile, tlsCA, tlsCert, tlsKey, node, groups, maxClockError].allSatisfy({ $0 == nil }) else {
            throw ValidationError("the mqtt options need --mqtt-url (url: in the configuration's mqtt:), the broker to join")
        }
        if let url {
            do { _ = try MQTTOptions.endpoint(url) } catch let e as ShutterbugError { throw ValidationError("--mqtt-url: \(e.message)") }
        }
        do { _ = try FleetTopics(prefix: topicPrefix, node: node ?? "node", discoveryPrefix: "homeassistant") } catch let e as ShutterbugError {
            throw ValidationError("\(e.message.contains("node name") ? "--mqtt-node" : "--mqtt-topic-prefix"): \(e.message)")
        }
        do { _ = try FleetTopics(prefix: discoveryPrefix, node: "node") } catch let e as ShutterbugError {
            throw ValidationError("--mqtt-discovery-prefix: \(e.message)")
        }
        _ = try settings()
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--mqtt-tls-cert and --mqtt-tls-key go together: give both or neither") }
        for (option, path) in [("--mqtt-password-file", passwordFile), ("--mqtt-tls-ca", tlsCA), ("--mqtt-tls-cert", tlsCert), ("--mqtt-tls-key", tlsKey)] {
            if let path, access(path, R_OK) != 0 { throw ValidationError("\(option) \(path): cannot read it") }
        }
    }

    /// The settings, or nil without a broker.
    func settings() throws -> MQTTSettings? {
        guard let url else { return nil }
        var s = MQTTSettings(url: url)
        s.clientID = clientID
        s.username = username
        s.passwordFile = passwordFile
        if tlsCA != nil || tlsCert != nil || tlsKey != nil { s.tls = .init(caFile: tlsCA, certFile: tlsCert, keyFile: tlsKey) }
        s.topicPrefix = topicPrefix
        s.node = node
        var groupSet = Set<String>()
        for g in (groups ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !g.isEmpty {
            guard (1...64).contains(g.utf8.count) else { throw ValidationError("--mqtt-groups: each group is 1 to 64 bytes, not '\(g.prefix(80))'") }
            groupSet.insert(g)
        }
        s.groups = groupSet
        s.discoveryPrefix = noDiscovery ? nil : discoveryPrefix
        s.requireClockSync = !allowUnsynchronisedClock
        if let maxClockError { s.maxClockError = try NumericInput.exposure(Substring(maxClockError), "--mqtt-max-clock-error", in: 1e-6...10, kind: "a time") }
        return s
    }
}
