// swift-tools-version: 6.0
// An app using Shutterbug as any other package would: through its git URL. By default the
// repository this folder is in, as a file:// URL on the branch SHUTTERBUG_GIT_REF (default:
// main), which builds what is committed there. SwiftPM lets a dependency on a branch or a
// revision use unsafe build flags, but not one on a version, as a released library is used:
// board/check-example.sh makes a clone of the repository tagged with the release's version and
// names it in SHUTTERBUG_GIT_URL and SHUTTERBUG_GIT_VERSION, so the unit tier holds the
// libraries to that rule. `swift run` in this folder takes a bracket.
import Foundation
import PackageDescription

let environment = Context.environment
let here = URL(fileURLWithPath: Context.packageDirectory)
let dependency: Package.Dependency
let location: URL
if let url = environment["SHUTTERBUG_GIT_URL"], let version = environment["SHUTTERBUG_GIT_VERSION"] {
    location = URL(string: url) ?? here
    dependency = .package(url: url, exact: Version(stringLiteral: version))
} else {
    location = here.deletingLastPathComponent().deletingLastPathComponent()
    dependency = .package(url: location.absoluteString, branch: environment["SHUTTERBUG_GIT_REF"] ?? "main")
}
// SwiftPM names a dependency by the last component of its URL, less ".git".
let identity = location.deletingPathExtension().lastPathComponent.lowercased()

let package = Package(
    name: "BracketExample",
    platforms: [.macOS(.v15)],
    dependencies: [
        dependency,
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
