import SystemPackage

/// The one public error type: a code to switch on, a message a person can act on, and the cause.
///
/// Errors from the C boundary arrive as an errno and are wrapped here with what was being done.
public struct ShutterbugError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// An argument or setting is outside what is accepted; the message gives the range.
        public static let invalidArgument = Code("invalid argument")
        /// No camera with that id, or the camera went away.
        public static let noSuchCamera = Code("no such camera")
        /// Another user holds the camera.
        public static let busy = Code("busy")
        /// The call is not valid in the camera's current state.
        public static let invalidState = Code("invalid state")
        /// The camera was unplugged or its pipeline failed while running.
        public static let cameraLost = Code("camera lost")
        /// Nothing arrived in the time allowed.
        public static let timeout = Code("timeout")
        /// The operating system or a library reported an error.
        public static let system = Code("system error")
        /// This camera or this build cannot do it.
        public static let unsupported = Code("unsupported")
        /// The output filesystem is full, or below its reserve.
        public static let noSpace = Code("no space")
        /// The capture's first exposure would begin after the latest start it was given.
        public static let late = Code("late")
    }

    public var code: Code
    public var message: String
    /// The errno behind a system failure, when there is one.
    public var errno: Errno?

    public init(_ code: Code, _ message: String, errno: Errno? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    /// With a raw errno, as the C calls leave it (`errno`, or a bridge's `-errno` negated).
    public init(_ code: Code, _ message: String, errno raw: Int32) {
        self.init(code, message, errno: Errno(rawValue: raw))
    }

    public var description: String {
        if let errno { return "\(message) (\(ShutterbugError.errnoName(errno)))" }
        return message
    }

    /// Wraps a negative errno returned through the C boundary (the bridge's `0 or -errno`).
    public static func fromErrno(_ negativeErrno: Int32, while action: String) -> ShutterbugError {
        let e = Errno(rawValue: -negativeErrno)
        let code: Code
        switch e {
        case .operationNotSupportedByDevice, .noSuchFileOrDirectory: code = .noSuchCamera
        case .resourceBusy: code = .busy
        case .invalidArgument, .outOfRange: code = .invalidArgument
        case .permissionDenied: code = .invalidState
        case .timedOut: code = .timeout
        case .noSpace, .diskQuotaExceeded: code = .noSpace
        default: code = .system
        }
        return ShutterbugError(code, "\(action) failed", errno: e)
    }

    /// The symbolic name a person can search for ("EBUSY"), else swift-system's text.
    static func errnoName(_ e: Errno) -> String {
        switch e {
        case .notPermitted: return "EPERM"
        case .noSuchFileOrDirectory: return "ENOENT"
        case .ioError: return "EIO"
        case .noMemory: return "ENOMEM"
        case .permissionDenied: return "EACCES"
        case .resourceBusy: return "EBUSY"
        case .operationNotSupportedByDevice: return "ENODEV"
        case .invalidArgument: return "EINVAL"
        case .noSpace: return "ENOSPC"
        case .outOfRange: return "ERANGE"
        case .timedOut: return "ETIMEDOUT"
        default: return "\(e)"
        }
    }
}
