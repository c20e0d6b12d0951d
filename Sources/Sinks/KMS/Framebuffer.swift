import CDRM
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// A framebuffer over memory the card did not allocate: a camera buffer's dmabuf, imported
/// with no copy (`drmPrimeFDToHandle`, `drmModeAddFB2WithModifiers`, linear layout).
public final class Framebuffer: @unchecked Sendable {
    // `@unchecked Sendable`: ids are immutable; the kernel serialises ioctls.
    public let id: UInt32
    public let width: Int
    public let height: Int
    let card: Card
    let handle: UInt32

    /// Imports `dmabuf` holding a `width`x`height` frame of `format` laid out as `planes`.
    ///
    /// - Throws: the driver's refusal, naming the format and size.
    public init(card: Card, dmabuf: Int32, width: Int, height: Int, format: PixelFormat, planes: [PlaneLayout]) throws {
        var handle: UInt32 = 0
        guard drmPrimeFDToHandle(card.fd, dmabuf, &handle) == 0 else {
            throw ShutterbugError.fromErrno(-errno, while: "importing a \(width)x\(height) \(format) dmabuf into \(card.path)")
        }
        var handles: [UInt32] = [0, 0, 0, 0], pitches: [UInt32] = [0, 0, 0, 0], offsets: [UInt32] = [0, 0, 0, 0]
        var modifiers: [UInt64] = [0, 0, 0, 0]  // DRM_FORMAT_MOD_LINEAR
        for (i, p) in planes.prefix(4).enumerated() {
            handles[i] = handle
            pitches[i] = UInt32(p.stride)
            offsets[i] = UInt32(p.offset)
            modifiers[i] = 0
        }
        var fb: UInt32 = 0
        let rc = drmModeAddFB2WithModifiers(card.fd, UInt32(width), UInt32(height), format.fourcc, handles, pitches, offsets, modifiers, &fb, UInt32(DRM_MODE_FB_MODIFIERS))
        guard rc == 0 else {
            let e = errno
            _ = sbdrm_gem_close(card.fd, handle)
            throw ShutterbugError.fromErrno(-e, while: "adding a \(width)x\(height) \(format) framebuffer on \(card.path)")
        }
        self.card = card
        self.id = fb
        self.width = width
        self.height = height
        self.handle = handle
    }

    deinit {
        drmModeRmFB(card.fd, id)
        _ = sbdrm_gem_close(card.fd, handle)
    }
}
