import Hummingbird
import NIOCore
import ShutterbugCore
import Synchronization

/// Requests per client address, bounded by a token bucket: `rate` a second on average, `burst`
/// at once. Loopback clients (this machine: the CLI) are not limited unless `limitsLoopback`
/// (behind a proxy on the same machine every client arrives from 127.0.0.1). At most
/// `maxClients` addresses are remembered; past that the one seen longest ago is forgotten, so a
/// flood of addresses cannot grow the table without bound.
public final class RateLimiter: Sendable {
    public let rate: Double
    public let burst: Double
    public let limitsLoopback: Bool
    static let maxClients = 4096

    struct Bucket {
        var tokens: Double
        var last: ContinuousClock.Instant
    }

    private let buckets = Mutex<[String: Bucket]>([:])

    /// - Parameter rate: requests a second per client; the burst is twice that (at least 1).
    public init(rate: Double, limitsLoopback: Bool = false) {
        self.rate = rate
        self.limitsLoopback = limitsLoopback
        burst = max(1, rate * 2)
    }

    /// Whether a request from `client` may go ahead now; if not, the seconds until it may.
    public func admit(_ client: String, now: ContinuousClock.Instant = .now) -> (allowed: Bool, retryAfter: Double) {
        buckets.withLock { table in
            var b = table[client] ?? Bucket(tokens: burst, last: now)
            let elapsed = Double((now - b.last).components.seconds) + Double((now - b.last).components.attoseconds) * 1e-18
            b.tokens = min(burst, b.tokens + max(0, elapsed) * rate)
            b.last = now
            let allowed = b.tokens >= 1
            if allowed { b.tokens -= 1 }
            if table[client] == nil, table.count >= Self.maxClients, let oldest = table.min(by: { $0.value.last < $1.value.last })?.key {
                table.removeValue(forKey: oldest)
            }
            table[client] = b
            return (allowed, allowed ? 0 : (1 - b.tokens) / rate)
        }
    }

    /// Loopback addresses: 127.0.0.0/8 and ::1 (and IPv4 mapped into IPv6).
    static func isLoopback(_ address: SocketAddress?) -> Bool {
        guard let ip = address?.ipAddress else { return true }
        return ip.hasPrefix("127.") || ip == "::1" || ip.hasPrefix("::ffff:127.")
    }
}

/// The service's request context: Hummingbird's basics and the client's address.
public struct APIRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

extension HTTPAPI {
    /// 429 with Retry-After for a client beyond loopback that asks faster than the limit.
    struct RateLimitMiddleware<Context: RemoteAddressRequestContext>: RouterMiddleware {
        let limiter: RateLimiter?
        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            if let limiter, limiter.limitsLoopback || !RateLimiter.isLoopback(context.remoteAddress), let ip = context.remoteAddress?.ipAddress {
                let verdict = limiter.admit(ip)
                if !verdict.allowed {
                    let wait = Int(verdict.retryAfter.rounded(.up))
                    var r = HTTPAPI.error(.tooManyRequests, "too many requests from \(ip): at most \(NumberText.short(limiter.rate)) a second (bursts of \(Int(limiter.burst))); try again in \(wait) s")
                    r.headers[.retryAfter] = String(max(1, wait))
                    return r
                }
            }
            return try await next(request, context)
        }
    }
}

enum NumberText {
    /// 20, 2.5: a rate without needless decimals.
    static func short(_ v: Double) -> String { v == v.rounded() ? String(Int(v)) : String(v) }
}
