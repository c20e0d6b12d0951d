// swift-tools-version: 6.0
// An app using Shutterbug as any other package would: through its git URL, here the repository
// this folder is in as a file:// URL, which SwiftPM treats as a remote dependency (no unsafe
// build flags allowed in the products it uses). It builds what is committed on the branch
// SHUTTERBUG_GIT_REF (default: main). `swift run` in this folder takes a bracket.
import Foundation
import PackageDescription

let repository = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().deletingLastPathComponent()
// SwiftPM names a dependency by the last component of its URL.
let identity = repository.lastPathComponent.lowercased()

let package = Package(
    name: "BracketExample",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: repository.absoluteString, branch: Context.environment["SHUTTERBUG_GIT_REF"] ?? "main"),
    ],
    targets: [
        .executableTarget(
            name: "BracketExample",
            dependencies: [
                .product(name: "Capture", package: identity),
                .product(name: "SimulatedCamera", package: identity),
                .product(name: "ShutterbugCore", package: identity),
            ]
        ),
    ]
)
