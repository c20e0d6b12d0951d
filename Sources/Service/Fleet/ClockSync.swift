import Foundation
import ShutterbugCore

/// How well this machine's wall clock is synchronised, as the system says it: chrony's tracking
/// (an offset and an error bound), or systemd-timesyncd's yes or no. A fleet capture at a wall
/// instant is only as good as each node's clock: every reply carries this.
public struct ClockSync: Sendable, Hashable, Codable {
    public enum Source: String, Sendable, Codable {
        case chrony
        case timesyncd
        /// Neither answered: nothing is known of the clock.
        case unknown
    }

    public var source: Source
    public var synchronised: Bool
    /// chrony: how far the system clock is from the reference now (positive: the system clock
    /// is behind, as `chronyc tracking` says "slow"); chrony slews it away.
    public var offsetNs: Int64?
    /// chrony: the most the clock can be off the reference's time, |offset| + root delay / 2 +
    /// root dispersion.
    public var errorBoundNs: Int64?
    /// chrony: the reference (a server's name or address) and its stratum.
    public var reference: String?
    public var stratum: Int?
    /// Why the clock is not synchronised, or what is not known, in words.
    public var note: String?

    public init(source: Source, synchronised: Bool, offsetNs: Int64? = nil, errorBoundNs: Int64? = nil, reference: String? = nil, stratum: Int? = nil, note: String? = nil) {
        self.source = source
        self.synchronised = synchronised
        self.offsetNs = offsetNs
        self.errorBoundNs = errorBoundNs
        self.reference = reference
        self.stratum = stratum
        self.note = note
    }

    /// Nothing answered.
    public static let unknown = ClockSync(source: .unknown, synchronised: false, note: "neither chrony nor systemd-timesyncd answered")

    /// Reads `chronyc -c tracking` (comma-separated): reference ID, reference name, stratum,
    /// reference time, system time offset, last offset, RMS offset, frequency, residual
    /// frequency, skew, root delay, root dispersion, update interval, leap status.
    ///
    /// - Throws: `.invalidArgument` naming what is missing or malformed.
    public static func chrony(tracking text: String) throws -> ClockSync {
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        let f = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard f.count >= 14 else {
            throw ShutterbugError(.invalidArgument, "chronyc -c tracking printed \(f.count) fields, not the 14 expected: '\(line.prefix(200))'")
        }
        func seconds(_ i: Int, _ name: String) throws -> Int64 {
            guard let v = Double(f[i]), v.isFinite, abs(v) < 1e6 else {
                throw ShutterbugError(.invalidArgument, "chronyc -c tracking: the \(name) is '\(f[i])', not a number of seconds")
            }
            return Int64((v * 1e9).rounded())
        }
        guard let stratum = Int(f[2]), (0...16).contains(stratum) else {
            throw ShutterbugError(.invalidArgument, "chronyc -c tracking: the stratum is '\(f[2])', not 0...16")
        }
        let offset = try seconds(4, "system time offset")
        let delay = try seconds(10, "root delay")
        let dispersion = try seconds(11, "root dispersion")
        let leap = f[13]
        // A reference ID of 0 (or chrony's "local" 7F7F0101 without a local stratum) means no
        // source was selected; "Not synchronised" says so in words.
        let selected = f[0] != "00000000" && stratum < 16
        let synchronised = selected && leap != "Not synchronised"
        return ClockSync(source: .chrony, synchronised: synchronised, offsetNs: offset,
                         errorBoundNs: abs(offset) + abs(delay) / 2 + abs(dispersion),
                         reference: f[1].isEmpty ? f[0] : f[1], stratum: stratum,
                         note: synchronised ? nil : "chrony is not synchronised (leap status '\(leap)', stratum \(stratum))")
    }

    /// Reads `timedatectl show` (`KEY=value` lines): `NTPSynchronized=yes` is all timesyncd
    /// says; it gives no error bound.
    public static func timesyncd(show text: String) -> ClockSync {
        var values: [Substring: Substring] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            guard let eq = line.firstIndex(of: "=") else { continue }
            values[line[..<eq]] = line[line.index(after: eq)...]
        }
        let synchronised = values["NTPSynchronized"] == "yes"
        return ClockSync(source: .timesyncd, synchronised: synchronised,
                         note: synchronised ? "systemd-timesyncd gives no error bound" : "systemd-timesyncd says the clock is not synchronised (NTPSynchronized=\(values["NTPSynchronized"] ?? "absent"))")
    }
}
