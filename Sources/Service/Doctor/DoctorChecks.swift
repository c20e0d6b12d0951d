import ShutterbugCore

/// One line of `shutterbug doctor`: what was looked at, what was found, and the one thing to do
/// about it.
public struct DoctorCheck: Sendable, Equatable {
    public enum Status: String, Sendable, Comparable {
        /// Fine.
        case ok
        /// Works, but not as a Pi user would want (a note worth reading).
        case warning
        /// Why there is no picture, or will not be: `doctor` exits 1.
        case problem
        /// Could not be read by this user or on this system; says what.
        case unknown

        var rank: Int {
            switch self {
            case .ok: 0
            case .unknown: 1
            case .warning: 2
            case .problem: 3
            }
        }
        public static func < (a: Status, b: Status) -> Bool { a.rank < b.rank }
    }

    /// A short stable name, the key in `--json` ("libcamera", "cameras", "cma", ...).
    public var name: String
    public var status: Status
    public var summary: String
    /// One line a user can act on; nil when there is nothing to do.
    public var fix: String?

    public init(_ name: String, _ status: Status, _ summary: String, fix: String? = nil) {
        self.name = name
        self.status = status
        self.summary = summary
        self.fix = fix
    }
}

/// What `doctor` read off the system: everything its checks judge, gathered by
/// `SystemReader` (or written by a test). Optional fields are nil when they could not be read.
public struct DoctorFacts: Sendable {
    public struct LibcameraFacts: Sendable {
        /// What libcamera calls itself at run time ("v0.7.1+rpt20260429").
        public var runtimeVersion: String
        /// The headers the binary was compiled against ("0.7.1").
        public var compiledVersion: String
        /// The library file the process loaded, from /proc/self/maps.
        public var libraryPath: String?
        /// The Debian package that holds it and its version ("libcamera0.7", "0.7.1+rpt20260429-1").
        public var package: String?
        public var packageVersion: String?
        /// Why the camera manager did not start, if it did not.
        public var managerError: String?
        public init(runtimeVersion: String, compiledVersion: String, libraryPath: String? = nil, package: String? = nil,
                    packageVersion: String? = nil, managerError: String? = nil) {
            self.runtimeVersion = runtimeVersion
            self.compiledVersion = compiledVersion
            self.libraryPath = libraryPath
            self.package = package
            self.packageVersion = packageVersion
            self.managerError = managerError
        }
    }

    public struct Camera: Sendable {
        public var id: String
        public var model: String
        public var pixelArray: (width: Int, height: Int)?
        public init(id: String, model: String, pixelArray: (width: Int, height: Int)? = nil) {
            self.id = id
            self.model = model
            self.pixelArray = pixelArray
        }
    }

    /// A device node and whether this user may open it for reading and writing.
    public struct Node: Sendable, Equatable {
        public var path: String
        public var accessible: Bool
        public init(_ path: String, accessible: Bool) {
            self.path = path
            self.accessible = accessible
        }
    }

    public var libcamera: LibcameraFacts
    /// The folder the IPA modules are loaded from, and the modules there (nil: not found).
    public var ipaDirectory: String?
    public var ipaModules: [String] = []
    /// The installed libcamera-ipa package's version (nil: not installed, or not from a package).
    public var ipaPackageVersion: String?
    /// Tuning files by pipeline ("vc4": ["imx708.json", ...]) under the folder named.
    public var tuningDirectory: String?
    public var tuningFiles: [String: [String]] = [:]
    public var cameras: [Camera] = []
    /// /proc/device-tree/model ("Raspberry Pi 5 Model B Rev 1.0"); nil on other machines.
    public var boardModel: String?
    /// The firmware's config.txt: its path and lines; nil when there is none to read.
    public var bootConfigPath: String?
    public var bootConfig: [String]?
    /// Sensors the kernel probed on an I²C bus (/sys/bus/i2c/devices/*/name: "imx708"), and
    /// media controller devices (/dev/media*).
    public var probedSensors: [String] = []
    public var mediaDevices: [String] = []
    /// /proc/meminfo's CmaTotal and CmaFree, bytes; nil without a CMA pool.
    public var cmaTotal: Int?
    public var cmaFree: Int?
    public var dmaHeaps: [Node] = []
    public var gpioChips: [Node] = []
    /// This user's name and groups, and the service user's groups (nil: no such user).
    public var userName: String
    public var userGroups: [String]
    public var serviceUserGroups: [String]?
    /// `systemctl is-active shutterbug` ("active", "inactive", "failed"); nil: no systemd here.
    public var serviceState: String?
    public var serviceEnabled: String?
    /// The output folder the service writes to, and its free and total bytes (nil: unreadable).
    public var outputPath: String
    public var outputFree: Int?
    public var outputTotal: Int?
    /// The kernel's clock discipline (adjtimex): synchronised, and its estimated maximum error.
    public var clockSynchronised: Bool?
    public var clockMaxErrorUs: Int?
    /// The daemon that disciplines it ("systemd-timesyncd", "chrony"), nil: none found.
    public var clockDaemon: String?

    public init(libcamera: LibcameraFacts, userName: String, userGroups: [String], outputPath: String) {
        self.libcamera = libcamera
        self.userName = userName
        self.userGroups = userGroups
        self.outputPath = outputPath
    }
}

/// The checks, a pure function of the facts: each fact judged once, in the order a user would
/// look (is libcamera there, does it see a camera, can the service use it, will it keep time).
public enum Doctor {
    /// What the service's default configuration asks of the camera's buffers: the full-size
    /// YUV420 still stream with 9 buffers (5 for a bracket, 4 in flight).
    public static let serviceBufferCount = 9

    /// Sensors libcamera's Raspberry Pi pipelines drive (their kernel driver names).
    static let knownSensors = ["imx708", "imx477", "imx219", "imx296", "imx500", "imx290", "imx327", "imx378", "imx519", "ov5647", "ov9281", "ov64a40"]

    public static func checks(_ f: DoctorFacts) -> [DoctorCheck] {
        var out: [DoctorCheck] = []
        out.append(libcamera(f))
        out.append(contentsOf: pipelineFiles(f))
        out.append(cameras(f))
        out.append(cma(f))
        out.append(dmaHeaps(f))
        out.append(contentsOf: groups(f))
        out.append(gpio(f))
        out.append(service(f))
        out.append(disk(f))
        out.append(clock(f))
        return out
    }

    /// 1 when any check is a problem, else 0.
    public static func exitCode(_ checks: [DoctorCheck]) -> Int32 {
        checks.contains { $0.status == .problem } ? 1 : 0
    }

    /// "fork" when the library is the Raspberry Pi fork (its version carries "+rpt"), "Debian"
    /// when a Debian package holds it, else "built from source".
    public static func origin(_ l: DoctorFacts.LibcameraFacts) -> String {
        if l.runtimeVersion.contains("+rpt") || (l.packageVersion ?? "").contains("+rpt") { return "the Raspberry Pi fork" }
        if l.package != nil { return "Debian" }
        return "not from a package"
    }

    static func libcamera(_ f: DoctorFacts) -> DoctorCheck {
        let l = f.libcamera
        let pkg = l.package.map { p in ", package \(p) \(l.packageVersion ?? "")" } ?? ""
        let where_ = l.libraryPath.map { " at \($0)" } ?? ""
        let summary = "libcamera \(l.runtimeVersion) (\(origin(l))\(pkg))\(where_); built against \(l.compiledVersion)"
        if let e = l.managerError {
            return DoctorCheck("libcamera", .problem, summary + "; the camera manager did not start: \(e)",
                               fix: "run `LIBCAMERA_LOG_LEVELS=*:DEBUG shutterbug cameras` and read the first error")
        }
        let runtime = l.runtimeVersion.hasPrefix("v") ? String(l.runtimeVersion.dropFirst()) : l.runtimeVersion
        let majorMinor = { (v: String) in v.split(separator: ".").prefix(2).joined(separator: ".") }
        if !runtime.isEmpty, majorMinor(runtime) != majorMinor(l.compiledVersion) {
            return DoctorCheck("libcamera", .problem, summary + "; libcamera keeps no ABI between minor releases",
                               fix: "install the shutterbug package built for libcamera \(majorMinor(runtime)), or build on this machine")
        }
        return DoctorCheck("libcamera", .ok, summary)
    }

    static func pipelineFiles(_ f: DoctorFacts) -> [DoctorCheck] {
        var out: [DoctorCheck] = []
        // The IPA package must be the library's own release: libcamera loads no IPA module built
        // for another (Debian 13's libcamera-ipa is 0.4 where backports' libcamera0.7 is 0.7.1).
        let install = "sudo apt install \(f.libcamera.packageVersion?.contains("~bpo") == true ? "-t trixie-backports " : "")libcamera-ipa"
        let release = { (v: String) in String(v.drop { !$0.isNumber }).split(separator: ".").prefix(2).joined(separator: ".") }
        if let ipa = f.ipaPackageVersion, let lib = f.libcamera.packageVersion, release(ipa) != release(lib) {
            out.append(DoctorCheck("ipa", .problem, "libcamera-ipa is \(ipa) but the library is \(lib): libcamera loads no IPA module of another release, so no camera will work",
                                   fix: install))
        } else if let dir = f.ipaDirectory, !f.ipaModules.isEmpty {
            out.append(DoctorCheck("ipa", .ok, "IPA modules in \(dir): \(f.ipaModules.joined(separator: ", "))"))
        } else {
            let status: DoctorCheck.Status = f.boardModel?.contains("Raspberry Pi") == true ? .problem : .warning
            out.append(DoctorCheck("ipa", status, "no IPA modules\(f.ipaDirectory.map { " in \($0)" } ?? " beside the library"): libcamera will control no camera",
                                   fix: install))
        }
        if let dir = f.tuningDirectory {
            let listing = f.tuningFiles.keys.sorted().map { "\($0): \(f.tuningFiles[$0]!.count) sensors" }.joined(separator: ", ")
            var summary = "tuning files in \(dir)" + (listing.isEmpty ? "" : " (\(listing))")
            var status = DoctorCheck.Status.ok
            var fix: String?
            // The tuning file each camera will load: its sensor in the board's pipeline folder.
            let pipeline = f.boardModel.map { $0.contains("Raspberry Pi 5") ? "pisp" : "vc4" }
            if let pipeline, f.tuningFiles[pipeline] != nil {
                for c in f.cameras {
                    let sensor = sensorName(c.model)
                    if f.tuningFiles[pipeline]!.contains("\(sensor).json") {
                        summary += "; \(c.model) loads \(pipeline)/\(sensor).json"
                    } else {
                        status = .warning
                        summary += "; no \(pipeline)/\(sensor).json for \(c.model) (libcamera falls back to uncalibrated.json)"
                        fix = "set LIBCAMERA_RPI_TUNING_FILE to the module maker's tuning file"
                    }
                }
            }
            out.append(DoctorCheck("tuning", status, summary, fix: fix))
        } else if f.boardModel?.contains("Raspberry Pi") == true {
            out.append(DoctorCheck("tuning", .problem, "no Raspberry Pi tuning files (/usr/share/libcamera/ipa/rpi)",
                                   fix: "sudo apt install libcamera-ipa"))
        }
        return out
    }

    /// "imx708_wide" -> "imx708_wide", "imx708" model names are the sensor's driver name.
    static func sensorName(_ model: String) -> String { model.lowercased() }

    static func cameras(_ f: DoctorFacts) -> DoctorCheck {
        if !f.cameras.isEmpty {
            let list = f.cameras.map { c in "\(c.model) (\(c.id))" }.joined(separator: ", ")
            return DoctorCheck("cameras", .ok, "\(f.cameras.count) camera\(f.cameras.count == 1 ? "" : "s"): \(list)")
        }
        // None: say why, from the cheapest evidence up.
        var why: [String] = []
        var fix = "check the ribbon cable (contacts towards the board's contacts), then reboot"
        let sensors = f.probedSensors.filter { s in knownSensors.contains { s.hasPrefix($0) } }
        if let lines = f.bootConfig, let path = f.bootConfigPath {
            let active = lines.map { $0.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? "" }
                .map { $0.trimmingCharacters(in: " \t") }.filter { !$0.isEmpty }
            let autoDetect = active.last { $0.hasPrefix("camera_auto_detect=") }.map { $0.hasSuffix("=1") }
            let overlays = active.filter { $0.hasPrefix("dtoverlay=") }.map { String($0.dropFirst("dtoverlay=".count)) }
                .filter { o in knownSensors.contains { o.hasPrefix($0) } }
            if autoDetect != true, overlays.isEmpty {
                why.append("\(path) has neither camera_auto_detect=1 nor a camera dtoverlay=")
                fix = "add camera_auto_detect=1 (or dtoverlay=imx708 for the Camera Module 3) to \(path) and reboot"
            } else if !overlays.isEmpty {
                why.append("\(path) names \(overlays.joined(separator: ", "))")
            } else {
                why.append("\(path) has camera_auto_detect=1")
            }
        } else if f.boardModel?.contains("Raspberry Pi") == true {
            why.append("no /boot/firmware/config.txt to read")
        }
        if f.boardModel?.contains("Raspberry Pi") == true || !f.probedSensors.isEmpty {
            if sensors.isEmpty {
                why.append("no camera sensor was probed on an I²C bus (/sys/bus/i2c/devices)")
            } else {
                why.append("the kernel probed \(sensors.joined(separator: ", ")) but libcamera did not take it")
                fix = "install the libcamera that matches the kernel (Raspberry Pi OS: sudo apt full-upgrade), then reboot"
            }
        }
        why.append(f.mediaDevices.isEmpty ? "no /dev/media* device" : "media devices \(f.mediaDevices.joined(separator: ", "))")
        if f.boardModel?.contains("Raspberry Pi") != true && sensors.isEmpty {
            return DoctorCheck("cameras", .warning, "no libcamera camera (\(why.joined(separator: "; "))); the simulated camera will be used",
                               fix: "attach a camera, or use sim:imx708 / sim:imx477 (shutterbug cameras lists them)")
        }
        return DoctorCheck("cameras", .problem, "no libcamera camera: \(why.joined(separator: "; "))", fix: fix)
    }

    /// Bytes one full-size YUV420 frame of the camera takes (1.5 bytes a pixel).
    static func stillFrameBytes(_ c: DoctorFacts.Camera) -> Int? {
        c.pixelArray.map { $0.width * $0.height * 3 / 2 }
    }

    static func cma(_ f: DoctorFacts) -> DoctorCheck {
        let pi5 = f.boardModel?.contains("Raspberry Pi 5") == true
        let needs = f.cameras.compactMap(stillFrameBytes).max().map { $0 * serviceBufferCount }
        guard let total = f.cmaTotal, total > 0 else {
            if pi5 || f.boardModel == nil {
                return DoctorCheck("cma", .ok, "no CMA pool\(pi5 ? " (a Pi 5 maps camera buffers through its IOMMU)" : "")")
            }
            return DoctorCheck("cma", .warning, "no CMA pool in /proc/meminfo: camera buffers have nowhere to come from",
                               fix: "keep dtoverlay=vc4-kms-v3d in /boot/firmware/config.txt (it sets the pool)")
        }
        let budget = total * 3 / 4
        var summary = "CMA \(MemoryBudget.megabytes(total)) (\(MemoryBudget.megabytes(f.cmaFree ?? 0)) free)"
        guard let needs else { return DoctorCheck("cma", .ok, summary) }
        summary += "; the service's default \(serviceBufferCount) full-size buffers need \(MemoryBudget.megabytes(needs))"
        if pi5 { return DoctorCheck("cma", .ok, summary + " (a Pi 5 takes them from ordinary memory)") }
        if needs > budget {
            return DoctorCheck("cma", .problem, summary + ", over the \(MemoryBudget.megabytes(budget)) Shutterbug allows itself (three quarters of the pool)",
                               fix: "raise the pool (dtoverlay=vc4-kms-v3d,cma-512 in /boot/firmware/config.txt) or set size: in serve.yaml to a binned mode")
        }
        return DoctorCheck("cma", .ok, summary + ", within \(MemoryBudget.megabytes(budget))")
    }

    static func dmaHeaps(_ f: DoctorFacts) -> DoctorCheck {
        if f.dmaHeaps.isEmpty {
            let status: DoctorCheck.Status = f.boardModel?.contains("Raspberry Pi") == true ? .problem : .warning
            return DoctorCheck("dma-heap", status, "no /dev/dma_heap: libcamera allocates buffers from the video device instead (some pipelines need the heap)",
                               fix: status == .problem ? "update the kernel (sudo apt full-upgrade) and reboot" : nil)
        }
        let usable = f.dmaHeaps.filter(\.accessible)
        let names = f.dmaHeaps.map { "\($0.path)\($0.accessible ? "" : " (no access)")" }.joined(separator: ", ")
        if usable.isEmpty {
            return DoctorCheck("dma-heap", .warning, "\(names): \(f.userName) cannot open them",
                               fix: "sudo adduser \(f.userName) video, then log in again (the package's udev rule gives video the heaps)")
        }
        return DoctorCheck("dma-heap", .ok, names)
    }

    static func groups(_ f: DoctorFacts) -> [DoctorCheck] {
        let wanted = ["video", "render", "gpio"]
        var out: [DoctorCheck] = []
        let missing = wanted.filter { !f.userGroups.contains($0) }
        if f.userName == "root" {
            out.append(DoctorCheck("groups", .ok, "running as root (the service runs as the shutterbug user)"))
        } else if missing.isEmpty {
            out.append(DoctorCheck("groups", .ok, "\(f.userName) is in video, render and gpio"))
        } else {
            out.append(DoctorCheck("groups", .warning, "\(f.userName) is not in \(missing.joined(separator: ", ")): the camera, display or GPIO may be refused",
                                   fix: "sudo usermod -aG \(missing.joined(separator: ",")) \(f.userName), then log in again"))
        }
        if let s = f.serviceUserGroups {
            let m = wanted.filter { !s.contains($0) }
            out.append(m.isEmpty
                ? DoctorCheck("service-user", .ok, "the shutterbug user is in video, render and gpio")
                : DoctorCheck("service-user", .problem, "the shutterbug user is not in \(m.joined(separator: ", "))",
                              fix: "sudo usermod -aG \(m.joined(separator: ",")) shutterbug && sudo systemctl restart shutterbug"))
        }
        return out
    }

    static func gpio(_ f: DoctorFacts) -> DoctorCheck {
        if f.gpioChips.isEmpty {
            return DoctorCheck("gpio", .warning, "no /dev/gpiochip*: GPIO triggers cannot run here")
        }
        let closed = f.gpioChips.filter { !$0.accessible }.map(\.path)
        if closed.count == f.gpioChips.count {
            return DoctorCheck("gpio", .warning, "\(f.userName) cannot open \(closed.joined(separator: ", "))",
                               fix: "sudo usermod -aG gpio \(f.userName), then log in again")
        }
        return DoctorCheck("gpio", .ok, "\(f.gpioChips.count - closed.count) of \(f.gpioChips.count) GPIO chips open to \(f.userName)")
    }

    static func service(_ f: DoctorFacts) -> DoctorCheck {
        guard let state = f.serviceState else {
            return DoctorCheck("service", .unknown, "could not ask systemd about shutterbug.service (no systemctl, or no systemd running)")
        }
        let enabled = f.serviceEnabled.map { ", \($0)" } ?? ""
        switch state {
        case "active", "reloading", "activating":
            return DoctorCheck("service", .ok, "shutterbug.service is \(state)\(enabled)")
        case "failed":
            return DoctorCheck("service", .problem, "shutterbug.service failed\(enabled)",
                               fix: "journalctl -u shutterbug -n 50 says why; then sudo systemctl restart shutterbug")
        default:
            return DoctorCheck("service", .ok, "shutterbug.service is \(state)\(enabled)",
                               fix: f.serviceEnabled == "enabled" ? nil : "sudo systemctl enable --now shutterbug to run it at boot")
        }
    }

    static func disk(_ f: DoctorFacts) -> DoctorCheck {
        guard let free = f.outputFree, let total = f.outputTotal else {
            return DoctorCheck("disk", .unknown, "could not read the free space at \(f.outputPath)")
        }
        let summary = "\(size(free)) free of \(size(total)) at \(f.outputPath)"
        // A 12 MP DNG is about 24 MB: under 1 GB is a few dozen brackets.
        if free < 256 << 20 {
            return DoctorCheck("disk", .problem, summary + ": jobs pause below their reserve",
                               fix: "free space, or set keep: on the jobs in /etc/shutterbug/serve.yaml")
        }
        if free < 2 << 30 {
            return DoctorCheck("disk", .warning, summary, fix: "set keep: on the jobs so the oldest photos make room")
        }
        return DoctorCheck("disk", .ok, summary)
    }

    static func clock(_ f: DoctorFacts) -> DoctorCheck {
        let daemon = f.clockDaemon ?? "no time daemon found"
        guard let synced = f.clockSynchronised else {
            return DoctorCheck("clock", .unknown, "could not read the kernel's clock state (\(daemon))")
        }
        let err = f.clockMaxErrorUs.map { ", maximum error \(Self.duration(us: $0))" } ?? ""
        if synced {
            return DoctorCheck("clock", .ok, "synchronised by \(daemon)\(err)")
        }
        // A Pi has no battery-backed clock: unsynchronised, its time starts where it stopped.
        return DoctorCheck("clock", .warning, "not synchronised (\(daemon))\(err): timelapse slots and file times follow a clock that may be wrong",
                           fix: f.clockDaemon == nil ? "sudo apt install systemd-timesyncd" : "check the network, then timedatectl timesync-status")
    }

    /// "18.5 MB", "71.4 GB".
    static func size(_ bytes: Int) -> String {
        bytes < 10 << 30 ? MemoryBudget.megabytes(bytes) : "\((Double(bytes) / Double(1 << 30) * 10).rounded() / 10) GB"
    }

    static func duration(us: Int) -> String {
        if us < 1000 { return "\(us) µs" }
        if us < 1_000_000 { return "\(us / 1000) ms" }
        return "\(us / 1_000_000) s"
    }

    /// The lines a terminal shows: "ok       cameras   1 camera: imx708 (...)" and the fix
    /// indented under it.
    public static func text(_ checks: [DoctorCheck]) -> String {
        let width = checks.map(\.name.count).max() ?? 0
        var out = ""
        for c in checks {
            let label = c.status == .unknown ? "?" : c.status.rawValue
            out += label.padding(toLength: 8, withPad: " ", startingAt: 0) + c.name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + c.summary + "\n"
            if let fix = c.fix { out += String(repeating: " ", count: 8 + width + 2) + "fix: " + fix + "\n" }
        }
        let problems = checks.filter { $0.status == .problem }.count
        let warnings = checks.filter { $0.status == .warning }.count
        out += "\(problems) problem\(problems == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s")\n"
        return out
    }

    /// One JSON object: {"checks":[{"name","status","summary","fix"}...],"problems":N,"warnings":N}.
    public static func json(_ checks: [DoctorCheck], facts: DoctorFacts) -> String {
        var o = JSONObject()
        o.add("libcamera", facts.libcamera.runtimeVersion)
        o.add("libcameraOrigin", origin(facts.libcamera))
        o.add("libcameraPackage", facts.libcamera.package)
        o.add("libcameraPackageVersion", facts.libcamera.packageVersion)
        o.add("compiledAgainst", facts.libcamera.compiledVersion)
        o.add("cameras", facts.cameras.map(\.id))
        o.add("checks", objects: checks.map { c in
            var j = JSONObject()
            j.add("name", c.name)
            j.add("status", c.status.rawValue)
            j.add("summary", c.summary)
            j.add("fix", c.fix)
            return j
        })
        o.add("problems", checks.filter { $0.status == .problem }.count)
        o.add("warnings", checks.filter { $0.status == .warning }.count)
        return o.text
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let c = s.first, set.contains(c) { s = s.dropFirst() }
        while let c = s.last, set.contains(c) { s = s.dropLast() }
        return String(s)
    }
}
