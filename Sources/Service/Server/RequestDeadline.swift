import Hummingbird
import HummingbirdCore
import HTTPTypes
import NIOCore
import NIOHTTPTypes

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

extension HTTPAPI {
    /// The HTTP/1 server's connection rules: one idle for 15 s is closed (a slow or stalled
    /// client, a keep-alive left open), and each request must come whole within
    /// `requestDeadline` (`RequestDeadlineHandler`).
    public static func http1(requestDeadline: TimeAmount = .seconds(30)) -> HTTP1Channel.Configuration {
        .init(additionalChannelHandlers: [RequestDeadlineHandler(limit: requestDeadline)], idleTimeout: .seconds(15))
    }
}
