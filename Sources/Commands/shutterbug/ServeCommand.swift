import ArgumentParser
import Capture
import Hummingbird
import ImageOutput
import Server
import ShutterbugCore
import Systemd

#if canImport(Glibc)
import Glibc
#endif

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "The camera as a service: an HTTP API, a web page and Prometheus metrics over one camera session.",
        discussion: """
            Owns the camera and streams; captures asked for over the API (a photo, an EV or a \
            manual bracket) are written to --output and listed with their files. Endpoints \
            (docs/openapi.yaml): GET / (the web page), /api/status, /api/cameras, /api/captures, \
            /api/frame.jpg (the newest frame), /api/files/PATH (a file under --output), \
            /metrics; POST /api/capture. Listens on 127.0.0.1 by default; any other address \
            needs a bearer token (--token-file, or SHUTTERBUG_TOKEN), and with a token every \
            request must carry it. Under systemd (Type=notify): READY once streaming and \
            listening, the watchdog pinged while frames come. SIGTERM or SIGINT: the capture \
            in progress completes and its files are written, then it stops.
            """)

    @OptionGroup var camera: CameraOptions

    @Option(name: .long, help: ArgumentHelp("Read the service's options from a YAML file whose keys are these options' long names (listen: 0.0.0.0:8080, output: DIR, token-file: FILE); options on the command line override the file's. `shutterbug config check FILE` lists its mistakes.", valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Where to listen: HOST:PORT (default 127.0.0.1:8080).", valueName: "host:port"))
    var listen: String = "127.0.0.1:8080"

    @Option(name: .long, help: ArgumentHelp("A file holding the bearer token (16 characters or more); required to listen beyond loopback.", valueName: "file"))
    var tokenFile: String?

    @Option(name: .long, help: ArgumentHelp("Where captures are written.", valueName: "dir"))
    var output: String

    @Option(name: .long, help: ArgumentHelp("The processed stream's size, e.g. 1332x990; default the sensor's full size.", valueName: "WxH"))
    var size: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Requests a second from each client beyond loopback (bursts of twice that), 0.1...10000; past it 429 with Retry-After. 0: no limit. Clients on this machine are not limited.", valueName: "n"))
    var rateLimit: Double = 20

    @Flag(name: .long, help: "Apply --rate-limit to clients on this machine too (behind a proxy on the same machine every client arrives from 127.0.0.1).")
    var limitLoopback = false

    func access() throws -> HTTPAPI.Access {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]) else {
            throw ValidationError("--listen must be HOST:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080, not '\(listen)'")
        }
        var host = String(listen[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var token: String?
        if let tokenFile {
            guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) else { throw ValidationError("--token-file \(tokenFile): cannot read it") }
            token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        } else if let env = getenv("SHUTTERBUG_TOKEN") {
            token = String(cString: env).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if rateLimit != 0 { try NumericInput.check(rateLimit, "--rate-limit", in: 0.1...10_000, unit: "requests a second (or 0)") }
        var a = HTTPAPI.Access(host: host, port: port, token: token, rateLimit: rateLimit == 0 ? nil : rateLimit)
        a.limitsLoopback = limitLoopback
        do { try a.check() } catch let e as ShutterbugError { throw ValidationError(e.message) }
        return a
    }

    func validate() throws {
        _ = try access()
        if let size { _ = try TimelapseCommand.parseSize(size) }
    }

    func run() async throws {
        let access = try self.access()
        var stream = StreamRequest(role: .still)
        if let size { (stream.width, stream.height) = try TimelapseCommand.parseSize(size) }
        let directory = try OutputDirectory(path: output)
        let cam = try camera.open()
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let config: CameraConfiguration
        do {
            // Brackets of up to 5 steps (a larger one is refused with the range, 409); 9 would
            // not fit a Pi 4's CMA at full resolution with the raw stream beside.
            config = try await session.start(streams: [stream, StreamRequest(role: .raw)], preparedBracketCount: 5)
        } catch let e as ShutterbugError where e.code == .invalidArgument {
            throw ValidationError(e.message)
        }
        for a in config.adjustments { notice("adjusted: \(a)") }
        let writer = try PhotoFileWriter(directory: directory, streams: config.streams, camera: Bracket.cameraDescription(cam, config))
        let service = CameraService(session: session, camera: cam, writer: writer, directory: directory)
        let notifier = SystemdNotifier.fromProcessEnvironment()
        let watchdog = notifier?.watchdogInterval.map { interval in
            Task {
                var last: UInt32?
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval / 2)
                    let newest = await session.latestFrame?.sequence
                    if newest != nil && newest != last { notifier?.watchdog() }
                    last = newest
                }
            }
        }
        defer { watchdog?.cancel() }
        let host = access.host.contains(":") ? "[\(access.host)]" : access.host
        let where_ = "http://\(host):\(access.port)/"
        let app = Application(router: HTTPAPI.router(service, access: access),
                              configuration: .init(address: .hostname(access.host, port: access.port), serverName: "shutterbug"),
                              onServerRunning: { channel in
                                  // The port the system gave (for --listen HOST:0).
                                  let url = "http://\(host):\(channel.localAddress?.port ?? access.port)/"
                                  notice("serving \(cam.info.id) at \(url)\(access.token == nil ? "" : " (bearer token required)")")
                                  notifier?.ready(status: "serving \(cam.info.id) at \(url)")
                              })
        do {
            // SIGTERM and SIGINT end it gracefully: requests in flight (a capture) complete.
            try await app.runService()
        } catch {
            throw ValidationError("cannot serve at \(where_): \(error)")
        }
        notifier?.stopping(status: "stopping")
        await session.stop()
    }
}
