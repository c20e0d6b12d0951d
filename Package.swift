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
        .library(name: "ImageOutput", targets: ["ImageOutput"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
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
        // DNG (libtiff), JPEG (libjpeg-turbo) and EXIF (libexif), behind one plain C header.
        .target(
            name: "CImageCodecs",
            cSettings: [.unsafeFlags(["-Wall", "-Wextra", "-Wno-unused-parameter"])],
            linkerSettings: [.linkedLibrary("tiff"), .linkedLibrary("jpeg"), .linkedLibrary("exif")]
        ),

        // Core: pure Swift
        // Errno (swift-system) is the typed errno at the C boundary.
        .target(name: "ShutterbugCore", dependencies: [.product(name: "SystemPackage", package: "swift-system")]),

        .target(name: "CaptureScheduler", dependencies: ["ShutterbugCore"]),
        .target(name: "Capture", dependencies: ["ShutterbugCore", "CaptureScheduler"]),

        // I/O and the simulated camera
        .target(name: "SimulatedCamera", dependencies: ["ShutterbugCore"]),
        .target(name: "LibcameraBackend", dependencies: ["ShutterbugCore", "CLibcameraBridge"]),
        .target(name: "LinuxGPIO", dependencies: ["ShutterbugCore", "CGPIO"]),
        .target(name: "KMS", dependencies: ["ShutterbugCore", "CDRM"]),
        .target(name: "ImageOutput", dependencies: ["ShutterbugCore", "Capture", "CImageCodecs", "CSystemShims", .product(name: "SystemPackage", package: "swift-system")]),

        // Executable
        .executableTarget(
            name: "shutterbug",
            dependencies: [
                "ShutterbugCore", "SimulatedCamera", "LibcameraBackend", "CSystemShims", "Capture", "CaptureScheduler", "ImageOutput",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // Tests
        .target(
            name: "CameraConformance",
            dependencies: ["ShutterbugCore"],
            path: "Tests/CameraConformance"
        ),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "ShutterbugCoreTests", dependencies: ["ShutterbugCore"]),
        .testTarget(
            name: "SimulatedCameraTests",
            dependencies: ["SimulatedCamera", "ShutterbugCore", "CameraConformance"]
        ),
        .testTarget(name: "ShutterbugCLITests", dependencies: ["shutterbug", "TestSupport"]),
        .testTarget(name: "CaptureTests", dependencies: ["Capture", "CaptureScheduler", "SimulatedCamera", "ShutterbugCore"]),
        .testTarget(name: "ImageOutputTests", dependencies: ["ImageOutput", "Capture", "CaptureScheduler", "SimulatedCamera", "ShutterbugCore", "TestSupport"]),
        .testTarget(name: "BoardTests", dependencies: ["LinuxGPIO", "KMS", "ShutterbugCore"]),
        .testTarget(
            name: "LibcameraBackendTests",
            dependencies: ["LibcameraBackend", "ShutterbugCore", "CameraConformance"]
        ),
    ],
    cxxLanguageStandard: .cxx17
)
