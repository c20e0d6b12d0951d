import CDRM
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// An atomic modesetting request: properties set by name, committed together.
public final class AtomicRequest {
    let card: Card
    let request: OpaquePointer

    public init(card: Card) {
        self.card = card
        request = drmModeAtomicAlloc()
    }

    deinit { drmModeAtomicFree(request) }

    /// Sets `name` on an object (`DRM_MODE_OBJECT_*` type).
    ///
    /// - Throws: `.unsupported` when the object has no such property.
    public func set(object: UInt32, type: UInt32, _ name: String, _ value: UInt64) throws {
        guard let id = card.propertyID(object: object, type: type, named: name) else {
            throw ShutterbugError(.unsupported, "object \(object) has no property \(name)")
        }
        guard drmModeAtomicAddProperty(request, object, id, value) >= 0 else {
            throw ShutterbugError.fromErrno(-errno, while: "adding \(name) to an atomic request")
        }
    }

    public func setConnector(_ id: UInt32, _ name: String, _ value: UInt64) throws { try set(object: id, type: UInt32(DRM_MODE_OBJECT_CONNECTOR), name, value) }
    public func setCrtc(_ id: UInt32, _ name: String, _ value: UInt64) throws { try set(object: id, type: UInt32(DRM_MODE_OBJECT_CRTC), name, value) }
    public func setPlane(_ id: UInt32, _ name: String, _ value: UInt64) throws { try set(object: id, type: UInt32(DRM_MODE_OBJECT_PLANE), name, value) }

    /// Commits: `testOnly` asks the driver whether it would work; `allowModeset` for mode
    /// changes; `nonBlocking` returns at once (a second commit while one is pending is EBUSY).
    /// `pageFlipEvent` asks for an event on the card's fd when the commit reaches the screen.
    /// `userData` comes back with the event.
    public func commit(testOnly: Bool = false, allowModeset: Bool = false, nonBlocking: Bool = false, pageFlipEvent: Bool = false,
                       userData: UnsafeMutableRawPointer? = nil) throws {
        var flags: UInt32 = 0
        if testOnly { flags |= UInt32(DRM_MODE_ATOMIC_TEST_ONLY) }
        if allowModeset { flags |= UInt32(DRM_MODE_ATOMIC_ALLOW_MODESET) }
        if nonBlocking { flags |= UInt32(DRM_MODE_ATOMIC_NONBLOCK) }
        if pageFlipEvent { flags |= UInt32(DRM_MODE_PAGE_FLIP_EVENT) }
        let rc = drmModeAtomicCommit(card.fd, request, flags, userData)
        guard rc == 0 else { throw ShutterbugError.fromErrno(-errno, while: "an atomic commit") }
    }

    /// A property blob holding a display mode, for a CRTC's MODE_ID.
    public static func modeBlob(card: Card, mode: Card.Mode) throws -> UInt32 {
        var raw = mode.raw
        var id: UInt32 = 0
        guard drmModeCreatePropertyBlob(card.fd, &raw, MemoryLayout<drmModeModeInfo>.size, &id) == 0 else {
            throw ShutterbugError.fromErrno(-errno, while: "creating a mode blob")
        }
        return id
    }
}

extension Card {
    /// Shows `framebuffer` on the primary plane of a CRTC driven by the writeback connector alone
    /// and captures the composed output into `capture`. Returns when the capture is complete.
    ///
    /// vkms in Linux 6.1 cannot drive a visible connector and writeback from one CRTC, so the
    /// writeback connector gets the CRTC to itself.
    public func writeback(_ framebuffer: DumbFramebuffer, into capture: DumbFramebuffer, timeout: Duration = .seconds(5)) throws {
        try writeback(framebufferID: framebuffer.framebufferID, width: framebuffer.width, height: framebuffer.height, into: capture, timeout: timeout)
    }

    /// `writeback(_:into:)` for any framebuffer: an imported dmabuf (`Framebuffer`) too.
    public func writeback(framebufferID: UInt32, width: Int, height: Int, into capture: DumbFramebuffer, timeout: Duration = .seconds(5)) throws {
        struct Shown { var width: Int; var height: Int; var framebufferID: UInt32 }
        let framebuffer = Shown(width: width, height: height, framebufferID: framebufferID)
        let (connectors, crtcs, planes) = try resources()
        guard let wb = connectors.first(where: \.isWriteback) else { throw ShutterbugError(.unsupported, "\(path) has no writeback connector") }
        guard let crtc = crtcs.first?.id else { throw ShutterbugError(.unsupported, "\(path) has no CRTC") }
        guard let plane = planes.first(where: { $0.isPrimary && $0.possibleCrtcs & 1 != 0 }) else { throw ShutterbugError(.unsupported, "\(path) has no primary plane") }
        // A writeback connector's modes are only probed for the DRM master; another connector's
        // mode of the same size serves as well (writeback takes any mode within its limits).
        let sized = { (m: Mode) in m.width == framebuffer.width && m.height == framebuffer.height }
        guard let mode = wb.modes.first(where: sized) ?? connectors.flatMap(\.modes).first(where: sized) ?? wb.modes.first else {
            throw ShutterbugError(.unsupported, "no mode of \(framebuffer.width)x\(framebuffer.height) for the writeback connector (its modes are probed only for the DRM master)")
        }
        // Any connector already on the CRTC lets go of it first.
        let release = AtomicRequest(card: self)
        for c in connectors where !c.isWriteback { try? release.setConnector(c.id, "CRTC_ID", 0) }
        try? release.commit(allowModeset: true)

        let blob = try AtomicRequest.modeBlob(card: self, mode: mode)
        defer { drmModeDestroyPropertyBlob(fd, blob) }
        var fence: Int32 = -1
        let r = AtomicRequest(card: self)
        try r.setCrtc(crtc, "MODE_ID", UInt64(blob))
        try r.setCrtc(crtc, "ACTIVE", 1)
        try r.setConnector(wb.id, "CRTC_ID", UInt64(crtc))
        try r.setConnector(wb.id, "WRITEBACK_FB_ID", UInt64(capture.framebufferID))
        try withUnsafeMutablePointer(to: &fence) { try r.setConnector(wb.id, "WRITEBACK_OUT_FENCE_PTR", UInt64(UInt(bitPattern: $0))) }
        try r.setPlane(plane.id, "FB_ID", UInt64(framebuffer.framebufferID))
        try r.setPlane(plane.id, "CRTC_ID", UInt64(crtc))
        try r.setPlane(plane.id, "SRC_X", 0)
        try r.setPlane(plane.id, "SRC_Y", 0)
        try r.setPlane(plane.id, "SRC_W", UInt64(framebuffer.width) << 16)
        try r.setPlane(plane.id, "SRC_H", UInt64(framebuffer.height) << 16)
        try r.setPlane(plane.id, "CRTC_X", 0)
        try r.setPlane(plane.id, "CRTC_Y", 0)
        try r.setPlane(plane.id, "CRTC_W", UInt64(mode.width))
        try r.setPlane(plane.id, "CRTC_H", UInt64(mode.height))
        try r.commit(allowModeset: true)
        // Afterwards the CRTC is let go again (plane off, connector off, CRTC off), so the
        // display is free for whoever comes next, a preview included.
        defer {
            let off = AtomicRequest(card: self)
            try? off.setPlane(plane.id, "FB_ID", 0)
            try? off.setPlane(plane.id, "CRTC_ID", 0)
            try? off.setConnector(wb.id, "CRTC_ID", 0)
            try? off.setCrtc(crtc, "ACTIVE", 0)
            try? off.setCrtc(crtc, "MODE_ID", 0)
            try? off.commit(allowModeset: true)
        }
        guard fence >= 0 else { throw ShutterbugError(.system, "the writeback commit returned no fence") }
        defer { close(fence) }
        var p = pollfd(fd: fence, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(timeout.nanosecondsValue / 1_000_000)) == 1 else {
            throw ShutterbugError(.timeout, "the writeback did not complete within \(timeout.millisecondsDescription)")
        }
    }
}
