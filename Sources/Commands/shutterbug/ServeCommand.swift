import ArgumentParser
import JobOptions
import Capture
import Hummingbird
import HummingbirdCore
import ImageOutput
import Server
import ShutterbugCore
import Systemd
import Upload
import Jobs
import LinuxGPIO
import Logging
import ProcessTriggers
import CaptureScheduler
import FleetService
import ServiceLifecycle
import SimulatedCamera
import ConfigFile
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "The camera as a service: an HTTP API, a web page and Prometheus metrics over one camera session.",
        discussion: """
            Owns the camera and streams; runs the timelapse jobs and triggers its --config \
            declares (jobs: and triggers:, docs/service.md); captures asked for over the API (a \
            photo, an EV or a manual bracket) are written to --output and listed with their \
            files. Endpoints (docs/openapi.yaml): GET / (the web page), /api/status, /api/cameras, \
            /api/captures, /api/frame.jpg (the newest frame), /api/files/PATH (a file under \
            --output), /api/jobs (GET, POST; /api/jobs/NAME, POST .../pause|resume|stop), \
            /api/triggers, /api/config (POST /api/config/reload), /metrics; POST /api/capture. \
            Listens on 127.0.0.1 by default; any other address needs a bearer token \
            (--token-file, or SHUTTERBUG_TOKEN), and with a token every request must carry it. \
            --preview shows the camera on a display meanwhile. --mqtt-url joins an MQTT broker \
            as a fleet node and a Home Assistant device (docs/fleet.md). Under systemd (Type=notify): \
            READY once streaming and listening, the watchdog pinged while frames come, STATUS \
            kept current. SIGHUP reads the configuration again (running jobs keep running). \
            SIGTERM or SIGINT: the slot or capture in progress completes and its files are \
            written and journalled, then it stops.
            """)

    @OptionGroup var camera: CameraOptions
    @OptionGroup var previewOptions: PreviewOptions
    @OptionGroup(title: "MQTT (a fleet node, Home Assistant)") var mqtt: MQTTServeOptions
    @OptionGroup(title: "Upload (S3-compatible object storage)") var upload: UploadOptions

    @Option(name: .long, help: ArgumentHelp("Read the service's options from a YAML file whose keys are these options' long names (listen: 0.0.0.0:8080, output: DIR, token-file: FILE); options on the command line override the file's. `shutterbug config check FILE` lists its mistakes.", valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Where to listen: HOST:PORT (default 127.0.0.1:8080).", valueName: "host:port"))
    var listen: String = "127.0.0.1:8080"

    @Option(name: .long, help: ArgumentHelp("A file holding the bearer token (16 characters or more); required to listen beyond loopback.", valueName: "file"))
    var tokenFile: String?

    @Option(name: .long, help: ArgumentHelp("Where captures are written.", valueName: "dir"))
    var output: String

    @Option(name: .long, help: ArgumentHelp("With DNG: the raw stream's size, which picks the sensor mode on a Pi (e.g. 4056x3040 for the HQ camera's full-resolution mode); default the mode the processed stream runs in alone.", valueName: "WxH"))
    var rawSize: String?

    @Option(name: .long, help: ArgumentHelp("The processed stream's size, e.g. 1332x990; default the sensor's full size.", valueName: "WxH"))
    var size: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Requests a second from each client beyond loopback (bursts of twice that), 0.1...10000; past it 429 with Retry-After. 0: no limit. Clients on this machine are not limited.", valueName: "n"))
    var rateLimit: Double = 20

    @Flag(name: .long, help: "Apply --rate-limit to clients on this machine too (behind a proxy on the same machine every client arrives from 127.0.0.1).")
    var limitLoopback = false

    @Option(name: .long, help: ArgumentHelp("Names the service answers to besides its addresses, localhost and this machine's name (and NAME.local): camera.example.org,... A request naming another host is refused (421), so a web page that rebinds its own name to this address cannot use the API.", valueName: "name,..."))
    var hostNames: String?

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
            // One line: a token with a newline or a space inside would never match what a
            // client sends in its header, and every request would be refused.
            if let t = token, t.contains(where: { $0.isWhitespace || $0.isNewline }) {
                throw ValidationError("--token-file \(tokenFile): the token is one line without spaces; this file has \(t.split(whereSeparator: \.isNewline).count) lines")
            }
            var st = stat()
            if stat(tokenFile, &st) == 0, st.st_mode & 0o077 != 0 {
                notice("--token-file \(tokenFile) can be read by other users (mode \(String(st.st_mode & 0o777, radix: 8))): chmod 600 it, or 640 with the service's group")
            }
        } else if let env = getenv("SHUTTERBUG_TOKEN") {
            token = String(cString: env).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if rateLimit != 0 { try NumericInput.check(rateLimit, "--rate-limit", in: 0.1...10_000, unit: "requests a second (or 0)") }
        var names = HTTPAPI.Access.machineNames
        for n in (hostNames ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) where !n.isEmpty {
            guard n.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." }), n.count <= 253 else {
                throw ValidationError("--host-names takes host names (letters, digits, '-' and '.'), comma-separated, not '\(n)'")
            }
            names.append(n)
        }
        var a = HTTPAPI.Access(host: host, port: port, token: token, rateLimit: rateLimit == 0 ? nil : rateLimit, hostNames: names)
        a.limitsLoopback = limitLoopback
        do { try a.check() } catch let e as ShutterbugError { throw ValidationError(e.message) }
        return a
    }

    func validate() throws {
        _ = try NumericInput.size(rawSize, "--raw-size", example: "2028x1520")
        _ = try access()
        if let size { _ = try TimelapseCommand.parseSize(size) }
    }

    /// The service's options as words, for the effective configuration (the token never shown).
    var effectiveOptions: [String] {
        var words = ["--listen", listen, "--output", output, "--rate-limit", String(rateLimit)]
        if let size { words += ["--size", size] }
        if limitLoopback { words.append("--limit-loopback") }
        if let hostNames { words += ["--host-names", hostNames] }
        if let tokenFile { words += ["--token-file", tokenFile] }
        // The broker, never its password: only the file that holds it.
        if let url = mqtt.url {
            words += ["--mqtt-url", url, "--mqtt-topic-prefix", mqtt.topicPrefix]
            if let n = mqtt.node { words += ["--mqtt-node", n] }
            if let u = mqtt.username { words += ["--mqtt-username", u] }
            if let f = mqtt.passwordFile { words += ["--mqtt-password-file", f] }
        }
        // The store, never its keys: only the file that holds them.
        if let url = upload.url {
            words += ["--upload-url", url, "--upload-bucket", upload.bucket ?? "", "--upload-key", upload.key]
            if let f = upload.credentialsFile { words += ["--upload-credentials-file", f] }
            if upload.deleteAfter { words.append("--upload-delete-after") }
        }
        if let c = camera.camera { words += ["--camera", c] }
        if previewOptions.preview != "off" { words += ["--preview", previewOptions.preview] }
        return words
    }

    /// The jobs and triggers the configuration file declares, or its mistakes, each at its line.
    /// `output`: the service's output directory (the command line's may stand in for the file's).
    static func declared(configuration path: String?, output: String) throws -> (CameraService.Declared, [String: [String]]) {
        guard let path else { return (.init(), [:]) }
        let problems = OptionFile.serve.check(path: path, commandLine: ["--output", output])
        guard problems.isEmpty else {
            throw ShutterbugError(.invalidArgument, "the configuration has \(problems.count == 1 ? "a mistake" : "\(problems.count) mistakes"): " + problems.map(\.description).joined(separator: "; "))
        }
        let entries = try OptionFile.serve.entries(path: path)
        var d = CameraService.Declared()
        for e in entries["jobs"] ?? [] {
            d.jobs.append(try JobDefinition(name: e.name ?? "", words: e.options.flatMap(\.arguments)))
        }
        for e in entries["triggers"] ?? [] {
            d.triggers.append(try TriggerDefinition(name: e.name ?? "", words: e.options.flatMap(\.arguments)))
        }
        // The service's own options, to tell a reload which of them need a restart.
        let top = (try? OptionDocument(path: path).options(nested: ["jobs", "triggers"], groups: OptionFile.serve.groups).options) ?? []
        return (d, Dictionary(top.map { ($0.key, $0.arguments) }, uniquingKeysWith: { a, _ in a }))
    }

    /// Connections the service keeps open at once.
    static let maxConnections = 512

    func run() async throws {
        let logger = Logger(label: "shutterbug") { _ in JournalLogHandler() }
        // Room for the connections, the camera's buffers and every job's journal (a reload of
        // 300 jobs ran out of the default 1024): the soft limit raised to the hard one.
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = min(limit.rlim_max, 65_536)
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        let access = try self.access()
        let (declared, topLevel) = try Self.declared(configuration: config, output: output)
        var stream = StreamRequest(role: .still)
        if let size { (stream.width, stream.height) = try TimelapseCommand.parseSize(size) }
        let directory = try OutputDirectory(path: output)
        // The raw stream (DNG over the API and for jobs) in the processed stream's own mode; the
        // camera on a display beside everything else (`preview: auto` in the configuration): no
        // display is one line and the service goes on. Brackets of up to 5 steps (a larger one
        // is refused with the range, 409); 9 would not fit a Pi 4's CMA at full resolution with
        // the raw stream beside.
        let rig = try await CaptureRig.open({ try camera.open() }, processed: stream, raw: .forDNG(rawSize: rawSize), preview: previewOptions,
                                            bracketCount: 5, holding: declared.triggers.reduce(HeldFrames.none) { $0.union($1.held) }, bursts: declared.triggers.compactMap(\.burst), notice: { logger.notice("\($0)") })
        try await rig.closing {
            let (cam, session) = (rig.camera, rig.session)
            let writer = try PhotoFileWriter(directory: directory, streams: rig.configuration.streams, camera: rig.description)
            // A photo a killed run renamed into place after its capture's last sidecar is named
            // there (the jobs' folders are their journals' to reconcile).
            directory.listPhotosAfterInterruptedSidecars(template: .default)
            let service = CameraService(session: session, camera: cam, writer: writer, directory: directory, logger: logger, sensorModes: cam.capabilities.sensorModes)
            let notifier = SystemdNotifier.fromProcessEnvironment()
            /// Where the service listens, once it does (READY=1 has been sent then).
            let served = ServedAt()
            // systemd's watchdog runs from READY=1 (systemd.service(5), WatchdogSec=): no ping
            // before it, however long the start takes on a loaded machine.
            let watchdog = notifier?.watchdogInterval.map { interval in
                Task {
                    var last: UInt32?
                    while !Task.isCancelled {
                        try? await Task.sleep(for: interval / 2)
                        let newest = await session.latestFrame?.sequence
                        if served.url != nil && newest != nil && newest != last { notifier?.watchdog() }
                        last = newest
                    }
                }
            }
            defer { watchdog?.cancel() }
            // A stall or a lost camera is logged (and shown in the status) as it happens.
            let health = Task { await service.watchHealth() }
            defer { health.cancel() }

            // The configuration again (SIGHUP, POST /api/config/reload): jobs and triggers brought
            // in line, running ones untouched; the service's own options need a restart.
            let configPath = self.config
            let current = Mutex((declared, topLevel))
            let effective = effectiveOptions
            let output = self.output
            // MQTT: a fleet node, Home Assistant's device (none without --mqtt-url).
            let fleet = FleetHolder()
            @Sendable func reload() async throws -> CameraService.Reload {
                guard let configPath else { throw ShutterbugError(.unsupported, "the service was started without --config: there is no configuration to reload") }
                let (d, top) = try Self.declared(configuration: configPath, output: output)
                let before = current.withLock { $0.1 }
                var r = await service.apply(d)
                r.needsRestart = Set(before.keys).union(top.keys).filter { before[$0] != top[$0] && !$0.hasPrefix("mqtt-") }.sorted()
                // The file's mqtt: applied now: the node leaves the broker and joins as configured.
                let mqttWords = top.filter { $0.key.hasPrefix("mqtt-") }.sorted { $0.key < $1.key }.flatMap(\.value)
                if mqttWords != before.filter({ $0.key.hasPrefix("mqtt-") }).sorted(by: { $0.key < $1.key }).flatMap(\.value) {
                    let settings = try MQTTServeOptions.parse(mqttWords).settings()
                    try await fleet.replace(settings) { try FleetLink($0, service: service, reload: reload, version: ShutterbugVersion.number, logger: logger) }
                    if settings == nil { r.stopped.append("mqtt") } else { r.restarted.append("mqtt") }
                }
                current.withLock { $0 = (d, top) }
                return r
            }
            if let settings = try mqtt.settings() {
                do {
                    var hook: (@Sendable () async throws -> CameraService.Reload)?
                    if configPath != nil { hook = reload }
                    try await fleet.replace(settings) { try FleetLink($0, service: service, reload: hook, version: ShutterbugVersion.number, logger: logger) }
                    logger.notice("MQTT: joining \(settings.description)")
                } catch let e as ShutterbugError {
                    throw ValidationError(e.message)
                }
            }
            // Uploads: every capture's files under --output (the API's, the triggers', the jobs')
            // queued in OUTPUT/uploads.sqlite and sent to the bucket; a change needs a restart.
            var uploading: Task<Void, Never>?
            do {
                if let settings = try upload.settings() {
                    let uploader = try Uploader(settings, folder: output, logger: logger)
                    service.uploader.withLock { $0 = uploader }
                    uploading = Task { await uploader.run() }
                    logger.notice("uploads: every photo under \(output) to \(settings.endpoint)/\(settings.bucket) as \(settings.keyTemplate)")
                }
            } catch let e as ShutterbugError {
                throw ValidationError(e.message)
            }
            defer { uploading?.cancel() }
            let hooks = HTTPAPI.Hooks(reload: reload, configuration: {
                let d = current.withLock { $0.0 }
                return .init(file: configPath, options: effective, jobs: d.jobs.map { .init(name: $0.name, options: $0.arguments) },
                             triggers: d.triggers.map { .init(name: $0.name, options: $0.arguments) })
            })
            let hup = try SignalTriggerSource(signal: SIGHUP, name: "SIGHUP")
            let hupWatcher = Task {
                for await _ in hup.triggers() {
                    do {
                        let r = try await reload()
                        logger.notice("SIGHUP: configuration reloaded: kept \(r.kept), started \(r.started), restarted \(r.restarted), stopped \(r.stopped)\(r.refused.isEmpty ? "" : "; refused: " + r.refused.joined(separator: "; "))\(r.needsRestart.isEmpty ? "" : "; \(r.needsRestart.joined(separator: ", ")) take effect only when the service is restarted")")
                    } catch {
                        logger.error("SIGHUP: the configuration was not reloaded, what runs goes on as it was: \((error as? ShutterbugError)?.message ?? "\(error)")")
                    }
                }
            }
            defer {
                hupWatcher.cancel()
                hup.stop()
            }

            // STATUS= brought up to date every few seconds while it changes: the jobs, the triggers.
            let statusLine = notifier.map { notifier in
                Task {
                    var last = ""
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(5))
                        guard let url = served.url else { continue }
                        let line = await service.summary(serving: url)
                        if line != last { notifier.status(line) }
                        last = line
                    }
                }
            }
            defer { statusLine?.cancel() }
            let host = access.host.contains(":") ? "[\(access.host)]" : access.host
            let where_ = "http://\(host):\(access.port)/"
            // Connections are bounded and timed: one idle for 15 s is closed (a slow or
            // stalled client, a keep-alive left open), a request not whole within 30 s too (a
            // client trickling its body), and beyond 512 at once no more are taken until one
            // ends, so idle clients cannot use up the file descriptors the camera and the jobs'
            // journals need.
            let app = Application(router: HTTPAPI.router(service, access: access, hooks: hooks),
                                  server: .http1(configuration: HTTPAPI.http1()),
                                  configuration: .init(address: .hostname(access.host, port: access.port), serverName: "shutterbug",
                                                       availableConnectionsDelegate: MaximumAvailableConnections(Self.maxConnections)),
                                  onServerRunning: { channel in
                                      // The port the system gave (for --listen HOST:0).
                                      let url = "http://\(host):\(channel.localAddress?.port ?? access.port)/"
                                      logger.notice("serving \(cam.info.id) at \(url)\(access.token == nil ? "" : " (bearer token required)")")
                                      notifier?.ready(status: "serving \(cam.info.id) at \(url)")
                                      served.url = url
                                  },
                                  logger: logger)
            let r = await service.apply(declared)
            if !r.started.isEmpty { logger.notice("started \(r.started.joined(separator: ", "))") }
            // swift-service-lifecycle: SIGTERM or SIGINT shuts the services down in reverse order:
            // the jobs and triggers first (a slot or capture in progress completes and is
            // journalled), then the HTTP server (requests in flight complete).
            let group = ServiceGroup(configuration: .init(services: [.init(service: app), .init(service: WorkShutdown(service: service, notifier: notifier))],
                                                          gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            // A camera that went away (or a session that failed for good) cannot be opened again
            // by this process (libcamera refuses a camera id registered twice in one camera
            // manager): the jobs and triggers stop as at SIGTERM, their work journalled, and the
            // service exits 75 for systemd's Restart= to start a new one, which resumes them.
            let sessionFailed = Mutex<ShutterbugError?>(nil)
            let failureWatch = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(250))
                    guard let failure = await session.failureReason else { continue }
                    sessionFailed.withLock { $0 = failure }
                    logger.error("the camera failed (\(failure.message)): stopping the jobs and triggers, then exiting 75 so a new process can open it (systemd's Restart= does)")
                    await group.triggerGracefulShutdown()
                    return
                }
            }
            defer { failureWatch.cancel() }
            do {
                try await group.run()
            } catch {
                throw ValidationError("cannot serve at \(where_): \(error)")
            }
            notifier?.stopping(status: "stopping")
            await service.stopAll("the service is stopping")
            // Transfers in flight are cut; their files stay queued for the next start.
            uploading?.cancel()
            await uploading?.value
            service.uploader.withLock { $0?.stopObserving() }
            await fleet.stop()
            await session.stop()
            if let preview = rig.preview {
                preview.close()
                logger.notice("\(preview.summaryLine)")
            }
            if sessionFailed.withLock({ $0 }) != nil { throw ExitCode(75) }
        }
    }
}

/// The service's link to its MQTT broker, replaced when a reload changes `mqtt:`.
final class FleetHolder: Sendable {
    private let link = Mutex<FleetLink?>(nil)

    /// Stops the link there is (its node says "offline"; renamed or gone from the
    /// configuration, its retained messages and Home Assistant device are removed), then
    /// starts one for `settings`.
    func replace(_ settings: MQTTSettings?, make: (MQTTSettings) throws -> FleetLink) async throws {
        if let old = take() {
            let renamed = settings.map { (try? $0.resolved().1) != old.topics } ?? true
            await old.stop(forget: renamed)
        }
        guard let settings else { return }
        let new = try make(settings)
        link.withLock { $0 = new }
    }

    private func take() -> FleetLink? { link.withLock { l in defer { l = nil }; return l } }

    func stop() async { await take()?.stop() }
}

/// Where the server listens, once it does (for --listen HOST:0, the port the system gave).
final class ServedAt: Sendable {
    private let value = Mutex<String?>(nil)
    var url: String? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

/// The service's jobs and triggers as a swift-service-lifecycle service: it waits for the
/// graceful shutdown, then stops them and waits until each has finished what it was capturing.
struct WorkShutdown: Service {
    let service: CameraService
    let notifier: SystemdNotifier?

    func run() async throws {
        try? await gracefulShutdown()
        notifier?.stopping(status: "stopping: finishing the captures in progress")
        await service.stopAll("the service is stopping")
    }
}
