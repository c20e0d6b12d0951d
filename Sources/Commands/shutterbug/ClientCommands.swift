import ArgumentParser
import JobOptions
import Foundation
import ConfigFile
import HTTPTransfer
import Server

/// Where a running `shutterbug serve` is and how to talk to it: the commands that ask it
/// instead of opening the camera themselves, so a user never fights the service for it.
struct ServiceOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The service's address (default $SHUTTERBUG_SERVICE, else http://127.0.0.1:8080/).", valueName: "url"))
    var service: String?

    @Option(name: .long, help: ArgumentHelp("A file holding the service's bearer token (default $SHUTTERBUG_TOKEN).", valueName: "file"))
    var tokenFile: String?

    static let defaultURL = "http://127.0.0.1:8080/"

    func base() throws -> URL {
        var text = service ?? environment("SHUTTERBUG_SERVICE") ?? Self.defaultURL
        if !text.hasSuffix("/") { text += "/" }
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw ValidationError("--service must be an http:// address such as \(Self.defaultURL), not '\(text)'")
        }
        return url
    }

    func token() throws -> String? {
        if let tokenFile {
            guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) else { throw ValidationError("--token-file \(tokenFile): cannot read it") }
            return text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return environment("SHUTTERBUG_TOKEN")
    }

    /// Sends a request to the service; its status and body. Throws, naming the address, when
    /// nothing answers there. libcurl waits on the socket (poll): a 4 s bracket costs the client
    /// no CPU while it waits (URLSession on Linux spun a core for the whole wait), and a service
    /// that is not there is said at once.
    func call(_ path: String, method: String = "GET", body: Data? = nil, timeout: TimeInterval = 120) async throws -> (status: Int, body: Data) {
        let url = try base().appendingPathComponent(path)
        var headers: [(name: String, value: String)] = []
        if body != nil { headers.append(("Content-Type", "application/json")) }
        if let token = try token() { headers.append(("Authorization", "Bearer \(token)")) }
        let request = HTTPTransfer.Request(method: method, url: url.absoluteString, headers: headers, body: body.map { .bytes(Array($0)) } ?? .none,
                                  connectTimeout: .seconds(5), timeout: .milliseconds(Int64(timeout * 1000)))
        do {
            let response = try await HTTPTransfer.perform(request)
            return (response.status, Data(response.body))
        } catch let error as HTTPTransfer.Failure {
            throw ServiceUnreachable(url: try base().absoluteString, reason: error.message)
        }
    }

    /// The service's answer as an error a person can act on, for a status that is not 2xx.
    static func refusal(_ status: Int, _ body: Data) -> ServiceRefusal {
        let message = (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["error"] as? String ?? String(decoding: body, as: UTF8.self)
        let hint = status == 401 ? " (give --token-file or SHUTTERBUG_TOKEN)" : ""
        return ServiceRefusal(description: "the service answered \(status): \(message)\(hint)")
    }
}

/// The service refused a request: its status and message, with no usage text after it.
struct ServiceRefusal: Error, CustomStringConvertible {
    var description: String
}

struct ServiceUnreachable: Error, CustomStringConvertible {
    var url: String
    var reason: String
    var description: String { "no shutterbug service answers at \(url) (\(reason)); start one with `shutterbug serve`, or give --service" }
}

/// `shutterbug status`: what the running service says about itself.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Ask the running service (shutterbug serve) how it is: camera, streaming, newest frame, captures, disk.")

    @OptionGroup var service: ServiceOptions

    @Flag(name: .long, help: "The service's JSON as it is.")
    var json = false

    func run() async throws {
        let (status, body) = try await service.call("api/status")
        guard status == 200 else { throw ServiceOptions.refusal(status, body) }
        if json {
            print(String(decoding: body, as: UTF8.self), terminator: "")
            return
        }
        let s = try JSONDecoder().decode(CameraService.Status.self, from: body)
        print("service at \(try service.base().absoluteString): \(s.camera) (\(s.model)), \(s.streaming ? "streaming" : "NOT streaming"), up \(TimelapseCommand.span(.seconds(s.uptimeSeconds)))")
        let frame = [s.newestFrame.map { "frame \($0)" }, s.exposureUs.map { "\(Int($0.rounded())) µs" }, s.analogueGain.map { "gain \(String(format2: $0))" },
                     s.lux.map { "\(String(format2: $0)) lux" }, s.sensorTemperatureC.map { "\(String(format2: $0)) °C" }].compactMap { $0 }
        if !frame.isEmpty { print("  newest: " + frame.joined(separator: ", ")) }
        print("  captures: \(s.capturesTaken) taken, \(s.captureFailures) failed; \(TimelapseCommand.bytes(s.bytesWritten)) written to \(s.output)\(s.diskFreeBytes.map { ", \(TimelapseCommand.bytes($0)) free" } ?? "")")
        if let last = s.lastCapture { print("  last: \(last.kind), \(last.files.count) files: \(last.files.joined(separator: " "))") }
    }
}

/// `shutterbug capture`: a photo or a bracket taken by the running service.
struct CaptureCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture",
        abstract: "Ask the running service (shutterbug serve) for a photo or a bracket; it writes the files and says where.")

    @OptionGroup var service: ServiceOptions

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("An EV bracket around the metered exposure, e.g. -2,0,2.", valueName: "ev,..."))
    var ev: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("A manual bracket, e.g. 1/1000,1/250,1/60.", valueName: "t,..."))
    var exposures: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Analogue gain for --exposures (1...64).", valueName: "gain"))
    var gain: Double?

    @Option(name: .long, help: ArgumentHelp("File formats: dng, jpeg, or both.", valueName: "dng,jpeg"))
    var format: String = "jpeg"

    @Flag(name: .long, help: "The service's JSON as it is.")
    var json = false

    func validate() throws {
        if ev != nil, exposures != nil { throw ValidationError("--ev and --exposures exclude each other") }
        if gain != nil, exposures == nil { throw ValidationError("--gain applies to --exposures only") }
        _ = try request()
    }

    func request() throws -> CameraService.CaptureRequest {
        var r = CameraService.CaptureRequest()
        if let ev { r.ev = try NumericInput.numbers(ev, "--ev", in: -8...8, unit: "stops", example: "-2,0,2", maxCount: 9) }
        if let exposures {
            r.exposuresUs = try NumericInput.list(exposures, "--exposures", example: "1/1000,1/250", maxCount: 9)
                .map { try NumericInput.exposure($0, "--exposures value", in: 1e-5...60).microsecondsValue }
        }
        if let gain {
            try NumericInput.check(gain, "--gain", in: 1...64)
            r.gain = gain
        }
        r.formats = try Bracket.formats(parsing: format).map(\.rawValue).sorted()
        return r
    }

    func run() async throws {
        let (status, body) = try await service.call("api/capture", method: "POST", body: try JSONEncoder().encode(try request()))
        guard status == 201 else { throw ServiceOptions.refusal(status, body) }
        if json {
            print(String(decoding: body, as: UTF8.self), terminator: "")
            return
        }
        let r = try JSONDecoder().decode(CameraService.CaptureRecord.self, from: body)
        for a in r.adjustments { notice("adjusted: \(a)") }
        for f in r.failures { notice("failed: \(f)") }
        print("\(r.kind) by the service at \(try service.base().absoluteString): \(r.files.count) files under its output")
        for f in r.files { print("  \(f)") }
    }
}

/// Whether something accepts a TCP connection at a service address on this machine, within a
/// quarter second: enough to tell a user that a service is there (it is asked properly after).
enum ServiceProbe {
    static func answers(_ url: String) -> Bool {
        guard let u = URL(string: url), let host = u.host, ["127.0.0.1", "localhost", "::1"].contains(host) else { return false }
        let port = UInt16(u.port ?? 80)
        let fd = socket(host == "::1" ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var rc: Int32
        if host == "::1" {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = port.bigEndian
            a.sin6_addr = in6addr_loopback
            rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        } else {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        if rc == 0 { return true }
        guard errno == EINPROGRESS else { return false }
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&p, 1, 250) == 1 else { return false }
        var err: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
        return err == 0
    }
}

/// `shutterbug jobs`: the running service's timelapse jobs, listed, created and controlled.
struct JobsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jobs",
        abstract: "The running service's timelapse jobs: list them, create one, pause, resume or stop one; reload the service's configuration.",
        discussion: """
            shutterbug jobs                       the jobs, a line each
            shutterbug jobs create NAME --job-file roof.yaml   a job from a job file's options
            shutterbug jobs pause|resume|stop NAME
            shutterbug jobs reload                the service reads its configuration again (as SIGHUP)
            A job file holds `shutterbug timelapse`'s options (interval: 30s, ev: [-2, 0, 2]); \
            the service puts the job's files under its output, in a folder named after the job.
            """)

    @OptionGroup var service: ServiceOptions

    @Argument(help: ArgumentHelp("list, create, pause, resume, stop or reload.", valueName: "action"))
    var action: String = "list"

    @Argument(help: ArgumentHelp("The job's name.", valueName: "name"))
    var name: String?

    @Option(name: .long, help: ArgumentHelp("With create: a YAML file of the job's options (shutterbug timelapse's long options).", valueName: "file"))
    var jobFile: String?

    @Flag(name: .long, help: "The service's JSON as it is.")
    var json = false

    func validate() throws {
        let actions = ["list", "create", "pause", "resume", "stop", "reload"]
        guard actions.contains(action) else { throw ValidationError("the action is one of \(actions.joined(separator: ", ")), not '\(action)'") }
        if ["create", "pause", "resume", "stop"].contains(action), name == nil { throw ValidationError("\(action) needs the job's name: shutterbug jobs \(action) NAME") }
        if action == "create", jobFile == nil { throw ValidationError("create needs --job-file FILE with the job's options (interval: 30s, count: 100, ev: [-2, 0, 2])") }
        if jobFile != nil, action != "create" { throw ValidationError("--job-file goes with create") }
    }

    func run() async throws {
        let (status, body): (Int, Data)
        switch action {
        case "list": (status, body) = try await service.call("api/jobs")
        case "reload": (status, body) = try await service.call("api/config/reload", method: "POST")
        case "create":
            // The file's options, checked here with their lines, sent as the API takes them.
            let problems = OptionFile.jobs.check(.init(name: name, line: 1, options: try Self.options(jobFile!)), file: jobFile!)
            guard problems.isEmpty else {
                notice("the job file has \(problems.count == 1 ? "a mistake" : "\(problems.count) mistakes"):\n" + problems.map(\.description).joined(separator: "\n"))
                throw ExitCode.validationFailure
            }
            var options: [String: Any] = [:]
            for o in try Self.options(jobFile!) {
                switch o.value {
                case .flag(let on): options[o.key] = on
                case .text(let t): options[o.key] = t
                case .list(let items): options[o.key] = items
                }
            }
            (status, body) = try await service.call("api/jobs", method: "POST", body: try JSONSerialization.data(withJSONObject: ["name": name!, "options": options]))
        default:
            (status, body) = try await service.call("api/jobs/\(name!)/\(action)", method: "POST")
        }
        guard (200...299).contains(status) else { throw ServiceOptions.refusal(status, body) }
        if json {
            print(String(decoding: body, as: UTF8.self), terminator: "")
            return
        }
        if action == "reload" {
            let r = try JSONDecoder().decode(CameraService.Reload.self, from: body)
            print("reloaded: kept \(r.kept.joined(separator: ", ").nonEmpty ?? "nothing"); started \(r.started.joined(separator: ", ").nonEmpty ?? "nothing"); restarted \(r.restarted.joined(separator: ", ").nonEmpty ?? "nothing"); stopped \(r.stopped.joined(separator: ", ").nonEmpty ?? "nothing")")
            if !r.needsRestart.isEmpty { print("  \(r.needsRestart.joined(separator: ", ")) changed: they take effect when the service is restarted") }
            for refused in r.refused { print("  refused: \(refused)") }
            return
        }
        let jobs = action == "list" ? try JSONDecoder().decode([JobStatus].self, from: body) : [try JSONDecoder().decode(JobStatus.self, from: body)]
        if jobs.isEmpty { print("the service at \(try service.base().absoluteString) runs no job") }
        for j in jobs {
            let next = j.nextSlot.map { "next slot \($0)\(j.total.map { " of \($0)" } ?? "") at \(j.nextSlotAt ?? "?")" } ?? ""
            print("\(j.name): \(j.state.rawValue)\(j.message.map { " (\($0))" } ?? ""); \(j.taken) taken, \(j.skipped) skipped, \(j.missed) missed, \(j.failed) failed this run\(next.isEmpty ? "" : "; " + next)")
            if let s = j.lastSlot { print("  last slot \(s.slot) at \(s.wall): \(s.state), frames \(s.frames.map(String.init).joined(separator: ",")), \(s.files.count) files") }
        }
    }

    static func options(_ path: String) throws -> [OptionSetting] {
        do {
            let read = try OptionDocument(path: path).options()
            guard read.problems.isEmpty else {
                notice(read.problems.map(\.description).joined(separator: "\n"))
                throw ExitCode.validationFailure
            }
            return read.options
        } catch let e as ConfigurationProblems {
            notice(e.description)
            throw ExitCode.validationFailure
        }
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
