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
        .library(name: "SimulatedCamera", targets: ["SimulatedCamera"]),
        .library(name: "LibcameraBackend", targets: ["LibcameraBackend"]),
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

        // Core: pure Swift
        .target(name: "ShutterbugCore"),

        // I/O and the simulated camera
        .target(name: "SimulatedCamera", dependencies: ["ShutterbugCore"]),
        .target(name: "LibcameraBackend", dependencies: ["ShutterbugCore", "CLibcameraBridge"]),

        // Executable
        .executableTarget(
            name: "shutterbug",
            dependencies: [
                "ShutterbugCore", "SimulatedCamera", "LibcameraBackend", "CSystemShims",
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
        .testTarget(
            name: "LibcameraBackendTests",
            dependencies: ["LibcameraBackend", "ShutterbugCore", "CameraConformance"]
        ),
    ],
    cxxLanguageStandard: .cxx17
)
