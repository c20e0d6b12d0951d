import ArgumentParser
import ConfigFile

struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check configuration and job files.",
        subcommands: [Check.self])

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a timelapse job file: every mistake, each at its line (exit 0 when there is none, 65 when there are).",
            discussion: """
                A job file is YAML whose keys are `shutterbug timelapse`'s long options, e.g.
                  job: roof
                  interval: 30s
                  ev: [-2, 0, 2]
                  until: 2026-12-01T08:00
                  output: /srv/timelapse
                and is used as `shutterbug timelapse --job-file FILE`, the command line's own \
                options overriding the file's.
                """)

        @Argument(help: ArgumentHelp("The file to check.", valueName: "file"))
        var file: String

        func run() throws {
            let problems = JobFile.check(path: file)
            guard problems.isEmpty else {
                for p in problems { print(p) }
                print("\(file): \(problems.count) mistake\(problems.count == 1 ? "" : "s")")
                throw ExitCode(65)
            }
            print("\(file): no mistakes")
        }
    }
}
