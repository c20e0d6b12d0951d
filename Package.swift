// swift-tools-version: 6.0
import PackageDescription

// Three layers, as in swift-nio: pure Swift core (builds anywhere), I/O modules that are the only
// importers of C, and the simulated camera that stands in for hardware.
let package = Package(
    name: "Shutterbug",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "shutterbug", targets: ["shutterbug"]),
        .library(name: "ShutterbugCore", targets: ["ShutterbugCore"]),
        .library(name: "Capture", targets: ["Capture", "CaptureScheduler"]),
        .library(name: "SimulatedCamera", targets: ["SimulatedCamera"]),
        .library(name: "LibcameraBackend", targets: ["LibcameraBackend"]),
        .library(name: "LinuxGPIO", targets: ["LinuxGPIO"]),
        .library(name: "KMS", targets: ["KMS"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        // C layer
        .systemLibrary(
            name: "CLibcamera",
            pkgConfig: "libcamera",
            providers: [.apt(["libcamera-dev"])]
        ),
        .target(
            name: "CLibcameraBridge",
            dependencies: ["CLibcamera"],
            cxxSettings: [.unsafeFlags(["-Wall", "-Wextra"])]
        ),

        .target(name: "CSystemShims"),
        .target(name: "CGPIO"),
        .systemLibrary(name: "CDRM", pkgConfig: "libdrm", providers: [.apt(["libdrm-dev"])]),

        // Core: pure Swift
        .target(name: "ShutterbugCore"),

        .target(name: "CaptureScheduler", dependencies: ["ShutterbugCore"]),
        .target(name: "Capture", dependencies: ["ShutterbugCore", "CaptureScheduler"]),

        // I/O and the simulated camera
        .target(name: "SimulatedCamera", dependencies: ["ShutterbugCore"]),
        .target(name: "LibcameraBackend", dependencies: ["ShutterbugCore", "CLibcameraBridge"]),
        .target(name: "LinuxGPIO", dependencies: ["ShutterbugCore", "CGPIO"]),
        .target(name: "KMS", dependencies: ["ShutterbugCore", "CDRM"]),

        // Executable
        .executableTarget(
            name: "shutterbug",
            dependencies: [
                "ShutterbugCore", "SimulatedCamera", "LibcameraBackend", "CSystemShims", "Capture", "CaptureScheduler",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // Tests
        .target(
            name: "CameraConformance",
            dependencies: ["ShutterbugCore"],
            path: "Tests/CameraConformance"
        ),
        .testTarget(name: "ShutterbugCoreTests", dependencies: ["ShutterbugCore"]),
        .testTarget(
            name: "SimulatedCameraTests",
            dependencies: ["SimulatedCamera", "ShutterbugCore", "CameraConformance"]
        ),
        .testTarget(name: "ShutterbugCLITests", dependencies: ["shutterbug"]),
        .testTarget(name: "CaptureTests", dependencies: ["Capture", "CaptureScheduler", "SimulatedCamera", "ShutterbugCore"]),
        .testTarget(name: "BoardTests", dependencies: ["LinuxGPIO", "KMS", "ShutterbugCore"]),
        .testTarget(
            name: "LibcameraBackendTests",
            dependencies: ["LibcameraBackend", "ShutterbugCore", "CameraConformance"]
        ),
    ],
    cxxLanguageStandard: .cxx17
)
