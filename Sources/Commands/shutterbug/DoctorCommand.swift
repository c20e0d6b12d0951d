import ArgumentParser
import ConfigFile
import Doctor
import LibcameraBackend
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Say why there is no picture: libcamera, the cameras and why none shows up, memory, devices, groups, the service, disk and clock.",
        discussion: """
            Each check is a line: ok, warning, problem, or ? (could not be read by this user), with \
            a one-line fix under it. Needs no root. Exits 0 when nothing is a problem, 1 when \
            something is.
            """)

    @Flag(name: .long, help: "One JSON object with every check, for scripts.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("The service's configuration, for its output folder.", valueName: "FILE"))
    var config = "/etc/shutterbug/serve.yaml"

    @Option(name: .long, help: ArgumentHelp("Check the free space here instead of the configuration's output.", valueName: "DIR"))
    var output: String?

    func run() throws {
        var lib = DoctorFacts.LibcameraFacts(runtimeVersion: LibcameraManager.runtimeVersion, compiledVersion: LibcameraManager.libcameraVersion)
        var cameras: [DoctorFacts.Camera] = []
        do {
            cameras = try LibcameraManager.shared().cameras.map { c in
                DoctorFacts.Camera(id: c.id, model: c.model,
                                   pixelArray: c.pixelArrayWidth.flatMap { w in c.pixelArrayHeight.map { (w, $0) } })
            }
        } catch {
            lib.managerError = "\(error)"
        }
        let facts = SystemReader().read(libcamera: lib, cameras: cameras, outputPath: output ?? outputFromConfig())
        let checks = Doctor.checks(facts)
        if json {
            print(Doctor.json(checks, facts: facts))
        } else {
            print(Doctor.text(checks), terminator: "")
        }
        let code = Doctor.exitCode(checks)
        if code != 0 { throw ExitCode(code) }
    }

    /// The configuration's `output:`, else the service's default.
    func outputFromConfig() -> String {
        if access(config, R_OK) == 0, let doc = try? OptionDocument(path: config) {
            for setting in doc.options(nested: ["jobs", "triggers"], groups: OptionFile.serve.groups).options where setting.key == "output" {
                if case .text(let t) = setting.value { return t }
            }
        }
        return "/var/lib/shutterbug"
    }
}
