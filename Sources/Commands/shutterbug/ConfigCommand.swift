import ArgumentParser
import ConfigFile

struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check configuration and job files.",
        subcommands: [Check.self])

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a timelapse job file or the service's configuration: every mistake, each at its line (exit 0 when there is none, 65 when there are).",
            discussion: """
                Both are YAML whose keys are a command's long options. A job file, used as \
                `shutterbug timelapse --job-file FILE`:
                  job: roof
                  interval: 30s
                  ev: [-2, 0, 2]
                  until: 2026-12-01T08:00
                  output: /srv/timelapse
                The service's configuration, used as `shutterbug serve --config FILE`:
                  listen: 0.0.0.0:8080
                  token-file: /etc/shutterbug/token
                  output: /var/lib/shutterbug
                Options on the command line override the file's. Which kind a file is comes from \
                its keys (listen, token-file, rate-limit, jobs or triggers make it the service's), \
                or from --for.
                """)

        @Argument(help: ArgumentHelp("The file to check.", valueName: "file"))
        var file: String

        @Option(name: .customLong("for"), help: ArgumentHelp("The command the file is for: timelapse or serve (default: from its keys).", valueName: "command"))
        var command: String?

        func validate() throws {
            if let command, !["timelapse", "serve"].contains(command) { throw ValidationError("--for must be timelapse or serve, not '\(command)'") }
        }

        func run() throws {
            let kind: OptionFile
            if let command {
                kind = command == "serve" ? .serve : .timelapse
            } else {
                let keys = Set(((try? OptionDocument(path: file).options(nested: ["jobs", "triggers"], groups: OptionFile.serve.groups)).map { $0.options.map(\.key) + $0.nested.keys }) ?? [])
                kind = keys.isDisjoint(with: ["listen", "token-file", "rate-limit", "jobs", "triggers"]) && !keys.contains(where: { $0.hasPrefix("mqtt-") }) ? .timelapse : .serve
            }
            let problems = kind.check(path: file)
            guard problems.isEmpty else {
                for p in problems { print(p) }
                print("\(file): \(problems.count) mistake\(problems.count == 1 ? "" : "s") (checked as \(kind.command)'s \(kind.what))")
                throw ExitCode(65)
            }
            print("\(file): no mistakes (checked as \(kind.command)'s \(kind.what))")
        }
    }
}
