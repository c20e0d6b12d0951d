import Doctor
import Foundation
import Testing

@Suite("doctor: the checks judge the facts")
struct DoctorCheckTests {
    /// A Pi 4 on Raspberry Pi OS with the fork, an IMX708 found, everything in order.
    static func healthyPi() -> DoctorFacts {
        var f = DoctorFacts(libcamera: .init(runtimeVersion: "v0.7.1+rpt20260429", compiledVersion: "0.7.1",
                                             libraryPath: "/usr/lib/aarch64-linux-gnu/libcamera.so.0.7.1",
                                             package: "libcamera0.7", packageVersion: "0.7.1+rpt20260429-1"),
                            userName: "pi", userGroups: ["pi", "video", "render", "gpio"], outputPath: "/var/lib/shutterbug")
        f.boardModel = "Raspberry Pi 4 Model B Rev 1.5"
        f.ipaDirectory = "/usr/lib/aarch64-linux-gnu/libcamera/ipa"
        f.ipaModules = ["ipa_rpi_vc4.so"]
        f.tuningDirectory = "/usr/share/libcamera/ipa/rpi"
        f.tuningFiles = ["vc4": ["imx477.json", "imx708.json", "uncalibrated.json"], "pisp": ["imx708.json"]]
        f.cameras = [.init(id: "/base/soc/i2c0mux/i2c@1/imx708@1a", model: "imx708", pixelArray: (4608, 2592))]
        f.bootConfigPath = "/boot/firmware/config.txt"
        f.bootConfig = ["camera_auto_detect=1", "dtoverlay=vc4-kms-v3d"]
        f.probedSensors = ["imx708"]
        f.mediaDevices = ["/dev/media0", "/dev/media1"]
        f.cmaTotal = 512 << 20
        f.cmaFree = 400 << 20
        f.dmaHeaps = [.init("/dev/dma_heap/linux,cma", accessible: true)]
        f.gpioChips = [.init("/dev/gpiochip0", accessible: true)]
        f.serviceUserGroups = ["shutterbug", "video", "render", "gpio"]
        f.serviceState = "active"
        f.serviceEnabled = "enabled"
        f.outputFree = 20 << 30
        f.outputTotal = 30 << 30
        f.clockSynchronised = true
        f.clockMaxErrorUs = 16_000
        f.clockDaemon = "systemd-timesyncd"
        return f
    }

    func check(_ name: String, _ f: DoctorFacts) throws -> DoctorCheck {
        try #require(Doctor.checks(f).first { $0.name == name }, "no \(name) check")
    }

    @Test("a healthy Pi: every check ok, exit 0, the fork named and the tuning file each camera loads")
    func healthy() throws {
        let checks = Doctor.checks(Self.healthyPi())
        #expect(checks.allSatisfy { $0.status == .ok }, "\(checks.filter { $0.status != .ok })")
        #expect(Doctor.exitCode(checks) == 0)
        let lib = try check("libcamera", Self.healthyPi())
        #expect(lib.summary.contains("the Raspberry Pi fork") && lib.summary.contains("libcamera0.7 0.7.1+rpt20260429-1"))
        #expect(try check("tuning", Self.healthyPi()).summary.contains("imx708 loads vc4/imx708.json"))
        #expect(Doctor.text(checks).hasSuffix("0 problems, 0 warnings\n"))
    }

    @Test("no camera on a Pi whose config.txt turned detection off and names no sensor: a problem whose fix names the file")
    func noCameraNoOverlay() throws {
        var f = Self.healthyPi()
        f.cameras = []
        f.probedSensors = []
        f.bootConfig = ["camera_auto_detect=0", "# dtoverlay=imx708", "dtoverlay=vc4-kms-v3d"]
        let c = try check("cameras", f)
        #expect(c.status == .problem)
        #expect(c.summary.contains("neither camera_auto_detect=1 nor a camera dtoverlay="), "\(c.summary)")
        #expect(c.fix?.contains("/boot/firmware/config.txt") == true)
        #expect(Doctor.exitCode(Doctor.checks(f)) == 1)
    }

    @Test("no camera though detection is on and nothing was probed: the cable, not the configuration")
    func noCameraNotProbed() throws {
        var f = Self.healthyPi()
        f.cameras = []
        f.probedSensors = ["rtc-ds1307"]
        let c = try check("cameras", f)
        #expect(c.status == .problem)
        #expect(c.summary.contains("camera_auto_detect=1") && c.summary.contains("no camera sensor was probed"), "\(c.summary)")
        #expect(c.fix?.contains("ribbon") == true)
    }

    @Test("a sensor the kernel probed but libcamera did not take: the libcamera and kernel do not match")
    func probedNotTaken() throws {
        var f = Self.healthyPi()
        f.cameras = []
        let c = try check("cameras", f)
        #expect(c.status == .problem && c.summary.contains("probed imx708 but libcamera did not take it"), "\(c.summary)")
    }

    @Test("no camera on a machine that is not a Pi is a warning: the simulated camera takes over")
    func noCameraNotPi() throws {
        var f = Self.healthyPi()
        f.boardModel = nil
        f.cameras = []
        f.probedSensors = []
        f.bootConfig = nil
        let c = try check("cameras", f)
        #expect(c.status == .warning && c.summary.contains("simulated camera"))
    }

    @Test("CMA: a Pi 4 whose pool is too small for the service's default buffers is a problem; a Pi 5 does not use it")
    func cma() throws {
        var f = Self.healthyPi()
        f.cmaTotal = 128 << 20
        // 4608 x 2592 x 1.5 x 9 = 154 MiB, over three quarters of 128 MiB.
        let c = try check("cma", f)
        #expect(c.status == .problem && c.summary.contains("154 MB") && c.fix?.contains("cma-512") == true, "\(c.summary)")
        f.boardModel = "Raspberry Pi 5 Model B Rev 1.0"
        #expect(try check("cma", f).status == .ok)
        f.boardModel = "Raspberry Pi 4 Model B Rev 1.5"
        f.cmaTotal = 512 << 20
        #expect(try check("cma", f).status == .ok)
    }

    @Test("groups: a user outside video/render/gpio gets the usermod line; a service user outside them is a problem")
    func groups() throws {
        var f = Self.healthyPi()
        f.userGroups = ["pi", "video"]
        let g = try check("groups", f)
        #expect(g.status == .warning && g.fix == "sudo usermod -aG render,gpio pi, then log in again")
        f.serviceUserGroups = ["shutterbug"]
        #expect(try check("service-user", f).status == .problem)
        f.serviceUserGroups = nil
        #expect(!Doctor.checks(f).contains { $0.name == "service-user" })
    }

    @Test("a libcamera whose minor version is not the one built against is a problem (no ABI between minors)")
    func abiMismatch() throws {
        var f = Self.healthyPi()
        f.libcamera.runtimeVersion = "v0.6.0+rpt20251202"
        #expect(try check("libcamera", f).status == .problem)
        f.libcamera.runtimeVersion = "v0.7.2"
        f.libcamera.package = "libcamera0.7"
        f.libcamera.packageVersion = "0.7.2-1"
        let c = try check("libcamera", f)
        #expect(c.status == .ok && c.summary.contains("(Debian, package libcamera0.7 0.7.2-1)"), "\(c.summary)")
        f.libcamera.managerError = "starting libcamera's camera manager: Permission denied"
        #expect(try check("libcamera", f).status == .problem)
    }

    @Test("an IPA package of another release than the library (Debian 13's 0.4 beside backports' 0.7.1) is a problem whose fix names backports")
    func ipaMismatch() throws {
        var f = Self.healthyPi()
        f.libcamera.packageVersion = "0.7.1-1~bpo13+1"
        f.ipaPackageVersion = "0.4.0-7"
        let c = try check("ipa", f)
        #expect(c.status == .problem && c.summary.contains("libcamera-ipa is 0.4.0-7"), "\(c.summary)")
        #expect(c.fix == "sudo apt install -t trixie-backports libcamera-ipa")
        f.ipaPackageVersion = "0.7.1-1~bpo13+1"
        #expect(try check("ipa", f).status == .ok)
        // The fork's versions: the same release, whatever the +rpt suffix.
        f.libcamera.packageVersion = "0.7.1+rpt20260429-1"
        f.ipaPackageVersion = "0.7.1+rpt20260429-1"
        #expect(try check("ipa", f).status == .ok)
        f.ipaModules = []
        #expect(try check("ipa", f).status == .problem, "a Pi without IPA modules")
    }

    @Test("the disk, the clock and the service: thresholds and what could not be read")
    func diskClockService() throws {
        var f = Self.healthyPi()
        f.outputFree = 100 << 20
        #expect(try check("disk", f).status == .problem)
        f.outputFree = 1 << 30
        #expect(try check("disk", f).status == .warning)
        f.outputFree = nil
        #expect(try check("disk", f).status == .unknown)
        f.clockSynchronised = false
        let clock = try check("clock", f)
        #expect(clock.status == .warning && clock.summary.contains("not synchronised (systemd-timesyncd)"))
        f.clockSynchronised = nil
        #expect(try check("clock", f).status == .unknown)
        f.serviceState = "failed"
        #expect(try check("service", f).status == .problem)
        f.serviceState = nil
        #expect(try check("service", f).status == .unknown)
        // Nothing that could not be read counts as a problem.
        #expect(!Doctor.checks(f).contains { $0.status == .problem && ($0.name == "disk" || $0.name == "clock") })
    }

    @Test("--json is one object naming every check with its status, and the counts")
    func json() throws {
        var f = Self.healthyPi()
        f.cameras = []
        let text = Doctor.json(Doctor.checks(f), facts: f)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let checks = try #require(o["checks"] as? [[String: Any]])
        #expect(checks.count == Doctor.checks(f).count)
        #expect(o["problems"] as? Int == 1)
        #expect(o["libcameraOrigin"] as? String == "the Raspberry Pi fork")
        #expect(checks.first { $0["name"] as? String == "cameras" }?["status"] as? String == "problem")
    }
}

@Suite("doctor: the reader on a made-up system")
struct DoctorReaderTests {
    /// Writes files under a temporary root: path -> contents.
    func tree(_ files: [String: String]) throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("doctor-\(UUID().uuidString)").path
        for (path, text) in files {
            let full = root + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try text.write(toFile: full, atomically: false, encoding: .utf8)
        }
        return root
    }

    @Test("a Pi with no camera: config.txt, the probed sensors, CMA, the libcamera package and its IPA and tuning files are read")
    func pi() throws {
        let lib = "/usr/lib/aarch64-linux-gnu/libcamera.so.0.7.1"
        let root = try tree([
            "/proc/device-tree/model": "Raspberry Pi 4 Model B Rev 1.5\0",
            "/boot/firmware/config.txt": "camera_auto_detect=0\ndtoverlay=vc4-kms-v3d\n",
            "/sys/bus/i2c/devices/10-0051/name": "rtc-ds1307\n",
            "/proc/meminfo": "MemTotal:        3884484 kB\nCmaTotal:         262144 kB\nCmaFree:          200000 kB\n",
            "/dpkg/info/format": "1\n",
            "/dpkg/info/libcamera0.7:arm64.list": "/usr/lib/aarch64-linux-gnu/libcamera.so.0.7\n\(lib)\n",
            "/dpkg/status": "Package: libcamera0.7\nStatus: install ok installed\nArchitecture: arm64\nMulti-Arch: same\nMaintainer: m\nDescription: d\nVersion: 0.7.1+rpt20260429-1\n\nPackage: libcamera-ipa\nStatus: install ok installed\nArchitecture: arm64\nMulti-Arch: same\nMaintainer: m\nDescription: d\nVersion: 0.4.0-7\n\nPackage: zlib1g\nStatus: install ok installed\nArchitecture: arm64\nMaintainer: m\nDescription: d\nVersion: 1:1.3\n",
            "/dpkg/updates/.keep": "",
            "/usr/lib/aarch64-linux-gnu/libcamera/ipa/ipa_rpi_vc4.so": "",
            "/usr/lib/aarch64-linux-gnu/libcamera/ipa/ipa_rpi_vc4.so.sign": "",
            "/usr/share/libcamera/ipa/rpi/vc4/imx708.json": "{}",
            "/usr/share/libcamera/ipa/rpi/pisp/imx708.json": "{}",
            "/etc/passwd": "root:x:0:0::/root:/bin/sh\nshutterbug:x:995:990::/var/lib/shutterbug:/usr/sbin/nologin\n",
            "/etc/group": "video:x:44:shutterbug,pi\nrender:x:105:shutterbug\ngpio:x:993:pi\nshutterbug:x:990:\n",
            "/dev/gpiochip0": "",
            "/var/lib/shutterbug/.keep": "",
        ])
        defer { try? FileManager.default.removeItem(atPath: root) }
        // dpkg-query, as in the product, asked of the made-up system's database.
        let reader = SystemReader(root: root, dpkgAdmindir: root + "/dpkg")
        let f = reader.read(libcamera: .init(runtimeVersion: "v0.7.1+rpt20260429", compiledVersion: "0.7.1", libraryPath: lib),
                            cameras: [], outputPath: "/var/lib/shutterbug")
        #expect(f.libcamera.package == "libcamera0.7" && f.libcamera.packageVersion == "0.7.1+rpt20260429-1")
        #expect(f.ipaPackageVersion == "0.4.0-7")
        #expect(f.boardModel == "Raspberry Pi 4 Model B Rev 1.5")
        #expect(f.bootConfigPath == "/boot/firmware/config.txt" && f.bootConfig?.first == "camera_auto_detect=0")
        #expect(f.probedSensors == ["rtc-ds1307"])
        #expect(f.cmaTotal == 262_144 * 1024 && f.cmaFree == 200_000 * 1024)
        #expect(f.ipaModules == ["ipa_rpi_vc4.so"])
        #expect(f.tuningFiles == ["vc4": ["imx708.json"], "pisp": ["imx708.json"]])
        #expect(f.serviceUserGroups == ["render", "shutterbug", "video"])
        #expect(f.gpioChips.map(\.path) == ["/dev/gpiochip0"])
        #expect(f.dmaHeaps.isEmpty && f.mediaDevices.isEmpty)
        #expect(f.outputFree != nil)
        let checks = Doctor.checks(f)
        let cameras = try #require(checks.first { $0.name == "cameras" })
        #expect(cameras.status == .problem && cameras.summary.contains("neither camera_auto_detect=1"), "\(cameras.summary)")
        #expect(checks.first { $0.name == "service-user" }?.status == .problem, "the made-up shutterbug user is not in gpio")
        #expect(checks.first { $0.name == "dma-heap" }?.status == .problem)
        #expect(checks.first { $0.name == "ipa" }?.status == .problem, "the made-up system's libcamera-ipa is 0.4")
    }

    @Test("an empty root: nothing is found, nothing crashes, and no check claims what it could not read")
    func empty() throws {
        let root = try tree([:])
        defer { try? FileManager.default.removeItem(atPath: root) }
        let f = SystemReader(root: root).read(libcamera: .init(runtimeVersion: "v0.0.3", compiledVersion: "0.0.3"), cameras: [], outputPath: "/nonexistent/out")
        #expect(f.boardModel == nil && f.bootConfig == nil && f.cmaTotal == nil && f.serviceUserGroups == nil)
        let checks = Doctor.checks(f)
        #expect(checks.first { $0.name == "clock" }?.status == .unknown)
        #expect(checks.first { $0.name == "cameras" }?.status == .warning)
    }
}
