/// One option of a configuration or job file: its key (a command's long option without the
/// dashes), its value and the line it stands on.
public struct OptionSetting: Sendable, Hashable {
    public enum Value: Sendable, Hashable {
        /// `true` or `false`: a flag given or left out.
        case flag(Bool)
        case text(String)
        /// A YAML list, given to the command joined with commas (`ev: [-2, 0, 2]` is `--ev -2,0,2`).
        case list([String])
    }

    public var key: String
    public var value: Value
    public var line: Int

    public init(key: String, value: Value, line: Int) {
        self.key = key
        self.value = value
        self.line = line
    }

    /// The words a command line would carry: `["--ev", "-2,0,2"]`, `["--virtual-time"]`, or none
    /// for a flag set to false.
    public var arguments: [String] {
        switch value {
        case .flag(let on): return on ? ["--" + key] : []
        case .text(let t): return ["--" + key, t]
        case .list(let items): return ["--" + key, items.joined(separator: ",")]
        }
    }
}

/// A mistake in a configuration or job file, at the line it stands on.
public struct ConfigurationProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var file: String
    /// 1-based; nil where the whole file is meant.
    public var line: Int?
    public var key: String?
    public var message: String

    public init(file: String, line: Int?, key: String?, message: String) {
        self.file = file
        self.line = line
        self.key = key
        self.message = message
    }

    /// `job.yaml:3: interval: must be in 0.1 s...7 d, not '0s'`, as compilers print.
    public var description: String {
        "\(file)\(line.map { ":\($0)" } ?? ""): \(key.map { "\($0): " } ?? "")\(message)"
    }
}

/// Every mistake found in a file, in line order.
public struct ConfigurationProblems: Error, Sendable, CustomStringConvertible {
    public var problems: [ConfigurationProblem]

    public init(_ problems: [ConfigurationProblem]) {
        self.problems = problems.sorted { ($0.line ?? 0) < ($1.line ?? 0) }
    }

    public var description: String { problems.map(\.description).joined(separator: "\n") }
}
