import ArgumentParser

@main
struct Shutterbug: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shutterbug",
        abstract: "A dependable headless camera for Raspberry Pi-class boards.",
        discussion: """
            Without a camera attached, commands run on the simulated Raspberry Pi camera \
            (sim:imx477), which models the real pipeline: control delays, drops, metadata.
            """,
        subcommands: [Cameras.self, Stream.self, Bracket.self, Focus.self, Preview.self, TriggerCommand.self, TimelapseCommand.self, ServeCommand.self])
}
