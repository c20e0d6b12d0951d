import ShutterbugCore
import Synchronization

/// Triggers in a pattern, on the camera's clock, for demos, tests and benchmarks: regular,
/// random (a Poisson process, seeded), or bursts. In real time each trigger comes at its
/// instant; in virtual time they come at once (the session waits for frames after each).
public struct PatternTriggerSource: TriggerSource {
    public enum Pattern: Sendable, Hashable {
        /// One every `period`.
        case regular(period: Duration)
        /// Exponentially distributed gaps with this mean, from a seed.
        case poisson(mean: Duration, seed: UInt64)
        /// `count` triggers `spacing` apart, then `pause`, repeated.
        case burst(count: Int, spacing: Duration, pause: Duration)
    }

    public let pattern: Pattern
    public let count: Int
    public let start: SensorTime
    /// Real time: sleep until each instant on CLOCK_MONOTONIC before yielding it.
    public let realTime: Bool

    public init(_ pattern: Pattern, count: Int, start: SensorTime, realTime: Bool) {
        self.pattern = pattern
        self.count = count
        self.start = start
        self.realTime = realTime
    }

    public var name: String {
        switch pattern {
        case .regular(let p): return "simulated regular \(p.millisecondsDescription)"
        case .poisson(let m, _): return "simulated poisson mean \(m.millisecondsDescription)"
        case .burst(let n, let s, let p): return "simulated bursts of \(n) \(s.millisecondsDescription) apart every \(p.millisecondsDescription)"
        }
    }

    /// The instants, computed (pure).
    public var instants: [SensorTime] { Array(Instants(self).prefix(max(0, count))) }

    /// The instants one after another, computed as they are asked for.
    struct Instants: Sequence, IteratorProtocol {
        let pattern: Pattern
        var remaining: Int
        var upcoming: SensorTime
        var index = 0
        var rng: SplitMix64

        init(_ source: PatternTriggerSource) {
            pattern = source.pattern
            remaining = Swift.max(0, source.count)
            upcoming = source.start
            rng = SplitMix64(seed: { if case .poisson(_, let s) = source.pattern { return s } else { return 0 } }())
        }

        mutating func next() -> SensorTime? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            let t = upcoming
            switch pattern {
            case .regular(let p): upcoming = t + p
            case .poisson(let mean, _):
                // Inverse transform of a uniform draw in (0, 1].
                let u = Swift.max(rng.unit(), 1e-12)
                upcoming = t + .seconds(exactly: -mean.secondsValue * log(u))
            case .burst(let n, let spacing, let pause): upcoming = t + ((index + 1) % Swift.max(1, n) == 0 ? pause : spacing)
            }
            index += 1
            return t
        }
    }

    /// The triggers, each made when the one before has been taken: a pattern of a million
    /// triggers in virtual time holds one at a time, not a million waiting in a buffer.
    public func triggers() -> AsyncStream<Trigger> {
        let (name, realTime) = (self.name, self.realTime)
        let state = Mutex((instants: Instants(self), sequence: UInt64(0)))
        return AsyncStream(unfolding: {
            guard !Task.isCancelled, let (t, sequence) = state.withLock({ s -> (SensorTime, UInt64)? in
                guard let t = s.instants.next() else { return nil }
                s.sequence += 1
                return (t, s.sequence)
            }) else { return nil }
            if realTime {
                let wait = t - MonotonicClock.now()
                if wait > .zero { try? await Task.sleep(for: wait) }
                if Task.isCancelled { return nil }
            }
            return Trigger(instant: t, source: name, sequence: sequence)
        })
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
