import LibcameraBackend

/// What `shutterbug --version` says: the release, and what this binary was built with and for.
enum ShutterbugVersion {
    /// The release (the Debian package's version comes from here).
    static let number = "0.3.0"

    static var swift: String {
        #if swift(>=6.3)
        "6.3"
        #elseif swift(>=6.2)
        "6.2"
        #else
        "6.0"
        #endif
    }

    static var architecture: String {
        #if arch(arm64)
        "aarch64"
        #elseif arch(x86_64)
        "x86_64"
        #else
        "other"
        #endif
    }

    /// "0.3.0 (aarch64; libcamera 0.7.2; Swift 6.2)".
    static var line: String { "\(number) (\(architecture); libcamera \(LibcameraManager.libcameraVersion); Swift \(swift))" }
}
