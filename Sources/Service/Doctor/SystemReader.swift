import CSystemShims
import Foundation
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// Reads the facts `doctor` judges off this machine, as the user running it (never root):
/// files under /proc, /sys, /dev, /boot, /etc and /run, dpkg-query, and two questions to
/// systemctl. Anything it cannot read stays nil, and the check says so.
///
/// `root` prefixes every path, so a test can hand it a made-up tree.
public struct SystemReader: Sendable {
    public var root: String
    /// dpkg's database for dpkg-query (nil: its own default); a test's made-up system has one.
    public var dpkgAdmindir: String?

    public init(root: String = "", dpkgAdmindir: String? = nil) {
        self.root = root
        self.dpkgAdmindir = dpkgAdmindir
    }

    /// Fills the facts; the libcamera part comes from the caller (it alone links libcamera).
    public func read(libcamera: DoctorFacts.LibcameraFacts, cameras: [DoctorFacts.Camera], outputPath: String,
                     askSystemd: Bool = true) -> DoctorFacts {
        let (user, groups) = currentUser()
        var f = DoctorFacts(libcamera: libcamera, userName: user, userGroups: groups, outputPath: outputPath)
        var l = libcamera
        if l.libraryPath == nil { l.libraryPath = loadedLibcamera() }
        if let path = l.libraryPath, l.package == nil, let (p, v) = owningPackage(of: path) {
            l.package = p
            l.packageVersion = v
        }
        f.libcamera = l
        f.cameras = cameras
        (f.ipaDirectory, f.ipaModules) = ipaModules(libraryPath: l.libraryPath)
        if l.package != nil {
            let admin = dpkgAdmindir.map { ["--admindir=\($0)"] } ?? []
            f.ipaPackageVersion = run("/usr/bin/dpkg-query", admin + ["-W", "-f=${Status} ${Version}", "libcamera-ipa"])
                .flatMap { $0.hasPrefix("install ok installed ") ? String($0.dropFirst("install ok installed ".count)) : nil }
        }
        (f.tuningDirectory, f.tuningFiles) = tuningFiles()
        f.boardModel = text("/proc/device-tree/model").map { String($0.prefix { $0 != "\0" && $0 != "\n" }) }
        for path in ["/boot/firmware/config.txt", "/boot/config.txt"] {
            if let t = text(path) {
                f.bootConfigPath = path
                f.bootConfig = t.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                break
            }
        }
        f.probedSensors = list("/sys/bus/i2c/devices").compactMap { d in
            text("/sys/bus/i2c/devices/\(d)/name").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        }.filter { !$0.isEmpty }.sorted()
        f.mediaDevices = list("/dev").filter { $0.hasPrefix("media") }.sorted().map { "/dev/\($0)" }
        let meminfo = fields("/proc/meminfo")
        f.cmaTotal = meminfo["CmaTotal"]
        f.cmaFree = meminfo["CmaFree"]
        f.dmaHeaps = list("/dev/dma_heap").sorted().map { DoctorFacts.Node("/dev/dma_heap/\($0)", accessible: canOpen("/dev/dma_heap/\($0)")) }
        f.gpioChips = list("/dev").filter { $0.hasPrefix("gpiochip") }.sorted().map { DoctorFacts.Node("/dev/\($0)", accessible: canOpen("/dev/\($0)")) }
        f.serviceUserGroups = groupsOf("shutterbug")
        if askSystemd, root.isEmpty, FileManager.default.fileExists(atPath: "/run/systemd/system") {
            f.serviceState = systemctl("is-active", "shutterbug.service")
            f.serviceEnabled = systemctl("is-enabled", "shutterbug.service")
        }
        (f.outputFree, f.outputTotal) = space(at: outputPath)
        (f.clockSynchronised, f.clockMaxErrorUs) = root.isEmpty ? kernelClock() : (nil, nil)
        f.clockDaemon = clockDaemon()
        return f
    }

    // MARK: - libcamera's files

    /// The libcamera.so this process mapped (/proc/self/maps), resolved to its file.
    func loadedLibcamera() -> String? {
        guard let maps = text("/proc/self/maps") else { return nil }
        for line in maps.split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let path = String(line[slash...])
            // Resolved: /lib is a link to /usr/lib on a merged-/usr system, and dpkg lists /usr/lib.
            if (path as NSString).lastPathComponent.hasPrefix("libcamera.so") { return root.isEmpty ? (realpath(path, nil).map { p in defer { free(p) }; return String(cString: p) } ?? path) : path }
        }
        return nil
    }

    /// The Debian package that holds `path` and its version, from dpkg-query (dpkg's own
    /// interface to its database), asked about the file and, failing that, about the name under
    /// /usr/lib (a merged-/usr system maps /lib).
    func owningPackage(of path: String) -> (String, String)? {
        let admin = dpkgAdmindir.map { ["--admindir=\($0)"] } ?? []
        for candidate in [path, path.hasPrefix("/lib/") ? "/usr" + path : path] {
            guard let line = run("/usr/bin/dpkg-query", admin + ["-S", candidate]),
                  let colon = line.range(of: ": ") else { continue }
            // "libcamera0.7:arm64: /usr/lib/aarch64-linux-gnu/libcamera.so.0.7.1"
            let package = String(line[..<colon.lowerBound].prefix { $0 != ":" && $0 != "," })
            let version = run("/usr/bin/dpkg-query", admin + ["-W", "-f=${Version}", package]) ?? "?"
            return (package, version)
        }
        return nil
    }

    /// libcamera looks for IPA modules in LIBCAMERA_IPA_MODULE_PATH, then in its own
    /// libdir/libcamera (0.0.x keeps them there; later releases under libcamera/ipa).
    func ipaModules(libraryPath: String?) -> (String?, [String]) {
        var candidates: [String] = []
        if let env = ProcessInfo.processInfo.environment["LIBCAMERA_IPA_MODULE_PATH"] {
            candidates += env.split(separator: ":").map(String.init)
        }
        if let lib = libraryPath {
            let dir = (lib as NSString).deletingLastPathComponent
            candidates += ["\(dir)/libcamera/ipa", "\(dir)/libcamera"]
        }
        for dir in candidates {
            let modules = list(dir).filter { $0.hasPrefix("ipa_") && $0.hasSuffix(".so") }.sorted()
            if !modules.isEmpty || isDirectory(dir) && dir.hasSuffix("/ipa") { return (dir, modules) }
        }
        return (nil, [])
    }

    /// The Raspberry Pi pipelines' tuning files: /usr/share/libcamera/ipa/rpi/{vc4,pisp}/*.json.
    func tuningFiles() -> (String?, [String: [String]]) {
        for dir in ["/usr/share/libcamera/ipa/rpi", "/usr/local/share/libcamera/ipa/rpi"] where isDirectory(dir) {
            var out: [String: [String]] = [:]
            for pipeline in list(dir) where isDirectory("\(dir)/\(pipeline)") {
                out[pipeline] = list("\(dir)/\(pipeline)").filter { $0.hasSuffix(".json") }.sorted()
            }
            return (dir, out)
        }
        return (nil, [:])
    }

    // MARK: - users and groups

    /// This process's user and the names of its groups (the kernel's view: what a login gave it).
    func currentUser() -> (String, [String]) {
        let uid = getuid()
        let name = getpwuid(uid).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "uid \(uid)"
        var ids = [gid_t](repeating: 0, count: Int(max(getgroups(0, nil), 0)) + 1)
        let n = getgroups(Int32(ids.count - 1), &ids)
        ids = Array(ids.prefix(max(Int(n), 0))) + [getgid()]
        let names = Set(ids.compactMap { id in getgrgid(id).flatMap { $0.pointee.gr_name.map { String(cString: $0) } } })
        return (name, names.sorted())
    }

    /// The groups /etc/group lists `user` in, with its primary group; nil: no such user.
    func groupsOf(_ user: String) -> [String]? {
        guard let passwd = text("/etc/passwd"), let entry = passwd.split(separator: "\n").first(where: { $0.hasPrefix("\(user):") }) else { return nil }
        let primary = entry.split(separator: ":", omittingEmptySubsequences: false).dropFirst(3).first.map(String.init)
        var out: [String] = []
        for line in (text("/etc/group") ?? "").split(separator: "\n") {
            let parts = line.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count >= 4 else { continue }
            if parts[3].split(separator: ",").contains(Substring(user)) || String(parts[2]) == primary { out.append(String(parts[0])) }
        }
        return out.sorted()
    }

    // MARK: - the rest

    func space(at path: String) -> (Int?, Int?) {
        // The nearest folder that exists: the output may not have been made yet.
        var p = root + path
        while !FileManager.default.fileExists(atPath: p), p.count > 1 { p = (p as NSString).deletingLastPathComponent }
        var s = statvfs()
        guard statvfs(p, &s) == 0 else { return (nil, nil) }
        return (Int(s.f_bavail) * Int(s.f_frsize), Int(s.f_blocks) * Int(s.f_frsize))
    }

    /// adjtimex(2) without changing anything: the kernel's "unsynchronised" flag, which
    /// systemd-timesyncd and chrony both clear once they discipline the clock (and which
    /// timedatectl's "System clock synchronized" reads), and the maximum error it estimates.
    func kernelClock() -> (Bool?, Int?) {
        var synchronised: Int32 = 0
        var maxError = 0
        guard sbshim_clock_state(&synchronised, &maxError) == 0 else { return (nil, nil) }
        return (synchronised != 0, maxError)
    }

    func clockDaemon() -> String? {
        if FileManager.default.fileExists(atPath: root + "/run/chrony") || FileManager.default.fileExists(atPath: root + "/var/lib/chrony") { return "chrony" }
        if FileManager.default.fileExists(atPath: root + "/run/systemd/timesync") || FileManager.default.fileExists(atPath: root + "/lib/systemd/systemd-timesyncd")
            || FileManager.default.fileExists(atPath: root + "/usr/lib/systemd/systemd-timesyncd") { return "systemd-timesyncd" }
        return nil
    }

    /// `systemctl ARGS`' first line, or nil when it cannot be run.
    func systemctl(_ args: String...) -> String? { run("/usr/bin/systemctl", args) }

    /// A program's first line of output, or nil when it cannot be run or prints nothing.
    func run(_ executable: String, _ args: [String]) -> String? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first.map(String.init)
        return line?.isEmpty == false ? line : nil
    }

    // MARK: - files under the root

    /// The whole file (read to its end: /proc and /sys files say they are empty).
    func text(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: root + path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return "" }
        return String(decoding: data, as: UTF8.self)
    }

    func list(_ path: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: root + path)) ?? []
    }

    func isDirectory(_ path: String) -> Bool {
        var dir: ObjCBool = false
        return FileManager.default.fileExists(atPath: root + path, isDirectory: &dir) && dir.boolValue
    }

    func canOpen(_ path: String) -> Bool { access(root + path, R_OK | W_OK) == 0 }

    /// "Key: N kB" lines in bytes.
    func fields(_ path: String) -> [String: Int] {
        var out: [String: Int] = [:]
        for line in (text(path) ?? "").split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == ":" || $0 == " " })
            if parts.count >= 2, let kb = Int(parts[1]) { out[String(parts[0])] = kb * 1024 }
        }
        return out
    }
}
