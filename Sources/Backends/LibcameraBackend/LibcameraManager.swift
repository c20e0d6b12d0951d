import CLibcameraBridge
import ShutterbugCore
import Synchronization

/// libcamera's camera manager: lists cameras and opens them.
///
/// No camera attached is a normal state: `cameras` is empty. libcamera aborts the process if
/// two managers ever exist at once, so there is exactly one, started on first use and kept for
/// the life of the process: `shared()`. (Releasing it when unused races a new one starting
/// while the old one is still stopping; libcamera's own tools keep theirs for good too.)
public final class LibcameraManager: @unchecked Sendable {
    // `@unchecked Sendable`: the handle is only read after creation; libcamera's manager is
    // thread-safe for listing and getting cameras.
    let handle: OpaquePointer

    private static let live = Mutex<LibcameraManager?>(nil)

    /// The process's camera manager, started on first use.
    ///
    /// - Throws: `ShutterbugError` when libcamera cannot start (not when there is no camera);
    ///   a later call tries again.
    public static func shared() throws -> LibcameraManager {
        try live.withLock { m in
            if let m { return m }
            var h: OpaquePointer?
            let rc = sbc_manager_create(&h)
            guard rc == 0, let h else { throw ShutterbugError.fromErrno(rc, while: "starting libcamera's camera manager") }
            let created = LibcameraManager(handle: h)
            m = created
            return created
        }
    }

    private init(handle: OpaquePointer) { self.handle = handle }

    /// The libcamera version the bridge was built against ("0.0.3").
    public static var libcameraVersion: String {
        let v = sbc_compiled_version()
        return "\(v.major).\(v.minor).\(v.patch)"
    }

    /// The libcamera loaded at run time, as it names itself ("v0.7.1+rpt20260429" for the
    /// Raspberry Pi fork); it can differ from `libcameraVersion` when the library on the system
    /// is not the one the binary was built against.
    public static var runtimeVersion: String {
        var buffer = [CChar](repeating: 0, count: 128)
        _ = sbc_runtime_version(&buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The cameras libcamera sees, in its order.
    public var cameras: [CameraInfo] {
        let count = sbc_manager_camera_count(handle)
        return (0..<count).compactMap { i in
            var info = sbc_camera_info()
            guard sbc_manager_camera_info(handle, i, &info) == 0 else { return nil }
            let id = withUnsafeBytes(of: &info.id) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            let model = withUnsafeBytes(of: &info.model) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            return CameraInfo(
                id: id, model: model.isEmpty ? id : model,
                pixelArrayWidth: info.pixel_array_width > 0 ? Int(info.pixel_array_width) : nil,
                pixelArrayHeight: info.pixel_array_height > 0 ? Int(info.pixel_array_height) : nil,
                isSimulated: false)
        }
    }

    /// Acquires a camera for exclusive use.
    ///
    /// - Throws: `.noSuchCamera` with the ids that exist; `.busy` when another process holds it.
    public func open(_ id: String) throws -> LibcameraCamera {
        guard let info = cameras.first(where: { $0.id == id }) else {
            let known = cameras.map(\.id)
            throw ShutterbugError(.noSuchCamera, "no libcamera camera '\(id)'; cameras present: \(known.isEmpty ? "none" : known.joined(separator: ", "))")
        }
        var cam: OpaquePointer?
        let rc = id.withCString { sbc_camera_acquire(handle, $0, &cam) }
        guard rc == 0, let cam else {
            if rc == -16 { throw ShutterbugError(.busy, "camera '\(id)' is in use by another process", errno: 16) }
            throw ShutterbugError.fromErrno(rc, while: "acquiring camera '\(id)'")
        }
        return LibcameraCamera(manager: self, handle: cam, info: info)
    }
}
