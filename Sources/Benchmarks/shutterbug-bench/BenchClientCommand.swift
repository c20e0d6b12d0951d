import ArgumentParser
import Foundation
import HTTPTransfer
import ShutterbugCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `shutterbug-bench client-wait`: what a client costs while the service takes a slow capture,
/// URLSession (what the CLI used) against libcurl through HTTPTransfer (what it uses), side by
/// side in one run.
struct BenchClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client-wait",
        abstract: "The CPU a client spends waiting for a slow capture: URLSession against libcurl (HTTPTransfer), alternately, against one service.",
        discussion: """
            Starts `shutterbug serve` (the binary beside this one) on the simulated camera and \
            asks it --rounds times, alternately through each client, for a photo exposed for \
            --exposure. Each request is made by a child process of its own (this command again, \
            with --once), as `shutterbug capture` makes it: a process, one request, its answer. \
            Measures each child's wall time and CPU time (user + system, from the kernel's \
            accounting of waited-for children). Prints both, their CPU per wall second, and the \
            ratio.
            """)

    @Option(name: .long, help: "Requests through each client (1...50).")
    var rounds = 3

    @Option(name: .long, help: ArgumentHelp("Each photo's exposure.", valueName: "seconds"))
    var exposure: Double = 2

    @Option(name: .long, help: ArgumentHelp("The shutterbug binary (default: beside this one).", valueName: "path"))
    var binary: String?

    @Option(name: .long, help: ArgumentHelp("(For the child:) make one request through this client and exit.", valueName: "URLSession|libcurl"))
    var once: String?

    @Option(name: .long, help: ArgumentHelp("(For the child:) the capture URL.", valueName: "url"))
    var url: String?

    func validate() throws {
        guard (1...50).contains(rounds) else { throw ValidationError("--rounds must be in 1...50, not \(rounds)") }
        guard exposure.isFinite, (0.01...30).contains(exposure) else { throw ValidationError("--exposure must be 0.01...30 seconds, not \(exposure)") }
    }

    /// CPU seconds of the children waited for so far.
    static func childCPUSeconds() -> Double {
        var u = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &u)
        return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
    }

    /// One request through `client`, as the CLI makes it; exits 0 on 201.
    func request(_ client: String, url: String) async throws {
        let body = Data(#"{"exposuresUs": [\#(Int(exposure * 1_000_000))]}"#.utf8)
        let status: Int
        if client == "URLSession" {
            var request = URLRequest(url: URL(string: url)!)
            request.httpMethod = "POST"
            request.httpBody = body
            request.timeoutInterval = 120
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            let (_, response) = try await URLSession.shared.data(for: request)
            status = (response as? HTTPURLResponse)?.statusCode ?? 0
        } else {
            status = try await HTTPTransfer.perform(HTTPTransfer.Request(method: "POST", url: url, headers: [("Content-Type", "application/json")],
                                                                         body: .bytes(Array(body)))).status
        }
        guard status == 201 else { throw ValidationError("\(client): the capture answered \(status)") }
    }

    func run() async throws {
        if let once {
            try await request(once, url: url ?? "")
            return
        }
        let exe = binary ?? (URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path + "/shutterbug")
        guard FileManager.default.isExecutableFile(atPath: exe) else { throw ValidationError("no shutterbug binary at \(exe): build it or give --binary") }
        let dir = NSTemporaryDirectory() + "sb-bench-client-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let service = try BenchService.start(exe, ["--camera", "sim:imx477", "--size", "1332x990", "--listen", "127.0.0.1:0", "--output", dir])
        defer { _ = service.stop() }
        let url = service.base + "api/capture"
        print("bench client-wait: \(rounds) photos of \(exposure) s through each client, alternately, each by a process of its own; \(exe)")
        let me = URL(fileURLWithPath: CommandLine.arguments[0]).path
        var totals: [String: (wall: Double, cpu: Double)] = ["URLSession": (0, 0), "libcurl": (0, 0)]
        for round in 1...rounds {
            for client in ["URLSession", "libcurl"] {
                let child = Process()
                child.executableURL = URL(fileURLWithPath: me)
                child.arguments = ["client-wait", "--once", client, "--url", url, "--exposure", String(exposure)]
                let (cpu0, t0) = (Self.childCPUSeconds(), ContinuousClock.now)
                try child.run()
                child.waitUntilExit()
                let wall = (ContinuousClock.now - t0).secondsValue, cpu = Self.childCPUSeconds() - cpu0
                guard child.terminationStatus == 0 else { throw ValidationError("\(client): the child exited \(child.terminationStatus)") }
                print(String(format: "round %d %-10@ %6.2f s wall, %6.3f s CPU (%5.1f%% of a core)", round, client as NSString, wall, cpu, 100 * cpu / wall))
                totals[client]!.wall += wall
                totals[client]!.cpu += cpu
            }
        }
        let u = totals["URLSession"]!, c = totals["libcurl"]!
        print(String(format: "URLSession: %.3f s CPU in %.2f s (%.1f%% of a core); libcurl: %.3f s CPU in %.2f s (%.2f%% of a core); URLSession/libcurl CPU %.0f×",
                     u.cpu, u.wall, 100 * u.cpu / u.wall, c.cpu, c.wall, 100 * c.cpu / c.wall, u.cpu / max(c.cpu, 1e-3)))
    }
}
