import CDRM
import ShutterbugCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A DRM/KMS device (`/dev/dri/cardN`) opened for atomic modesetting, with writeback connectors
/// visible. The names follow kms++: `Card`, `Connector`, `Crtc`, `Plane`.
public final class Card: @unchecked Sendable {
    // `@unchecked Sendable`: the fd is immutable; the kernel serialises ioctls.
    public let path: String
    let fd: Int32
    /// Property ids by object and name: they never change while the card is open, and an
    /// atomic commit sets a dozen per frame.
    private let propertyIDs = Mutex<[String: UInt32]>([:])

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

    /// Connectors, CRTCs and planes, with what each is doing now.
    public func resources() throws -> (connectors: [Connector], crtcs: [Crtc], planes: [Plane]) {
        guard let res = drmModeGetResources(fd) else { throw ShutterbugError.fromErrno(-errno, while: "reading resources of \(path)") }
        defer { drmModeFreeResources(res) }
        let crtcIDs = (0..<Int(res.pointee.count_crtcs)).map { res.pointee.crtcs[$0] }
        var connectors: [Connector] = []
        for i in 0..<Int(res.pointee.count_connectors) {
            guard let c = drmModeGetConnector(fd, res.pointee.connectors[i]) else { continue }
            defer { drmModeFreeConnector(c) }
            connectors.append(Connector(card: self, c.pointee, crtcIDs: crtcIDs))
        }
        var crtcs: [Crtc] = []
        for (index, id) in crtcIDs.enumerated() {
            guard let c = drmModeGetCrtc(fd, id) else { continue }
            defer { drmModeFreeCrtc(c) }
            let active = property(object: id, type: UInt32(DRM_MODE_OBJECT_CRTC), named: "ACTIVE")?.value ?? 0
            let modeID = property(object: id, type: UInt32(DRM_MODE_OBJECT_CRTC), named: "MODE_ID")?.value ?? 0
            crtcs.append(Crtc(id: id, index: index, active: active != 0, modeBlob: UInt32(truncatingIfNeeded: modeID),
                              mode: c.pointee.mode_valid != 0 ? Mode(c.pointee.mode) : nil))
        }
        var planes: [Plane] = []
        if let pr = drmModeGetPlaneResources(fd) {
            defer { drmModeFreePlaneResources(pr) }
            for i in 0..<Int(pr.pointee.count_planes) {
                guard let p = drmModeGetPlane(fd, pr.pointee.planes[i]) else { continue }
                defer { drmModeFreePlane(p) }
                let formats = (0..<Int(p.pointee.count_formats)).map { PixelFormat(fourcc: p.pointee.formats[$0]) }
                let type = property(object: p.pointee.plane_id, type: UInt32(DRM_MODE_OBJECT_PLANE), named: "type")?.value
                planes.append(Plane(id: p.pointee.plane_id, possibleCrtcs: p.pointee.possible_crtcs, formats: formats,
                                    isPrimary: type == UInt64(DRM_PLANE_TYPE_PRIMARY), isCursor: type == UInt64(DRM_PLANE_TYPE_CURSOR),
                                    crtcID: p.pointee.crtc_id, framebufferID: p.pointee.fb_id))
            }
        }
        return (connectors, crtcs, planes)
    }

    /// The id of an object's property, looked up once.
    func propertyID(object: UInt32, type: UInt32, named name: String) -> UInt32? {
        let key = "\(object):\(name)"
        if let id = propertyIDs.withLock({ $0[key] }) { return id }
        guard let p = property(object: object, type: type, named: name) else { return nil }
        propertyIDs.withLock { $0[key] = p.id }
        return p.id
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
