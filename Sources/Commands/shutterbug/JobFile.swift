import ArgumentParser
import ConfigFile

/// A timelapse job kept in a YAML file: its keys are `shutterbug timelapse`'s long options
/// (`interval: 30s`, `ev: [-2, 0, 2]`, `output: /srv/timelapse`), given to the command before
/// the command line's own, so an option on the command line overrides the file's.
///
/// Every mistake is found with its line: YAML syntax, a key that is no option (with the nearest
/// option suggested), a value of the wrong kind, and a value out of range or in conflict with
/// another (as the command's own validation says it).
enum JobFile {
    static let option = "--job-file"

    /// The arguments with a timelapse's `--job-file FILE` expanded in place: the file's options
    /// first, then the command line's. Throws every mistake in the file, each at its line.
    static func expand(_ args: [String]) throws -> [String] {
        guard let command = args.firstIndex(of: TimelapseCommand.configuration.commandName!), let path = path(in: args) else { return args }
        let problems = check(path: path, commandLine: Array(args[(command + 1)...]))
        guard problems.isEmpty else {
            // Each mistake at its line, as a compiler prints them; no usage text after them.
            notice("the job file has \(problems.count == 1 ? "a mistake" : "\(problems.count) mistakes"):\n" + problems.map(\.description).joined(separator: "\n"))
            throw ExitCode.validationFailure
        }
        let options = (try? OptionDocument(path: path).options().options) ?? []
        var out = args
        out.insert(contentsOf: options.flatMap(\.arguments), at: command + 1)
        return out
    }

    /// The file named by `--job-file FILE` or `--job-file=FILE`.
    static func path(in args: [String]) -> String? {
        for (i, a) in args.enumerated() {
            if a == option, i + 1 < args.count { return args[i + 1] }
            if a.hasPrefix(option + "=") { return String(a.dropFirst(option.count + 1)) }
        }
        return nil
    }

    /// Every mistake in the job file at `path`, in line order; `commandLine` is what the command
    /// line gives beside it (its options win over the file's).
    static func check(path: String, commandLine: [String] = []) -> [ConfigurationProblem] {
        let document: OptionDocument
        do {
            document = try OptionDocument(path: path)
        } catch {
            return error.problems
        }
        let read = document.options()
        return read.problems + check(read.options, file: path, commandLine: commandLine.filter { $0 != option && !$0.hasPrefix(option + "=") && $0 != path })
    }

    /// The options' mistakes, as the command itself finds them (an unknown option, a value of the
    /// wrong kind, out of range or in conflict with another): the option a message names first is
    /// taken out and the rest tried again, so every independent mistake is reported at its line.
    static func check(_ options: [OptionSetting], file: String, commandLine: [String]) -> [ConfigurationProblem] {
        var problems: [ConfigurationProblem] = []
        var remaining: [OptionSetting] = []
        for o in options {
            if o.key == "job-file" {
                problems.append(.init(file: file, line: o.line, key: o.key, message: "a job file cannot name another job file"))
            } else {
                remaining.append(o)
            }
        }
        // What the job misses as a whole (an end, an output folder) is reported once and then
        // supplied, so the check goes on to the rest (ArgumentParser validates before it
        // reports an unknown option).
        let fillers: [(String, [String])] = [("--count N or --until", ["--count", "1"]), ("argument '--output", ["--output", "/"])]
        var filled: [String] = []
        for _ in 0...(remaining.count + fillers.count) {
            do {
                _ = try TimelapseCommand.parseAsRoot(remaining.flatMap(\.arguments) + commandLine + filled)
                break
            } catch {
                let message = plain(TimelapseCommand.message(for: error))
                let named = remaining.indices.compactMap { i in position(of: "--" + remaining[i].key, in: message).map { (i, $0) } }
                guard let (i, _) = named.min(by: { $0.1 < $1.1 }) else {
                    problems.append(.init(file: file, line: nil, key: nil, message: message))
                    guard let filler = fillers.first(where: { message.contains($0.0) }), !filled.contains(filler.1[0]) else { break }
                    filled += filler.1
                    continue
                }
                problems.append(.init(file: file, line: remaining[i].line, key: remaining[i].key, message: message))
                remaining.remove(at: i)
            }
        }
        return problems.sorted { ($0.line ?? 0) < ($1.line ?? 0) }
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
