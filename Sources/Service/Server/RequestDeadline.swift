import Hummingbird
import HummingbirdCore
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// A connection gets `limit` to send each whole request, head and body: a client that trickles
/// a byte every few seconds (which resets the idle timeout each time) is closed when it runs
/// out, so a few hundred such connections cannot hold the service. The clock runs from the
/// connection's start, and again from each response sent, to the request's end; the time a
/// request takes to answer (a capture) is not counted.
///
/// Also: a request answered before its body was read (a 401, 413 or 415 refusing it early)
/// closes the connection once the answer is out, rather than reading on what nobody will use;
/// and `Expect: 100-continue` is answered, so a client waiting for it sends its body at once.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let limit: TimeAmount
    private var timer: Scheduled<Void>?
    /// The request being read has come whole (its end read).
    private var requestComplete = true

    init(limit: TimeAmount) { self.limit = limit }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            requestComplete = false
            if timer == nil { arm(context) }
            if head.headerFields[.expect]?.lowercased() == "100-continue" {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            }
        case .body:
            break
        case .end:
            requestComplete = true
            timer?.cancel()
            timer = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        if requestComplete {
            // The next request's clock starts once this answer is out.
            context.write(data, promise: promise)
            arm(context)
        } else {
            // Answered before its body came: the rest of it is not read.
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.cascade(to: promise)
            context.write(data, promise: written)
            context.flush()
            let channel = context.channel
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    private func arm(_ context: ChannelHandlerContext) {
        timer?.cancel()
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: limit) { channel.close(promise: nil) }
    }
}

/// The connections open from each client address, shared by every connection's
/// `ConnectionLimitHandler`.
public final class ClientConnections: Sendable {
    public let limit: Int
    /// Clients on this machine (127.0.0.0/8, ::1) are not limited, as the request rate is not:
    /// the machine's own probes, proxy and tools.
    public let exemptsLoopback: Bool
    private let open = Mutex<[String: Int]>([:])

    public init(limit: Int, exemptsLoopback: Bool = true) {
        self.limit = limit
        self.exemptsLoopback = exemptsLoopback
    }

    /// A client on this machine, when those are exempt.
    private func exempt(_ client: String) -> Bool {
        exemptsLoopback && (client.hasPrefix("127.") || client == "::1" || client.hasPrefix("::ffff:127."))
    }

    /// Counts a connection from `client`; false (not counted) when it has `limit` open already.
    func admit(_ client: String) -> Bool {
        if exempt(client) { return true }
        return open.withLock { o in
            guard o[client, default: 0] < limit else { return false }
            o[client, default: 0] += 1
            return true
        }
    }

    func release(_ client: String) {
        if exempt(client) { return }
        open.withLock { o in
            let n = o[client, default: 0] - 1
            o[client] = n > 0 ? n : nil
        }
    }

    /// Connections open from `client` now.
    public func count(_ client: String) -> Int { open.withLock { $0[client, default: 0] } }
}

/// One client beyond this machine may hold at most `limit` connections: past that a new one is answered 503 to its
/// first request and closed (closed at once if no request comes within a second), so a client
/// that opens hundreds (slow or stalled ones, each within its deadlines) cannot leave none for
/// the others (a status probe, Home Assistant, the page).
final class ConnectionLimitHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let clients: ClientConnections
    /// The client address counted for this connection (nil: not counted, or refused).
    private var counted: String?
    /// Refused: the client's address, until its first request is answered.
    private var refused: String?
    private var answered = false
    private var closer: Scheduled<Void>?

    init(clients: ClientConnections) { self.clients = clients }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { release() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let client = refused else {
            context.fireChannelRead(data)
            return
        }
        // A refused connection's requests go nowhere: the first is answered, then it closes.
        guard case .head = unwrapInboundIn(data), !answered else { return }
        answered = true
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.connection] = "close"
        fields[.retryAfter] = "5"
        let body = ByteBuffer(string: #"{"error":"too many connections from \#(client): \#(clients.limit) are open; close some and try again"}"# + "\n")
        fields[.contentLength] = "\(body.readableBytes)"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .serviceUnavailable, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    private func admit(_ context: ChannelHandlerContext) {
        guard counted == nil, refused == nil, let client = context.channel.remoteAddress?.ipAddress else { return }
        if clients.admit(client) {
            counted = client
            return
        }
        refused = client
        let channel = context.channel
        closer = context.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
    }

    private func release() {
        closer?.cancel()
        closer = nil
        guard let client = counted else { return }
        counted = nil
        clients.release(client)
    }
}

extension HTTPAPI {
    /// Connections one client address may hold open at once.
    public static let connectionsPerClient = 64

    /// The HTTP/1 server's connection rules: one idle for 15 s is closed (a slow or stalled
    /// client, a keep-alive left open), each request must come whole within `requestDeadline`
    /// (`RequestDeadlineHandler`), and one client holds at most `clients.limit` connections
    /// (`ConnectionLimitHandler`).
    public static func http1(requestDeadline: TimeAmount = .seconds(30),
                             clients: ClientConnections = ClientConnections(limit: connectionsPerClient)) -> HTTP1Channel.Configuration {
        .init(additionalChannelHandlers: [ConnectionLimitHandler(clients: clients), RequestDeadlineHandler(limit: requestDeadline)], idleTimeout: .seconds(15))
    }
}
