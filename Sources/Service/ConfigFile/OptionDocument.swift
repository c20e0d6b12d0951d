import Yams

#if canImport(Glibc)
import Glibc
#endif

/// A YAML document whose mappings hold a command's long options: `interval: 30s`,
/// `ev: [-2, 0, 2]`, `virtual-time: true`. Each key is kept with the line it stands on, so a
/// mistake found later (a value out of range, an unknown option) is reported at its line.
///
/// Values are turned into the text a command line would carry: a list is joined with commas, a
/// number or a string is taken as written, `true` is a flag given, `false` a flag left out. What
/// cannot be an option (a null, a nested mapping, a list of lists) is a problem at its line.
public struct OptionDocument {
    /// The file's name, as problems quote it.
    public let file: String
    let root: Node

    /// Parses `text`; a YAML syntax error is a problem at its line.
    public init(text: String, file: String) throws(ConfigurationProblems) {
        self.file = file
        do {
            guard let node = try Yams.compose(yaml: text) else {
                throw ConfigurationProblems([.init(file: file, line: 1, key: nil, message: "the file is empty: it needs a mapping of options, one per line (key: value)")])
            }
            root = node
        } catch let e as ConfigurationProblems {
            throw e
        } catch let e as YamlError {
            throw ConfigurationProblems(Self.problems(e, text: text, file: file))
        } catch {
            throw ConfigurationProblems([.init(file: file, line: nil, key: nil, message: "\(error)")])
        }
    }

    /// Reads and parses the file at `path`.
    public init(path: String) throws(ConfigurationProblems) {
        let text: String
        do {
            text = try Self.read(path)
        } catch {
            throw ConfigurationProblems([.init(file: path, line: nil, key: nil, message: error.message)])
        }
        try self.init(text: text, file: path)
    }

    /// The top level's options; `nested` names the keys that hold something else (a list of
    /// jobs), handed back as they are; `groups` names the keys whose mapping holds options
    /// named after it (`mqtt: {url: …, client-id: …}` is `--mqtt-url` and `--mqtt-client-id`;
    /// `mqtt: {tls: {ca: …}}` is `--mqtt-tls-ca`).
    public func options(nested: Set<String> = [], groups: Set<String> = []) -> (options: [OptionSetting], nested: [String: Node], problems: [ConfigurationProblem]) {
        options(of: root, nested: nested, groups: groups)
    }

    /// The options of one mapping in the document (the top level, or an entry of a nested list).
    public func options(of node: Node, nested: Set<String> = [], groups: Set<String> = [], prefix: String = "") -> (options: [OptionSetting], nested: [String: Node], problems: [ConfigurationProblem]) {
        guard case .mapping(let mapping) = node else {
            return ([], [:], [problem(at: node, key: nil, "must be a mapping of options (key: value), not \(Self.kind(node))")])
        }
        var options: [OptionSetting] = []
        var inner: [String: Node] = [:]
        var problems: [ConfigurationProblem] = []
        for (k, v) in mapping {
            let line = Self.line(k)
            guard case .scalar(let ks) = k, !ks.string.isEmpty else {
                problems.append(problem(at: k, key: nil, "a key must be a plain name such as interval or ev"))
                continue
            }
            let key = prefix + ks.string
            if nested.contains(key) {
                inner[key] = v
                continue
            }
            if case .mapping = v, prefix.isEmpty ? groups.contains(key) : true {
                // A group's keys, and its own groups' (mqtt: {tls: {ca: …}}), named from it.
                let read = self.options(of: v, groups: groups, prefix: key + "-")
                options += read.options
                problems += read.problems
                continue
            }
            switch v {
            case .scalar(let s):
                if s.style == .plain && ["", "~", "null", "Null", "NULL"].contains(s.string) {
                    problems.append(.init(file: file, line: line, key: key, message: "has no value; give one, or leave the key out"))
                } else if s.style == .plain, let flag = Bool.construct(from: s) {
                    options.append(.init(key: key, value: .flag(flag), line: line))
                } else {
                    options.append(.init(key: key, value: .text(s.string), line: line))
                }
            case .sequence(let seq):
                var items: [String] = []
                var wrong = false
                for item in seq {
                    guard case .scalar(let s) = item else {
                        problems.append(problem(at: item, key: key, "a list here holds plain values (numbers, times), not \(Self.kind(item))"))
                        wrong = true
                        continue
                    }
                    items.append(s.string)
                }
                if wrong { continue }
                if items.isEmpty {
                    problems.append(.init(file: file, line: line, key: key, message: "the list is empty; give at least one value, or leave the key out"))
                } else {
                    options.append(.init(key: key, value: .list(items), line: line))
                }
            case .mapping, .alias:
                problems.append(problem(at: v, key: key, "takes a value or a list of values, not \(Self.kind(v))"))
            }
        }
        return (options, inner, problems)
    }

    /// One entry of a list of mappings (a service's `jobs:` or `triggers:`): its `name`, the line
    /// it begins on, and its options.
    public struct Entry: Sendable {
        public var name: String?
        public var line: Int
        public var options: [OptionSetting]
        public init(name: String?, line: Int, options: [OptionSetting]) {
            self.name = name
            self.line = line
            self.options = options
        }
    }

    /// The entries of a list of mappings, each with a `name` key and a command's options; what is
    /// not such a list, or an entry without a name, is a problem at its line.
    public func entries(of node: Node, key: String) -> (entries: [Entry], problems: [ConfigurationProblem]) {
        guard case .sequence(let seq) = node else {
            return ([], [problem(at: node, key: key, "must be a list of mappings, each starting with its name (- name: roof), not \(Self.kind(node))")])
        }
        var entries: [Entry] = []
        var problems: [ConfigurationProblem] = []
        for item in seq {
            let read = options(of: item)
            problems += read.problems.map { var p = $0; p.key = "\(key): " + ($0.key ?? ""); return p }
            guard case .mapping = item else { continue }
            var options = read.options
            let name = options.firstIndex { $0.key == "name" }.map { options.remove(at: $0) }
            var text: String?
            if let name {
                if case .text(let t) = name.value, (1...64).contains(t.count), t.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }), !t.hasPrefix("-") {
                    text = t
                } else {
                    problems.append(.init(file: file, line: name.line, key: "\(key): name", message: "1 to 64 letters, digits, '-' or '_' (it names a folder), e.g. roof"))
                }
            } else {
                problems.append(problem(at: item, key: key, "each entry needs a name (- name: roof)"))
            }
            if let t = text, entries.contains(where: { $0.name == t }) {
                problems.append(.init(file: file, line: name?.line ?? Self.line(item), key: "\(key): name", message: "'\(t)' is given twice; each entry needs its own name"))
            }
            entries.append(Entry(name: text, line: Self.line(item), options: options))
        }
        return (entries, problems)
    }

    /// A problem at a node's line.
    public func problem(at node: Node, key: String?, _ message: String) -> ConfigurationProblem {
        .init(file: file, line: Self.line(node), key: key, message: message)
    }

    static func line(_ node: Node) -> Int { node.mark.map { $0.line } ?? 1 }

    static func kind(_ node: Node) -> String {
        switch node {
        case .scalar: return "a value"
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        case .alias: return "an alias"
        }
    }

    static func problems(_ e: YamlError, text: String, file: String) -> [ConfigurationProblem] {
        if case .duplicatedKeysInMapping(let keys, _) = e {
            // Yams names the keys, not where they stand: each is found again in the text.
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmed(" -") }
            return keys.map { key in
                let at = lines.indices.filter { lines[$0].hasPrefix(key + ":") || lines[$0].hasPrefix("\"\(key)\":") }.map { $0 + 1 }
                let again = at.count > 1 ? at[1] : at.first
                return .init(file: file, line: again, key: key, message: "given twice\(at.count > 1 ? " (first on line \(at[0]))" : ""); give it once")
            }
        }
        let text = "\(e)"
        // Yams says "LINE:COLUMN: error: KIND: PROBLEM" followed by the line and a caret.
        let parts = text.split(separator: ":", maxSplits: 4, omittingEmptySubsequences: false)
        if parts.count == 5, let line = Int(parts[0]), Int(parts[1]) != nil {
            let problem = parts[4].split(separator: "\n").first.map { $0.trimmed(" ") } ?? ""
            return [.init(file: file, line: line, key: nil, message: "not valid YAML (\(parts[3].trimmed(" ")): \(problem))")]
        }
        return [.init(file: file, line: nil, key: nil, message: "not valid YAML: \(text)")]
    }

    /// The whole file as UTF-8; at most 1 MiB (a configuration, not a data file).
    static func read(_ path: String) throws(ReadError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ReadError(message: "cannot be read: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ReadError(message: "cannot be read: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            bytes += chunk[0..<n]
            guard bytes.count <= 1 << 20 else { throw ReadError(message: "is larger than 1 MiB: not a configuration file") }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw ReadError(message: "is not UTF-8 text") }
        return text
    }

    struct ReadError: Error { var message: String }
}

extension String {
    func trimmed(_ set: String) -> String {
        var s = Substring(self)
        while let c = s.first, set.contains(c) { s = s.dropFirst() }
        while let c = s.last, set.contains(c) { s = s.dropLast() }
        return String(s)
    }
}

extension Substring {
    func trimmed(_ set: String) -> String { String(self).trimmed(set) }
}
