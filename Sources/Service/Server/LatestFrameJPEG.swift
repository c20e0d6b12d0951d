import Synchronization

/// The newest frame as a small JPEG for `/api/frame.jpg`: made on demand, at most once per
/// `maxAge`, and shared by every request meanwhile. One refresh is in flight at a time and
/// whoever asks during it waits for that one, so twenty pollers cost one capture and one
/// encode, not twenty; nothing of it runs on the service's actor, so status and captures
/// answer while a picture is made. Nothing is made while nobody asks.
final class LatestFrameJPEG: Sendable {
    private struct State {
        var picture: (jpeg: [UInt8], made: ContinuousClock.Instant)?
        var refresh: Task<[UInt8], any Error>?
    }

    private let state = Mutex(State())
    let maxAge: Duration

    init(maxAge: Duration) { self.maxAge = maxAge }

    /// The newest picture if it is younger than `maxAge`, else the one `make` makes (joining a
    /// refresh already under way).
    func jpeg(_ make: @escaping @Sendable () async throws -> [UInt8]) async throws -> [UInt8] {
        enum Next { case ready([UInt8]), wait(Task<[UInt8], any Error>) }
        let next: Next = state.withLock { s in
            if let p = s.picture, ContinuousClock.now - p.made < maxAge { return .ready(p.jpeg) }
            if let t = s.refresh { return .wait(t) }
            let t = Task { [self] in
                do {
                    let jpeg = try await make()
                    state.withLock { $0.picture = (jpeg, ContinuousClock.now); $0.refresh = nil }
                    return jpeg
                } catch {
                    state.withLock { $0.refresh = nil }
                    throw error
                }
            }
            s.refresh = t
            return .wait(t)
        }
        switch next {
        case .ready(let jpeg): return jpeg
        case .wait(let t): return try await t.value
        }
    }
}
