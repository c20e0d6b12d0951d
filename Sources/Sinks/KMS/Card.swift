import CDRM
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// A DRM/KMS device (`/dev/dri/cardN`) opened for atomic modesetting, with writeback connectors
/// visible. The names follow kms++: `Card`, `Connector`, `Crtc`, `Plane`.
public final class Card: @unchecked Sendable {
    // `@unchecked Sendable`: the fd is immutable; the kernel serialises ioctls.
    public let path: String
    let fd: Int32

    /// Opens a card and asks for atomic modesetting and writeback connectors.
    ///
    /// - Throws: `.unsupported` when the driver has no atomic modesetting.
    public init(path: String) throws {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw ShutterbugError.fromErrno(-errno, while: "opening \(path)") }
        self.fd = fd
        self.path = path
        guard drmSetClientCap(fd, UInt64(DRM_CLIENT_CAP_UNIVERSAL_PLANES), 1) == 0,
              drmSetClientCap(fd, UInt64(DRM_CLIENT_CAP_ATOMIC), 1) == 0 else {
            close(fd)
            throw ShutterbugError(.unsupported, "\(path) has no atomic modesetting")
        }
        _ = drmSetClientCap(fd, UInt64(DRM_CLIENT_CAP_WRITEBACK_CONNECTORS), 1)
    }

    deinit { close(fd) }

    /// Every card under /dev/dri, by path.
    public static func allPaths() -> [String] {
        (0..<8).map { "/dev/dri/card\($0)" }.filter { access($0, F_OK) == 0 }
    }

    /// The driver's name ("vkms", "vc4").
    public var driverName: String {
        guard let v = drmGetVersion(fd) else { return "" }
        defer { drmFreeVersion(v) }
        return String(cString: v.pointee.name)
    }

    public struct Connector: Sendable, Hashable {
        public var id: UInt32
        public var isWriteback: Bool
        public var connected: Bool
        public var modes: [Mode]
    }

    public struct Mode: Sendable, Hashable {
        public var width: Int
        public var height: Int
        public var refresh: Int
        let raw: drmModeModeInfo
        public static func == (a: Mode, b: Mode) -> Bool { a.width == b.width && a.height == b.height && a.refresh == b.refresh }
        public func hash(into h: inout Hasher) { h.combine(width); h.combine(height); h.combine(refresh) }
    }

    public struct Plane: Sendable, Hashable {
        public var id: UInt32
        public var possibleCrtcs: UInt32
        public var formats: [PixelFormat]
        public var isPrimary: Bool
    }

    /// Connectors, CRTCs and planes.
    public func resources() throws -> (connectors: [Connector], crtcs: [UInt32], planes: [Plane]) {
        guard let res = drmModeGetResources(fd) else { throw ShutterbugError.fromErrno(-errno, while: "reading resources of \(path)") }
        defer { drmModeFreeResources(res) }
        var connectors: [Connector] = []
        for i in 0..<Int(res.pointee.count_connectors) {
            guard let c = drmModeGetConnector(fd, res.pointee.connectors[i]) else { continue }
            defer { drmModeFreeConnector(c) }
            let modes = (0..<Int(c.pointee.count_modes)).map { m -> Mode in
                let mi = c.pointee.modes[m]
                return Mode(width: Int(mi.hdisplay), height: Int(mi.vdisplay), refresh: Int(mi.vrefresh), raw: mi)
            }
            connectors.append(Connector(id: c.pointee.connector_id, isWriteback: c.pointee.connector_type == UInt32(DRM_MODE_CONNECTOR_WRITEBACK),
                                        connected: c.pointee.connection == DRM_MODE_CONNECTED, modes: modes))
        }
        let crtcs = (0..<Int(res.pointee.count_crtcs)).map { res.pointee.crtcs[$0] }
        var planes: [Plane] = []
        if let pr = drmModeGetPlaneResources(fd) {
            defer { drmModeFreePlaneResources(pr) }
            for i in 0..<Int(pr.pointee.count_planes) {
                guard let p = drmModeGetPlane(fd, pr.pointee.planes[i]) else { continue }
                defer { drmModeFreePlane(p) }
                let formats = (0..<Int(p.pointee.count_formats)).map { PixelFormat(fourcc: p.pointee.formats[$0]) }
                let primary = property(object: p.pointee.plane_id, type: UInt32(DRM_MODE_OBJECT_PLANE), named: "type")?.value == UInt64(DRM_PLANE_TYPE_PRIMARY)
                planes.append(Plane(id: p.pointee.plane_id, possibleCrtcs: p.pointee.possible_crtcs, formats: formats, isPrimary: primary))
            }
        }
        return (connectors, crtcs, planes)
    }

    /// The id and current value of an object's property.
    func property(object: UInt32, type: UInt32, named name: String) -> (id: UInt32, value: UInt64)? {
        guard let props = drmModeObjectGetProperties(fd, object, type) else { return nil }
        defer { drmModeFreeObjectProperties(props) }
        for i in 0..<Int(props.pointee.count_props) {
            guard let p = drmModeGetProperty(fd, props.pointee.props[i]) else { continue }
            defer { drmModeFreeProperty(p) }
            let n = withUnsafeBytes(of: p.pointee.name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if n == name { return (p.pointee.prop_id, props.pointee.prop_values[i]) }
        }
        return nil
    }
}
