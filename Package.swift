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
            path: "Sources/C/CLibcameraBridge",
            cxxSettings: [.unsafeFlags(["-Wall", "-Wextra"])]
        ),
        .target(name: "CSystemShims", path: "Sources/C/CSystemShims"),
        .target(name: "CGPIO", path: "Sources/C/CGPIO"),
        .systemLibrary(name: "CSQLite", path: "Sources/C/CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CDRM", path: "Sources/C/CDRM", pkgConfig: "libdrm", providers: [.apt(["libdrm-dev"])]),
        // DNG (libtiff), JPEG (libjpeg-turbo), EXIF (libexif) and PNG (libpng), behind one plain C header.
        // Raw Bayer codecs with no library behind them (the Pi 5's PISP_COMP1).
        .target(name: "CRawCodecs", path: "Sources/C/CRawCodecs", cSettings: [.unsafeFlags(["-Wall", "-Wextra", "-Werror"])]),
        .target(
            name: "CImageCodecs",
            dependencies: ["CRawCodecs"],
            path: "Sources/C/CImageCodecs",
            cSettings: [.unsafeFlags(["-Wall", "-Wextra", "-Wno-unused-parameter"])],
            linkerSettings: [.linkedLibrary("tiff"), .linkedLibrary("jpeg"), .linkedLibrary("exif"), .linkedLibrary("png16")]
        ),

        // Core: pure Swift, clocks injected. Errno (swift-system) is the typed errno at the C
        // boundary.
        .target(name: "ShutterbugCore", dependencies: ["CSystemShims", .product(name: "SystemPackage", package: "swift-system")], path: "Sources/Core/ShutterbugCore"),
        .target(name: "CaptureScheduler", dependencies: ["ShutterbugCore"], path: "Sources/Core/CaptureScheduler"),
        .target(name: "Capture", dependencies: ["ShutterbugCore", "CaptureScheduler"], path: "Sources/Core/Capture"),
        .target(name: "Timelapse", dependencies: ["ShutterbugCore"], path: "Sources/Core/Timelapse"),

        // Backends: CameraBackend implementations.
        .target(name: "SimulatedCamera", dependencies: ["ShutterbugCore", "CRawCodecs", "CSystemShims"], path: "Sources/Backends/SimulatedCamera"),
        .target(name: "LibcameraBackend", dependencies: ["ShutterbugCore", "CLibcameraBridge"], path: "Sources/Backends/LibcameraBackend"),

        // Sinks and trigger sources: real kernel and library interfaces.
        .target(
            name: "ImageOutput",
            dependencies: ["ShutterbugCore", "Capture", "CImageCodecs", "CSystemShims", .product(name: "SystemPackage", package: "swift-system")],
            path: "Sources/Sinks/ImageOutput"
        ),
        .target(name: "Journal", dependencies: ["ShutterbugCore", "Timelapse", "CSQLite"], path: "Sources/Sinks/Journal"),
        .target(name: "KMS", dependencies: ["ShutterbugCore", "CDRM", .product(name: "SystemPackage", package: "swift-system")], path: "Sources/Sinks/KMS"),
        .target(name: "LinuxGPIO", dependencies: ["ShutterbugCore", "CGPIO"], path: "Sources/Triggers/LinuxGPIO"),
        // Service: what a long-running camera service needs besides the camera.
        .target(name: "Systemd", dependencies: [.product(name: "Logging", package: "swift-log")], path: "Sources/Service/Systemd"),
        // Job files and the service's configuration: YAML (Yams), every key with its line.
        .target(name: "ConfigFile", dependencies: [.product(name: "Yams", package: "Yams")], path: "Sources/Service/ConfigFile"),
        .target(name: "Jobs", dependencies: ["CSystemShims", "Capture", "ImageOutput", "Journal", "ShutterbugCore", "Timelapse"], path: "Sources/Service/Jobs"),
        .target(name: "Server", dependencies: ["Capture", "CaptureScheduler", "Jobs", "Journal", "Timelapse", "ImageOutput", "ShutterbugCore", .product(name: "Hummingbird", package: "hummingbird"),
                                               .product(name: "CoreMetrics", package: "swift-metrics"), .product(name: "Prometheus", package: "swift-prometheus"),
                                               .product(name: "Logging", package: "swift-log")],
                path: "Sources/Service/Server"),
        // `shutterbug doctor`: the system's facts read as the user, judged by pure checks.
        .target(name: "Doctor", dependencies: ["ShutterbugCore", "CSystemShims"], path: "Sources/Service/Doctor"),
        .target(name: "ProcessTriggers", dependencies: ["ShutterbugCore", "CSystemShims"], path: "Sources/Triggers/ProcessTriggers"),

        // Commands: argument parsing and printing.
        .executableTarget(
            name: "shutterbug",
            dependencies: [
                "ShutterbugCore", "SimulatedCamera", "LibcameraBackend", "CSystemShims", "Capture", "CaptureScheduler", "ImageOutput", "KMS",
                "LinuxGPIO", "ProcessTriggers", "Timelapse", "Journal", "Jobs", "Systemd", "Server", "ConfigFile", "Doctor",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/Commands/shutterbug"
        ),
        // Benchmarks: figures printed side by side, apart from the product.
        .executableTarget(
            name: "shutterbug-bench",
            dependencies: [
                "ShutterbugCore", "SimulatedCamera", "CSystemShims", "Capture", "CaptureScheduler", "ImageOutput", "KMS", "Journal",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/Benchmarks/shutterbug-bench"
        ),

        // Tests
        .target(
            name: "CameraConformance",
            dependencies: ["ShutterbugCore"],
            path: "Tests/CameraConformance"
        ),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "ShutterbugCoreTests", dependencies: ["ShutterbugCore"]),
        .testTarget(name: "TimelapseTests", dependencies: ["Timelapse", "Journal", "ShutterbugCore"]),
        .testTarget(
            name: "SimulatedCameraTests",
            dependencies: ["SimulatedCamera", "ShutterbugCore", "CameraConformance"]
        ),
        .testTarget(name: "ShutterbugCLITests", dependencies: ["shutterbug", "TestSupport", "Systemd", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "ConfigFileTests", dependencies: ["ConfigFile"]),
        .testTarget(name: "DoctorTests", dependencies: ["Doctor"]),
        .testTarget(name: "JobsTests", dependencies: ["Jobs", "Journal", "ImageOutput", "Timelapse", "ShutterbugCore"]),
        .testTarget(name: "CaptureTests", dependencies: ["Capture", "CaptureScheduler", "SimulatedCamera", "ShutterbugCore", "ProcessTriggers"]),
        .testTarget(name: "ImageOutputTests", dependencies: ["ImageOutput", "Capture", "CaptureScheduler", "SimulatedCamera", "ShutterbugCore", "TestSupport", "CRawCodecs"]),
        .testTarget(name: "BoardTests", dependencies: ["TestSupport", "LinuxGPIO", "KMS", "ShutterbugCore", "SimulatedCamera", "Capture", "CaptureScheduler"]),
        .testTarget(
            name: "LibcameraBackendTests",
            dependencies: ["LibcameraBackend", "ShutterbugCore", "CameraConformance"]
        ),
    ],
    cxxLanguageStandard: .cxx17
)

// Release builds optimise across our own modules: a completion crosses five of them per frame,
// and the core's generic types (Ring, the completion queue) are specialised where they are used
// instead of going through run-time generics (seen with perf on the virtual board).
for target in package.targets where [.regular, .executable].contains(target.type) && !(target.path ?? "").hasPrefix("Sources/C/") {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]
}

// The modules a frame passes through on its way from the camera back into the next request
// keep Swift's compile-time exclusivity checks but not the run-time ones in release builds: a
// check per access to a class's or actor's stored property (the session's ledger, monitors and
// rings, the queue's state) was a tenth of the per-frame work on the emulated board
// (`swift_beginAccess` and its thread-local lookup, perf). Debug builds, which every test tier
// runs, keep checking at run time.
for target in package.targets where ["ShutterbugCore", "CaptureScheduler", "Capture", "LibcameraBackend", "shutterbug"].contains(target.name) {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]
}

// The simulated camera's pixels (the scene renderer, the ISP) are optimised in debug builds too:
// at -Onone a 12 MP frame takes seconds, which made the tests that look at pixels, and the
// preview on the emulated board, wait on the renderer rather than on what they test.
for target in package.targets where target.name == "SimulatedCamera" {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-O"], .when(configuration: .debug))]
}
