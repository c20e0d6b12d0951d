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
    }

    public var code: Code
    public var message: String
    /// The errno behind a system failure, when there is one.
    public var errno: Int32?

    public init(_ code: Code, _ message: String, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    public var description: String {
        if let errno { return "\(message) (\(ShutterbugError.errnoName(errno)))" }
        return message
    }

    /// Wraps a negative errno returned through the C boundary.
    public static func fromErrno(_ negativeErrno: Int32, while action: String) -> ShutterbugError {
        let e = -negativeErrno
        let code: Code
        switch e {
        case 19, 2: code = .noSuchCamera  // ENODEV, ENOENT
        case 16: code = .busy  // EBUSY
        case 22, 34: code = .invalidArgument  // EINVAL, ERANGE
        case 13: code = .invalidState  // EACCES
        case 110: code = .timeout  // ETIMEDOUT
        case 28, 122: code = .noSpace  // ENOSPC, EDQUOT
        default: code = .system
        }
        return ShutterbugError(code, "\(action) failed", errno: e)
    }

    static func errnoName(_ e: Int32) -> String {
        switch e {
        case 1: return "EPERM"
        case 2: return "ENOENT"
        case 5: return "EIO"
        case 12: return "ENOMEM"
        case 13: return "EACCES"
        case 16: return "EBUSY"
        case 19: return "ENODEV"
        case 22: return "EINVAL"
        case 28: return "ENOSPC"
        case 34: return "ERANGE"
        case 110: return "ETIMEDOUT"
        default: return "errno \(e)"
        }
    }
}
