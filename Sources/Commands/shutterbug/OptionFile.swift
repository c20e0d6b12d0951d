import ArgumentParser
import ConfigFile
import JobOptions

/// A command's options kept in a YAML file whose keys are the command's long options: a
/// timelapse job (`shutterbug timelapse --job-file roof.yaml`: `interval: 30s`, `ev: [-2, 0, 2]`)
/// or the service's configuration (`shutterbug serve --config /etc/shutterbug/serve.yaml`:
/// `listen: 0.0.0.0:8080`, `output: /var/lib/shutterbug`). The file's options are given to the
/// command before the command line's own, so an option on the command line overrides the file's.
///
/// Every mistake is found with its line: YAML syntax, a key that is no option (with the nearest
/// option suggested), a value of the wrong kind, and a value out of range or in conflict with
/// another (as the command's own validation says it).
struct OptionFile: Sendable {
    /// The command's name on the command line.
    var command: String
    /// The option naming the file.
    var option: String
    /// What a person calls the file, in messages.
    var what: String
    /// Parses (and validates) the command's arguments.
    var parse: @Sendable ([String]) throws -> Void
    /// The message for an error `parse` threw, as ArgumentParser words it.
    var message: @Sendable (Error) -> String
    /// Lists of named entries the file holds beside its options (the service's jobs and
    /// triggers), each entry another command's options.
    var sections: [Section] = []
    /// Keys whose mapping holds options named after them (the service's `mqtt:`).
    var groups: Set<String> = []

    /// A list of entries, each a mapping with a `name` and some of a command's options.
    struct Section: Sendable {
        var key: String
        /// What one entry is called in messages.
        var what: String
        /// The command whose options an entry holds.
        var command: OptionFile
        /// The options an entry may give (the others are the service's).
        var allowed: [String]
        /// What the service adds to an entry's options on its command line.
        var fixed: @Sendable (_ name: String) -> [String]
    }

    static let timelapse = OptionFile(command: "timelapse", option: "--job-file", what: "job file",
                                      parse: { _ = try TimelapseCommand.parseAsRoot($0) }, message: { TimelapseCommand.message(for: $0) }, groups: ["upload"])
    static let trigger = OptionFile(command: "trigger", option: "--trigger-file", what: "trigger",
                                    parse: { _ = try TriggerCommand.parseAsRoot($0) }, message: { TriggerCommand.message(for: $0) })
    static let jobs = Section(key: "jobs", what: "job", command: timelapse,
                              allowed: TimelapseJobOptions.serviceKeys,
                              fixed: { ["--job", $0, "--output", "/"] })
    static let triggers = Section(key: "triggers", what: "trigger", command: trigger,
                                  allowed: TriggerOptions.serviceKeys,
                                  fixed: { _ in [] })
    static let serve = OptionFile(command: "serve", option: "--config", what: "configuration",
                                  parse: { _ = try ServeCommand.parseAsRoot($0) }, message: { ServeCommand.message(for: $0) },
                                  sections: [jobs, triggers], groups: ["mqtt", "upload"])
    static let all = [timelapse, serve]

    /// The arguments with a `--job-file FILE` or `--config FILE` expanded in place: the file's
    /// options first, then the command line's. Reports every mistake in the file, each at its
    /// line, and exits 64 if there is any.
    static func expand(_ args: [String]) throws -> [String] {
        for file in all {
            guard let at = args.firstIndex(of: file.command), let path = file.path(in: Array(args[(at + 1)...])) else { continue }
            let problems = file.check(path: path, commandLine: Array(args[(at + 1)...]))
            guard problems.isEmpty else {
                // Each mistake at its line, as a compiler prints them; no usage text after them.
                notice("the \(file.what) has \(problems.count == 1 ? "a mistake" : "\(problems.count) mistakes"):\n" + problems.map(\.description).joined(separator: "\n"))
                throw ExitCode.validationFailure
            }
            let options = (try? OptionDocument(path: path).options(nested: Set(file.sections.map(\.key)), groups: file.groups).options) ?? []
            var out = args
            out.insert(contentsOf: options.flatMap(\.arguments), at: at + 1)
            return out
        }
        return args
    }

    /// The entries of each section of the file at `path` (the file checked already).
    func entries(path: String) throws -> [String: [OptionDocument.Entry]] {
        let document = try OptionDocument(path: path)
        let read = document.options(nested: Set(sections.map(\.key)), groups: groups)
        var out: [String: [OptionDocument.Entry]] = [:]
        for section in sections {
            out[section.key] = read.nested[section.key].map { document.entries(of: $0, key: section.key).entries } ?? []
        }
        return out
    }

    /// The file named by `OPTION FILE` or `OPTION=FILE`.
    func path(in args: [String]) -> String? {
        for (i, a) in args.enumerated() {
            if a == option, i + 1 < args.count { return args[i + 1] }
            if a.hasPrefix(option + "=") { return String(a.dropFirst(option.count + 1)) }
        }
        return nil
    }

    /// Every mistake in the file at `path`, in line order; `commandLine` is what the command line
    /// gives beside it (its options win over the file's).
    func check(path: String, commandLine: [String] = []) -> [ConfigurationProblem] {
        let document: OptionDocument
        do {
            document = try OptionDocument(path: path)
        } catch {
            return error.problems
        }
        let read = document.options(nested: Set(sections.map(\.key)), groups: groups)
        var problems = read.problems
        for section in sections {
            guard let node = read.nested[section.key] else { continue }
            let (entries, found) = document.entries(of: node, key: section.key)
            problems += found
            for entry in entries {
                problems += section.check(entry, file: path)
            }
        }
        var rest: [String] = []
        var skip = false
        for a in commandLine {
            if skip { skip = false; continue }
            if a == option { skip = true; continue }
            if !a.hasPrefix(option + "=") { rest.append(a) }
        }
        return (problems + check(read.options, file: path, commandLine: rest)).sorted { ($0.line ?? 0) < ($1.line ?? 0) }
    }

    /// The options' mistakes, as the command itself finds them (an unknown option, a value of the
    /// wrong kind, out of range or in conflict with another): the option a message names first is
    /// taken out and the rest tried again, so every independent mistake is reported at its line.
    func check(_ options: [OptionSetting], file: String, commandLine: [String]) -> [ConfigurationProblem] {
        var problems: [ConfigurationProblem] = []
        var remaining: [OptionSetting] = []
        let own = String(option.dropFirst(2))
        for o in options {
            if o.key == own {
                problems.append(.init(file: file, line: o.line, key: o.key, message: "a \(what) cannot name another"))
            } else {
                remaining.append(o)
            }
        }
        // What the command misses as a whole (an end, an output folder) is reported once and
        // then supplied, so the check goes on to the rest (ArgumentParser validates before it
        // reports an unknown option).
        let fillers: [(String, [String])] = [("--count N or --until", ["--count", "1"]), ("argument '--output", ["--output", "/"]),
                                             ("the mqtt options need --mqtt-url", ["--mqtt-url", "mqtt://127.0.0.1"])]
        var filled: [String] = []
        for _ in 0...(remaining.count + fillers.count) {
            do {
                try parse(remaining.flatMap(\.arguments) + commandLine + filled)
                break
            } catch {
                let text = Self.plain(message(error))
                let named = remaining.indices.compactMap { i in Self.position(of: "--" + remaining[i].key, in: text).map { (i, $0) } }
                guard let (i, _) = named.min(by: { $0.1 < $1.1 }) else {
                    problems.append(.init(file: file, line: nil, key: nil, message: text))
                    guard let filler = fillers.first(where: { text.contains($0.0) }), !filled.contains(filler.1[0]) else { break }
                    filled += filler.1
                    continue
                }
                problems.append(.init(file: file, line: remaining[i].line, key: remaining[i].key, message: text))
                remaining.remove(at: i)
            }
        }
        return problems
    }

    /// Where `option` stands in `message` as a whole word (`--ev`, not the start of `--every`).
    static func position(of option: String, in message: String) -> Int? {
        let text = Array(message.utf8), word = Array(option.utf8)
        guard text.count >= word.count else { return nil }
        for i in 0...(text.count - word.count) where text[i..<(i + word.count)].elementsEqual(word) {
            let after = i + word.count < text.count ? text[i + word.count] : nil
            let continues = after.map { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D } ?? false
            if !continues { return i }
        }
        return nil
    }

    /// ArgumentParser's message with its "Error: " and usage lines left out.
    static func plain(_ message: String) -> String {
        String(message.split(separator: "\n").first ?? Substring(message))
    }
}

extension OptionFile.Section {
    /// An entry's mistakes, each at its line: options it may not give, and what its command
    /// finds wrong with the rest.
    func check(_ entry: OptionDocument.Entry, file: String) -> [ConfigurationProblem] {
        var problems: [ConfigurationProblem] = []
        var allowedOptions: [OptionSetting] = []
        for o in entry.options {
            if allowed.contains(o.key) {
                allowedOptions.append(o)
            } else {
                problems.append(.init(file: file, line: o.line, key: "\(key)\(entry.name.map { " " + $0 } ?? ""): \(o.key)",
                                      message: "not an option of a \(what) in the service; a \(what)'s options are \(allowed.joined(separator: ", "))"))
            }
        }
        guard let name = entry.name else { return problems }
        return problems + command.check(allowedOptions, file: file, commandLine: fixed(name)).map { p in
            var p = p
            p.key = "\(key) \(name)" + (p.key.map { ": " + $0 } ?? "")
            // What the entry lacks as a whole is reported where it begins.
            p.line = p.line ?? entry.line
            return p
        }
    }
}
