import ShutterbugCore

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
    public var instants: [SensorTime] {
        var out: [SensorTime] = []
        var t = start
        var rng = SplitMix64(seed: { if case .poisson(_, let s) = pattern { return s } else { return 0 } }())
        for i in 0..<max(0, count) {
            out.append(t)
            switch pattern {
            case .regular(let p): t = t + p
            case .poisson(let mean, _):
                // Inverse transform of a uniform draw in (0, 1].
                let u = max(rng.unit(), 1e-12)
                t = t + .seconds(exactly: -mean.secondsValue * log(u))
            case .burst(let n, let spacing, let pause): t = t + ((i + 1) % max(1, n) == 0 ? pause : spacing)
            }
        }
        return out
    }

    public func triggers() -> AsyncStream<Trigger> {
        let (instants, name, realTime) = (self.instants, self.name, self.realTime)
        return AsyncStream { c in
            let task = Task {
                for (i, t) in instants.enumerated() {
                    if realTime {
                        let wait = t - MonotonicClock.now()
                        if wait > .zero { try? await Task.sleep(for: wait) }
                    }
                    if Task.isCancelled { break }
                    c.yield(Trigger(instant: t, source: name, sequence: UInt64(i + 1)))
                }
                c.finish()
            }
            c.onTermination = { _ in task.cancel() }
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
