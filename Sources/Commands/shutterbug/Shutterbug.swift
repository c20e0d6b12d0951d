import ArgumentParser
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

@main
struct Shutterbug: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shutterbug",
        abstract: "A dependable headless camera for Raspberry Pi-class boards.",
        discussion: """
            Without a camera attached, commands run on the simulated Raspberry Pi camera \
            (sim:imx477), which models the real pipeline: control delays, drops, metadata.
            """,
        version: ShutterbugVersion.line,
        subcommands: [Cameras.self, Stream.self, Bracket.self, Focus.self, Preview.self, TriggerCommand.self, TimelapseCommand.self, ServeCommand.self, StatusCommand.self, CaptureCommand.self, JobsCommand.self, ConfigCommand.self, DoctorCommand.self, FleetCommandLine.self, UploadCommand.self])

    /// As ArgumentParser's own, but a timelapse's `--job-file` is read first: its options stand
    /// before the command line's, and its mistakes are reported at their lines.
    static func main() async {
        do {
            var command = try parseAsRoot(try OptionFile.expand(Array(CommandLine.arguments.dropFirst())))
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let e as ShutterbugError where e.code == .unsupported || e.code == .invalidArgument {
            // Asked of a camera that cannot do it (a lens position on a fixed-focus camera), or
            // settings it cannot take as given (bracket steps its frames cannot tell apart): a
            // usage error for this camera (64), said before anything was captured. The command
            // line itself was well formed: no usage text after it.
            var line = "Error: \(e.description)\n"
            line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
            exit(withError: ExitCode(64))
        } catch {
            exit(withError: error)
        }
    }
}
