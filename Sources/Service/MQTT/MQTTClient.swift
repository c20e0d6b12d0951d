import CMosquitto
#if canImport(Glibc)
import Glibc
#endif
import ShutterbugCore
import Synchronization

private let success = Int32(MOSQ_ERR_SUCCESS.rawValue)

/// One MQTT message as it came in.
public struct MQTTMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var retained: Bool
    /// MQTT 5: where the sender wants the answer, and what to send back with it.
    public var responseTopic: String?
    public var correlationData: [UInt8]?

    public init(topic: String, payload: [UInt8], retained: Bool = false, responseTopic: String? = nil, correlationData: [UInt8]? = nil) {
        (self.topic, self.payload, self.retained, self.responseTopic, self.correlationData) = (topic, payload, retained, responseTopic, correlationData)
    }
}

/// Where a client connects and as whom.
public struct MQTTOptions: Sendable {
    public var host: String
    public var port: Int
    public var clientID: String
    public var username: String?
    public var password: String?
    /// Published by the broker, retained, when the connection is lost without a goodbye.
    public var will: (topic: String, payload: [UInt8])?
    public var keepAlive: Int = 30
    /// TLS: the CA certificate to check the broker's against (nil: the system's CA store), and
    /// this client's certificate and key for brokers that ask for one.
    public var tls: TLS?
    public struct TLS: Sendable, Hashable {
        public var caFile: String?
        public var certFile: String?
        public var keyFile: String?
        public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil) {
            (self.caFile, self.certFile, self.keyFile) = (caFile, certFile, keyFile)
        }
    }
    /// Messages kept for a reader that falls behind (the newest; older ones are dropped).
    public var inboxLimit = 1024
    /// The wait before each reconnection: the least times the attempts so far, up to the most
    /// (1, 2, 3 … 30 s by default). libmosquitto's "exponential" backoff is the least times the
    /// attempts squared (1, 4, 9, 16, 25 s: a 30 s outage left the client away 55 s), so it is
    /// not used.
    public var reconnectDelay: ClosedRange<Int> = 1...30

    public init(host: String, port: Int = 1883, clientID: String, username: String? = nil, password: String? = nil, will: (topic: String, payload: [UInt8])? = nil) {
        (self.host, self.port, self.clientID, self.username, self.password, self.will) = (host, port, clientID, username, password, will)
    }

    /// A broker's URL: `mqtt://HOST[:PORT]` (1883 by default) or `mqtts://HOST[:PORT]` (TLS,
    /// 8883); an IPv6 address in brackets.
    ///
    /// - Throws: `.invalidArgument` naming what is wrong and what is accepted.
    public static func endpoint(_ url: String) throws -> (host: String, port: Int, tls: Bool) {
        let accepted = "mqtt://HOST[:PORT] or mqtts://HOST[:PORT], e.g. mqtt://broker.local:1883"
        let scheme: (String, Int, Bool)? = url.hasPrefix("mqtt://") ? ("mqtt://", 1883, false) : url.hasPrefix("mqtts://") ? ("mqtts://", 8883, true) : nil
        guard let (prefix, defaultPort, tls) = scheme, url.utf8.count <= 300 else {
            throw ShutterbugError(.invalidArgument, "the broker URL '\(url.prefix(80))' must be \(accepted)")
        }
        var rest = Substring(url.dropFirst(prefix.count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("@"), !rest.isEmpty else {
            throw ShutterbugError(.invalidArgument, "the broker URL '\(url.prefix(80))' must be \(accepted) (no path, no user: the user name and password are options of their own)")
        }
        var host = rest
        var port = defaultPort
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw ShutterbugError(.invalidArgument, "the broker URL '\(url.prefix(80))' has an IPv6 address without its ']'") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()) else { throw ShutterbugError(.invalidArgument, "the broker URL '\(url.prefix(80))' must be \(accepted)") }
                port = p
            }
        } else if let colon = rest.lastIndex(of: ":") {
            guard let p = Int(rest[rest.index(after: colon)...]) else {
                throw ShutterbugError(.invalidArgument, "the broker URL's port '\(rest[rest.index(after: colon)...].prefix(20))' must be a number in 1...65535")
            }
            host = rest[..<colon]
            port = p
        }
        guard (1...65535).contains(port) else { throw ShutterbugError(.invalidArgument, "the broker URL's port must be in 1...65535, not \(port)") }
        guard !host.isEmpty else { throw ShutterbugError(.invalidArgument, "the broker URL '\(url.prefix(80))' names no host: \(accepted)") }
        return (String(host), port, tls)
    }
}

/// An MQTT 5 client over libmosquitto, its network on libmosquitto's own thread: publishing
/// only queues (it never waits on the network, so a broker that is down never stalls a
/// capture), the library reconnects with a doubling delay, and on every connection the client
/// subscribes again and publishes its retained state again (a broker restarted without
/// persistence has forgotten it).
public final class MQTTClient: Sendable {
    private struct State {
        var subscriptions: [String: Int32] = [:]
        /// The newest payload of each retained topic this client owns.
        var retained: [String: [UInt8]] = [:]
        var connected = false
        var connections = 0
        /// Messages not sent because the client was not connected.
        var unsent = 0
        /// Messages received and dropped unread: the reader fell `inboxLimit` behind.
        var inboxDropped = 0
        /// Why the last connection attempt failed, in the broker's words.
        var problem: String?
        var stopped = false
    }

    private let handle: Handle
    private let state = Mutex(State())
    private let incoming: AsyncStream<MQTTMessage>.Continuation
    /// Every message on the topics subscribed to, in order (the newest `inboxLimit` kept when
    /// the reader falls behind); ends when the client stops.
    public let messages: AsyncStream<MQTTMessage>
    private let events: AsyncStream<Bool>.Continuation
    /// True on each connection, false on each loss; ends when the client stops.
    public let connectionChanges: AsyncStream<Bool>

    /// libmosquitto's handle, sendable: the library locks its own state.
    private final class Handle: @unchecked Sendable {
        let mosq: OpaquePointer
        init(_ m: OpaquePointer) { mosq = m }
    }

    private static let initialised: Bool = { mosquitto_lib_init() == success }()

    /// - Throws: `.invalidArgument` for a port outside 1...65535 or a client id libmosquitto
    ///   refuses; `.system` when the library cannot start.
    public init(_ options: MQTTOptions) throws {
        guard Self.initialised else { throw ShutterbugError(.system, "libmosquitto could not be initialised") }
        guard (1...65535).contains(options.port) else { throw ShutterbugError(.invalidArgument, "the MQTT port must be in 1...65535, not \(options.port)") }
        (messages, incoming) = AsyncStream<MQTTMessage>.makeStream(bufferingPolicy: .bufferingNewest(max(1, options.inboxLimit)))
        (connectionChanges, events) = AsyncStream<Bool>.makeStream(bufferingPolicy: .bufferingNewest(64))
        guard let m = mosquitto_new(options.clientID, true, nil) else {
            throw ShutterbugError(.invalidArgument, "libmosquitto refused the client id '\(options.clientID.prefix(80))'")
        }
        handle = Handle(m)
        mosquitto_user_data_set(m, Unmanaged.passUnretained(self).toOpaque())
        _ = sbmosq_use_v5(m)
        // Small packets at once (no Nagle): a command and its reply are a few hundred bytes
        // each, and waiting for the previous one's ACK cost some 40 ms a hop.
        _ = mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1)
        if let u = options.username { mosquitto_username_pw_set(m, u, options.password) }
        if let tls = options.tls {
            // Without a CA file, the system's store (libmosquitto's OS certificates; and its CA
            // directory where a client certificate needs tls_set, which takes no empty CA).
            var rc = success
            if tls.caFile == nil { rc = mosquitto_int_option(m, MOSQ_OPT_TLS_USE_OS_CERTS, 1) }
            if rc == success, tls.caFile != nil || tls.certFile != nil {
                rc = mosquitto_tls_set(m, tls.caFile, tls.caFile == nil ? "/etc/ssl/certs" : nil, tls.certFile, tls.keyFile, nil)
            }
            // (A throw from here on runs deinit, which destroys the handle.)
            guard rc == success else {
                throw ShutterbugError(.invalidArgument, "libmosquitto refused the TLS files (CA \(tls.caFile ?? "the system's"), certificate \(tls.certFile ?? "none"), key \(tls.keyFile ?? "none")): \(String(cString: mosquitto_strerror(rc)))")
            }
        }
        if let w = options.will { _ = w.payload.withUnsafeBytes { sbmosq_will(m, w.topic, $0.baseAddress, Int32($0.count), 1, true) } }
        mosquitto_reconnect_delay_set(m, UInt32(max(1, options.reconnectDelay.lowerBound)), UInt32(max(1, options.reconnectDelay.upperBound)), false)
        mosquitto_connect_v5_callback_set(m) { _, user, rc, _, _ in
            guard let user else { return }
            Unmanaged<MQTTClient>.fromOpaque(user).takeUnretainedValue().connected(rc)
        }
        mosquitto_disconnect_v5_callback_set(m) { _, user, _, _ in
            guard let user else { return }
            Unmanaged<MQTTClient>.fromOpaque(user).takeUnretainedValue().lost()
        }
        mosquitto_message_v5_callback_set(m) { _, user, message, props in
            guard let user, let message else { return }
            Unmanaged<MQTTClient>.fromOpaque(user).takeUnretainedValue().received(message.pointee, props)
        }
        // The first connection is made on the network thread too: a broker that is down now is
        // tried again with the reconnection delay, and nothing here waits for it.
        _ = mosquitto_connect_async(m, options.host, Int32(options.port), Int32(max(5, options.keepAlive)))
        let rc = mosquitto_loop_start(m)
        guard rc == success else {
            throw ShutterbugError(.system, "libmosquitto's network thread did not start: \(String(cString: mosquitto_strerror(rc)))")
        }
    }

    deinit {
        stop()
        mosquitto_destroy(handle.mosq)
    }

    /// Disconnects and stops the network thread, at once also when the broker is unreachable;
    /// the streams end. `sendingWill`: the broker publishes the last will all the same (MQTT 5's
    /// "disconnect with will message"), as a node going away on purpose says it is offline.
    public func stop(sendingWill: Bool = false) {
        let first = state.withLock { s -> Bool in
            defer { s.stopped = true }
            return !s.stopped
        }
        guard first else { return }
        // The disconnect marks the client as leaving, which ends the network thread's loop
        // (also while it waits out a reconnection delay: a test shows stop returns at once).
        if sendingWill {
            _ = mosquitto_disconnect_v5(handle.mosq, Int32(MQTT_RC_DISCONNECT_WITH_WILL_MSG.rawValue), nil)
        } else {
            mosquitto_disconnect(handle.mosq)
        }
        mosquitto_loop_stop(handle.mosq, false)
        incoming.finish()
        events.finish()
    }

    /// Waits until what was published has been written to the broker's socket (at most
    /// `timeout`; at once while not connected): before a planned disconnect, which would
    /// otherwise drop what is still queued.
    public func flush(timeout: Duration = .seconds(2)) async {
        let end = ContinuousClock.now + timeout
        while status.connected, mosquitto_want_write(handle.mosq), ContinuousClock.now < end {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Whether the client is connected now, how many times it has connected, how many
    /// messages it could not send while it was not, and why the broker last refused it.
    public var status: (connected: Bool, connections: Int, unsent: Int, problem: String?) {
        state.withLock { ($0.connected, $0.connections, $0.unsent, $0.problem) }
    }

    /// Messages received that the reader never saw: it fell `inboxLimit` messages behind and
    /// the oldest were dropped.
    public var inboxDropped: Int { state.withLock { $0.inboxDropped } }

    /// Subscribes now if connected, and again on every connection.
    public func subscribe(_ topic: String, qos: Int = 1) {
        let connected = state.withLock { s -> Bool in
            s.subscriptions[topic] = Int32(qos)
            return s.connected
        }
        if connected { sbmosq_subscribe(handle.mosq, topic, Int32(qos)) }
    }

    /// Publishes `payload`; a retained one is kept and published again on every connection.
    /// Returns false when it could not be sent now (not connected, or refused).
    @discardableResult
    public func publish(_ topic: String, _ payload: [UInt8], qos: Int = 0, retain: Bool = false, responseTopic: String? = nil, correlationData: [UInt8]? = nil) -> Bool {
        if retain { state.withLock { $0.retained[topic] = payload } }
        let rc = send(topic, payload, qos: qos, retain: retain, responseTopic: responseTopic, correlationData: correlationData)
        if rc != success { state.withLock { $0.unsent += 1 } }
        return rc == success
    }

    /// Removes a retained message (an empty retained payload, as Home Assistant's discovery
    /// takes for "gone"), and stops publishing it again.
    public func clearRetained(_ topic: String) {
        state.withLock { _ = $0.retained.removeValue(forKey: topic) }
        _ = send(topic, [], qos: 1, retain: true, responseTopic: nil, correlationData: nil)
    }

    private func send(_ topic: String, _ payload: [UInt8], qos: Int, retain: Bool, responseTopic: String?, correlationData: [UInt8]?) -> Int32 {
        payload.withUnsafeBytes { p in
            (correlationData ?? []).withUnsafeBytes { c in
                sbmosq_publish(handle.mosq, topic, p.baseAddress, Int32(p.count), Int32(qos), retain, responseTopic,
                               correlationData == nil ? nil : c.baseAddress, Int32(c.count))
            }
        }
    }

    // MARK: On the network thread

    private func connected(_ rc: Int32) {
        guard rc == 0 else {
            let why = String(cString: mosquitto_reason_string(rc))
            state.withLock { $0.problem = "the broker refused the connection: \(why) (\(rc))" }
            return
        }
        let (subscriptions, retained) = state.withLock { s -> ([String: Int32], [String: [UInt8]]) in
            s.connected = true
            s.problem = nil
            s.connections += 1
            return (s.subscriptions, s.retained)
        }
        for (topic, qos) in subscriptions.sorted(by: { $0.key < $1.key }) { sbmosq_subscribe(handle.mosq, topic, qos) }
        for (topic, payload) in retained.sorted(by: { $0.key < $1.key }) { _ = send(topic, payload, qos: 1, retain: true, responseTopic: nil, correlationData: nil) }
        events.yield(true)
    }

    private func lost() {
        state.withLock { $0.connected = false }
        events.yield(false)
    }

    private func received(_ m: mosquitto_message, _ props: OpaquePointer?) {
        let topic = m.topic.map { String(cString: $0) } ?? ""
        let payload = m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(m.payloadlen))) } ?? []
        var response: String?
        if let r = sbmosq_response_topic(props) {
            response = String(cString: r)
            free(r)
        }
        var correlation: [UInt8]?
        var length: UInt16 = 0
        if let c = sbmosq_correlation(props, &length) {
            correlation = Array(UnsafeRawBufferPointer(start: c, count: Int(length)))
            free(c)
        }
        if case .dropped = incoming.yield(MQTTMessage(topic: topic, payload: payload, retained: m.retain, responseTopic: response, correlationData: correlation)) {
            state.withLock { $0.inboxDropped += 1 }
        }
    }

    /// Closes the connection under the client without a goodbye, as a network cut would: the
    /// broker publishes the last will, and the client reconnects. For tests of both.
    public func cutConnection() {
        let fd = mosquitto_socket(handle.mosq)
        if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
    }
}
