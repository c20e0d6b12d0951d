extension Duration {
    /// The duration in nanoseconds, rounded towards zero.
    public var nanosecondsValue: Int64 {
        let c = components
        return c.seconds * 1_000_000_000 + c.attoseconds / 1_000_000_000
    }

    /// The duration in microseconds, as libcamera's exposure and frame duration controls use.
    public var microsecondsValue: Double { Double(nanosecondsValue) / 1_000.0 }

    /// The duration in seconds.
    public var secondsValue: Double { Double(nanosecondsValue) / 1_000_000_000.0 }

    /// Creates a duration from a number of seconds given as a floating-point value, rounded to
    /// the nearest nanosecond.
    /// Saturates at about ±292 years and reads nan as zero, so no input traps; callers that
    /// take numbers from people check the range first (and say so).
    public static func seconds(exactly value: Double) -> Duration {
        let ns = (value * 1_000_000_000).rounded()
        guard ns.isFinite else { return value.isNaN ? .zero : .nanoseconds(value < 0 ? Int64.min : Int64.max) }
        guard ns < 9.2e18, ns > -9.2e18 else { return .nanoseconds(ns < 0 ? Int64.min : Int64.max) }
        return .nanoseconds(Int64(ns))
    }

    /// A short human form: "1/250 s" for short exposures, else "4.00 ms", "1.50 s".
    public var exposureDescription: String {
        let s = secondsValue
        if s > 0, s < 0.3 {
            let reciprocal = 1.0 / s
            if abs(reciprocal - reciprocal.rounded()) < 0.02 * reciprocal {
                return "1/\(Int(reciprocal.rounded())) s"
            }
        }
        return millisecondsDescription
    }

    /// "14.26 µs" below a millisecond, else as `millisecondsDescription`.
    public var preciseDescription: String {
        let s = secondsValue
        return s < 0.001 ? String(format2: s * 1_000_000) + " µs" : millisecondsDescription
    }

    /// "4.00 ms" below a second, "1.50 s" from a second on.
    public var millisecondsDescription: String {
        let s = secondsValue
        return s < 1 ? String(format2: s * 1000) + " ms" : String(format2: s) + " s"
    }
}

/// Parses exposure durations the way photographers and the CLI write them.
public enum ExposureParser {
    /// Parses "1/250", "4ms", "4000us", "4000µs", "0.5s", "0.004" (seconds).
    ///
    /// - Throws: `ShutterbugError` with code `.invalidArgument` naming the accepted forms.
    public static func parse(_ text: String) throws -> Duration {
        .seconds(exactly: try seconds(text))
    }

    /// The same forms as `parse`, in seconds, before any conversion (so a caller can check
    /// the range of `1/1e-300` before it becomes a `Duration`).
    public static func seconds(_ text: String) throws -> Double {
        let t = text.trimmingSpaces().lowercased()
        func fail() -> ShutterbugError {
            ShutterbugError(
                .invalidArgument,
                "cannot read exposure '\(text)': write a fraction of a second (1/250), or a number with a unit (4ms, 4000us, 0.5s)")
        }
        if let slash = t.firstIndex(of: "/") {
            guard let n = Double(t[..<slash]), let d = Double(t[t.index(after: slash)...].trimmingSuffix("s")),
                  n > 0, d > 0, n.isFinite, d.isFinite else { throw fail() }
            return n / d
        }
        let units: [(String, Double)] = [("ms", 1e-3), ("us", 1e-6), ("µs", 1e-6), ("ns", 1e-9), ("s", 1)]
        for (suffix, scale) in units where t.hasSuffix(suffix) {
            guard let v = Double(t.dropLast(suffix.count)), v > 0, v.isFinite else { throw fail() }
            return v * scale
        }
        guard let v = Double(t), v > 0, v.isFinite else { throw fail() }
        return v
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}

extension Substring {
    func trimmingSuffix(_ suffix: String) -> Substring {
        hasSuffix(suffix) ? dropLast(suffix.count) : self
    }
}
