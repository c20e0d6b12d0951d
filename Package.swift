// swift-tools-version: 6.0
import PackageDescription

// The tree shows the layers (see README): C shims, a pure-Swift core, the camera backends, the
// sinks and trigger sources that plug into a session, the commands, and the benchmarks apart
// from the product (as swift-nio keeps NIOPerformanceTester apart). Only C-layer modules are
// imported by I/O modules; core modules import no C.
let package = Package(
    name: "Shutterbug",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "shutterbug", targets: ["shutterbug"]),
        .executable(name: "shutterbug-bench", targets: ["shutterbug-bench"]),
        .library(name: "ShutterbugCore", targets: ["ShutterbugCore"]),
        .library(name: "Capture", targets: ["Capture", "CaptureScheduler"]),
        .library(name: "SimulatedCamera", targets: ["SimulatedCamera"]),
        .library(name: "LibcameraBackend", targets: ["LibcameraBackend"]),
        .library(name: "LinuxGPIO", targets: ["LinuxGPIO"]),
        .library(name: "KMS", targets: ["KMS"]),
        .library(name: "ImageOutput", targets: ["ImageOutput"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.0"),
        // Hummingbird's own: the server's channel handlers (a whole-request deadline) use them.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.34.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        // C: the only C and C++, one prefix per shim.
        .systemLibrary(
            name: "CLibcamera",
            path: "Sources/C/CLibcamera",
            pkgConfig: "libcamera",
            providers: [.apt(["libcamera-dev"])]
        ),
        .target(
            name: "CLibcameraBridge",
            dependencies: ["CLibcamera"],
            path: "Sources/C/CLibcameraBridge"
        ),
        .target(name: "CSystemShims", path: "Sources/C/CSystemShims"),
        .target(name: "CGPIO", path: "Sources/C/CGPIO"),
        // HTTP through libcurl (Debian's libcurl4): the CLI's client and uploads signed with SigV4.
        // MD5 for uploads' Content-MD5 and ETags from OpenSSL's libcrypto (libcurl's TLS on Debian).
        .target(name: "CCurl", path: "Sources/C/CCurl", linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("crypto")]),
        .systemLibrary(name: "CSQLite", path: "Sources/C/CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CMosquitto", path: "Sources/C/CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CDRM", path: "Sources/C/CDRM", pkgConfig: "libdrm", providers: [.apt(["libdrm-dev"])]),
        // DNG (libtiff), JPEG (libjpeg-turbo), EXIF (libexif) and PNG (libpng), behind one plain C header.
        // Raw Bayer codecs with no library behind them (the Pi 5's PISP_COMP1).
        .target(name: "CRawCodecs", path: "Sources/C/CRawCodecs"),
        .target(
            name: "CImageCodecs",
            dependencies: ["CRawCodecs"],
            path: "Sources/C/CImageCodecs",
            linkerSettings: [.linkedLibrary("tiff"), .linkedLibrary("jpeg"), .linkedLibrary("exif"), .linkedLibrary("png16")]
        ),

        // Core: pure Swift, clocks injected. Errno (swift-system) is the typed errno at the C
        // boundary.
        .target(name: "ShutterbugCore", dependencies: [.product(name: "SystemPackage", package: "swift-system")], path: "Sources/Core/ShutterbugCore"),
        // Threads, eventfd and poll, /proc: what the core's protocols run on (as NIOPosix
        // beside NIOCore).
        .target(name: "ShutterbugPosix", dependencies: ["ShutterbugCore", "CSystemShims", .product(name: "SystemPackage", package: "swift-system")],
                path: "Sources/Core/ShutterbugPosix"),
        .target(name: "CaptureScheduler", dependencies: ["ShutterbugCore"], path: "Sources/Core/CaptureScheduler"),
        .target(name: "Capture", dependencies: ["ShutterbugPosix", "ShutterbugCore", "CaptureScheduler"], path: "Sources/Core/Capture"),
        .target(name: "Timelapse", dependencies: ["ShutterbugCore"], path: "Sources/Core/Timelapse"),

        // Backends: CameraBackend implementations.
        .target(name: "SimulatedCamera", dependencies: ["ShutterbugPosix", "ShutterbugCore", "CRawCodecs", "CSystemShims"], path: "Sources/Backends/SimulatedCamera"),
        .target(name: "LibcameraBackend", dependencies: ["ShutterbugPosix", "ShutterbugCore", "CLibcameraBridge"], path: "Sources/Backends/LibcameraBackend"),

        // Sinks and trigger sources: real kernel and library interfaces.
        .target(
            name: "ImageOutput",
            dependencies: ["ShutterbugPosix", "ShutterbugCore", "Capture", "CImageCodecs", "CSystemShims", .product(name: "SystemPackage", package: "swift-system")],
            path: "Sources/Sinks/ImageOutput"
        ),
        .target(name: "Journal", dependencies: ["ShutterbugCore", "Timelapse", "CSQLite"], path: "Sources/Sinks/Journal"),
        .target(name: "KMS", dependencies: ["ShutterbugPosix", "ShutterbugCore", "CDRM", .product(name: "SystemPackage", package: "swift-system")], path: "Sources/Sinks/KMS"),
        .target(name: "LinuxGPIO", dependencies: ["ShutterbugPosix", "ShutterbugCore", "CGPIO"], path: "Sources/Triggers/LinuxGPIO"),
        // Service: what a long-running camera service needs besides the camera.
        .target(name: "Systemd", dependencies: [.product(name: "Logging", package: "swift-log")], path: "Sources/Service/Systemd"),
        // Job files and the service's configuration: YAML (Yams), every key with its line.
        .target(name: "ConfigFile", dependencies: [.product(name: "Yams", package: "Yams")], path: "Sources/Service/ConfigFile"),
        .target(name: "Jobs", dependencies: ["CSystemShims", "Capture", "CaptureScheduler", "ImageOutput", "Journal", "ShutterbugCore", "Timelapse",
                                             .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")], path: "Sources/Service/Jobs"),
        // A job's and a trigger's options (swift-argument-parser), the one schema the command
        // line, job files, the configuration and the API share.
        .target(name: "JobOptions", dependencies: ["CSystemShims", "Capture", "CaptureScheduler", "ImageOutput", "Jobs", "LinuxGPIO", "ProcessTriggers", "ShutterbugCore", "Timelapse",
                                                   .product(name: "ArgumentParser", package: "swift-argument-parser")], path: "Sources/Service/JobOptions"),
        .target(name: "Server", dependencies: ["Capture", "CaptureScheduler", "Fleet", "Jobs", "JobOptions", "Journal", "Timelapse", "ImageOutput", "ShutterbugCore", "Upload", .product(name: "Hummingbird", package: "hummingbird"),
                                               .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                                               .product(name: "CoreMetrics", package: "swift-metrics"), .product(name: "Prometheus", package: "swift-prometheus"),
                                               .product(name: "Logging", package: "swift-log")],
                path: "Sources/Service/Server"),
        // One HTTP request on a thread of its own, waiting on its socket (libcurl).
        .target(name: "HTTPTransfer", dependencies: ["CCurl"], path: "Sources/Service/HTTPTransfer"),
        // Photos off the card: each capture's files queued in a journal beside them and sent to an
        // S3-compatible bucket exactly once (SigV4 by libcurl), surviving kills and days offline.
        .target(name: "Upload", dependencies: ["CCurl", "HTTPTransfer", "ImageOutput", "Journal", "ShutterbugCore", .product(name: "Logging", package: "swift-log")],
                path: "Sources/Service/Upload"),
        // `shutterbug doctor`: the system's facts read as the user, judged by pure checks.
        .target(name: "Doctor", dependencies: ["ShutterbugCore", "CSystemShims"], path: "Sources/Service/Doctor"),
        // Many Pis as one camera: MQTT topics, Home Assistant discovery, fleet commands and
        // the clock's synchronisation (pure; the MQTT client over libmosquitto is to come).
        .target(name: "Fleet", dependencies: ["ShutterbugCore"], path: "Sources/Service/Fleet"),
        // MQTT 5 over libmosquitto: publishing never waits on the network, reconnects with
        // backoff, retained state and subscriptions restored on every connection.
        .target(name: "MQTT", dependencies: ["CMosquitto", "ShutterbugCore"], path: "Sources/Service/MQTT"),
        // A fleet node: commands from MQTT carried out once and answered, state and Home
        // Assistant discovery kept retained (the service it speaks for is given).
        .target(name: "FleetService", dependencies: ["Capture", "CaptureScheduler", "Fleet", "Jobs", "MQTT", "Server", "ShutterbugCore",
                                                     .product(name: "Logging", package: "swift-log")], path: "Sources/Service/FleetService"),
        .target(name: "ProcessTriggers", dependencies: ["ShutterbugPosix", "ShutterbugCore", "CSystemShims"], path: "Sources/Triggers/ProcessTriggers"),

        // Commands: argument parsing and printing.
        .executableTarget(
            name: "shutterbug",
            dependencies: [
                "ShutterbugPosix",
                "ShutterbugCore", "SimulatedCamera", "LibcameraBackend", "CSystemShims", "Capture", "CaptureScheduler", "ImageOutput", "KMS",
                "LinuxGPIO", "ProcessTriggers", "Timelapse", "Journal", "Jobs", "JobOptions", "Systemd", "Server", "ConfigFile", "Doctor", "HTTPTransfer", "Upload",
                "Fleet", "FleetService", "MQTT",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/Commands/shutterbug"
        ),
        // Benchmarks: figures printed side by side, apart from the product.
        // The soak (the service over simulated days, judged by what it leaves): for the bench and
        // the soak test alike.
        .target(name: "Soak", dependencies: ["Capture", "CaptureScheduler", "Fleet", "FleetService", "ImageOutput", "Jobs", "MQTT", "Server", "ShutterbugCore", "SimulatedCamera", "Upload", .product(name: "Logging", package: "swift-log")], path: "Sources/Benchmarks/Soak"),
        .executableTarget(
            name: "shutterbug-bench",
            dependencies: [
                "Soak", "JobOptions", "ShutterbugPosix",
                "ShutterbugCore", "SimulatedCamera", "CSystemShims", "Capture", "CaptureScheduler", "ImageOutput", "KMS", "Journal", "HTTPTransfer",
                "Fleet", "FleetService", "Jobs", "MQTT", "ProcessTriggers", "Server", "Upload",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/Benchmarks/shutterbug-bench"
        ),

        // Tests
        .target(
            name: "CameraConformance",
            dependencies: ["ShutterbugPosix", "ShutterbugCore"],
            path: "Tests/CameraConformance"
        ),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "ShutterbugCoreTests", dependencies: ["ShutterbugPosix", "ShutterbugCore", "SimulatedCamera", "TestSupport"]),
        .testTarget(name: "TimelapseTests", dependencies: ["Timelapse", "Journal", "ShutterbugCore"]),
        .testTarget(
            name: "SimulatedCameraTests",
            dependencies: ["SimulatedCamera", "ShutterbugCore", "CameraConformance", "TestSupport"]
        ),
        .testTarget(name: "ShutterbugCLITests", dependencies: ["shutterbug", "Soak", "TestSupport", "Systemd", "ImageOutput", "HTTPTransfer", "Upload", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "ConfigFileTests", dependencies: ["ConfigFile"]),
        .testTarget(name: "ServerTests", dependencies: ["Server", "Soak", "TestSupport", "Capture", "CaptureScheduler", "ImageOutput", "Jobs", "SimulatedCamera", "ShutterbugCore",
                                                        .product(name: "Hummingbird", package: "hummingbird"),
                                                        .product(name: "HummingbirdTesting", package: "hummingbird")]),
        .testTarget(name: "HTTPTransferTests", dependencies: ["HTTPTransfer", .product(name: "Hummingbird", package: "hummingbird"),
                                                              .product(name: "HummingbirdTesting", package: "hummingbird")]),
        .testTarget(name: "DoctorTests", dependencies: ["Doctor"]),
        .testTarget(name: "UploadTests", dependencies: ["Upload", "HTTPTransfer", "Journal", "ImageOutput", "ShutterbugCore", "TestSupport",
                                                    .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "FleetTests", dependencies: ["Fleet", "ShutterbugCore"]),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT", "Fleet", "FleetService", "ShutterbugCore", "TestSupport", "Server", "Capture", "ImageOutput", "SimulatedCamera",
                                                  .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "JobsTests", dependencies: ["Jobs", "Journal", "ImageOutput", "Timelapse", "ShutterbugCore", "Capture", "CaptureScheduler", "SimulatedCamera", "ProcessTriggers"]),
        .testTarget(name: "CaptureTests", dependencies: ["ShutterbugPosix", "Capture", "CaptureScheduler", "SimulatedCamera", "ShutterbugCore", "ProcessTriggers", "TestSupport"]),
        .testTarget(name: "ImageOutputTests", dependencies: ["ShutterbugPosix", "ImageOutput", "Capture", "CaptureScheduler", "SimulatedCamera", "ShutterbugCore", "TestSupport", "CRawCodecs"]),
        .testTarget(name: "BoardTests", dependencies: ["TestSupport", "LinuxGPIO", "KMS", "ShutterbugCore", "SimulatedCamera", "Capture", "CaptureScheduler"]),
        .testTarget(
            name: "LibcameraBackendTests",
            dependencies: ["LibcameraBackend", "ShutterbugCore", "ShutterbugPosix", "Capture", "CameraConformance", "TestSupport"]
        ),
    ],
    cxxLanguageStandard: .cxx17
)

// No library target carries compiler flags: SwiftPM refuses unsafe flags in a package used as
// a dependency, and other packages use Shutterbug's libraries (Examples/BracketExample, built by
// the unit tier). Release builds still optimise across modules where it counts: the core's
// generic types on the per-frame path (Ring, the completion queue) are @inlinable, and the
// compiler's default conservative cross-module optimisation covers the rest. C warnings are
// checked by board/check-c.sh and the bridge's by Cross/check-libcamera.sh.
//
// The executable may keep flags of its own (no other package builds it): the modules a frame
// passes through keep Swift's compile-time exclusivity checks in every build, and the
// command's own module skips the run-time ones in release builds.
for target in package.targets where target.name == "shutterbug" {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]
}

// The simulated camera's pixels (the scene renderer, the ISP) are optimised in debug builds when
// the test command asks (SHUTTERBUG_OPTIMIZED_SIMULATOR=1, which board/test.sh sets): at -Onone
// a 12 MP frame takes seconds, and tests that render pixels then hold a 2-core machine's Swift
// threads long enough to starve the other tests running beside them (two of them exceeded their
// time limits in each full run without it). Only an opt-in for this repository's own builds: a
// package that depends on Shutterbug does not set it, so the products it uses carry no flags
// (board/check-example.sh checks that with it unset).
if Context.environment["SHUTTERBUG_OPTIMIZED_SIMULATOR"] == "1" {
    for target in package.targets where target.name == "SimulatedCamera" {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-O"], .when(configuration: .debug))]
    }
}

// Warnings are errors in this repository's own test builds (SHUTTERBUG_WARNINGS_AS_ERRORS=1, which
// board/test.sh sets): a clean build stays free of them. Opt-in like the flag above, so that a
// package depending on Shutterbug never fails to build on a newer compiler's new warning.
if Context.environment["SHUTTERBUG_WARNINGS_AS_ERRORS"] == "1" {
    for target in package.targets where target.type != .system && !(target.path ?? "").hasPrefix("Sources/C/") {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-warnings-as-errors"])]
    }
}
