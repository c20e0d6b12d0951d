import CDRM
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// A CPU-mapped framebuffer in the card's own memory (a "dumb" buffer), XRGB8888.
public final class DumbFramebuffer: @unchecked Sendable {
    // `@unchecked Sendable`: ids are immutable; callers own the pixels they write.
    public let width: Int
    public let height: Int
    public let pitch: Int
    public let framebufferID: UInt32
    let card: Card
    let handle: UInt32
    let size: Int
    let pixels: UnsafeMutableRawPointer

    public init(card: Card, width: Int, height: Int) throws {
        var handle: UInt32 = 0, pitch: UInt32 = 0, size: UInt64 = 0
        var rc = sbdrm_create_dumb(card.fd, UInt32(width), UInt32(height), 32, &handle, &pitch, &size)
        guard rc == 0 else { throw ShutterbugError.fromErrno(rc, while: "creating a \(width)x\(height) dumb buffer") }
        var offset: UInt64 = 0
        rc = sbdrm_map_dumb(card.fd, handle, &offset)
        guard rc == 0, let map = mmap(nil, Int(size), PROT_READ | PROT_WRITE, MAP_SHARED, card.fd, off_t(offset)), map != MAP_FAILED else {
            _ = sbdrm_destroy_dumb(card.fd, handle)
            throw ShutterbugError.fromErrno(rc != 0 ? rc : -errno, while: "mapping a dumb buffer")
        }
        var handles: (UInt32, UInt32, UInt32, UInt32) = (handle, 0, 0, 0)
        var pitches: (UInt32, UInt32, UInt32, UInt32) = (pitch, 0, 0, 0)
        var offsets: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
        var fb: UInt32 = 0
        let added = withUnsafePointer(to: &handles) { h in
            withUnsafePointer(to: &pitches) { p in
                withUnsafePointer(to: &offsets) { o in
                    drmModeAddFB2(card.fd, UInt32(width), UInt32(height), PixelFormat.xrgb8888.fourcc,
                                  UnsafeRawPointer(h).assumingMemoryBound(to: UInt32.self),
                                  UnsafeRawPointer(p).assumingMemoryBound(to: UInt32.self),
                                  UnsafeRawPointer(o).assumingMemoryBound(to: UInt32.self), &fb, 0)
                }
            }
        }
        guard added == 0 else {
            munmap(map, Int(size))
            _ = sbdrm_destroy_dumb(card.fd, handle)
            throw ShutterbugError.fromErrno(-errno, while: "adding a framebuffer")
        }
        self.card = card
        self.width = width
        self.height = height
        self.pitch = Int(pitch)
        self.handle = handle
        self.size = Int(size)
        self.framebufferID = fb
        self.pixels = map
    }

    deinit {
        drmModeRmFB(card.fd, framebufferID)
        munmap(pixels, size)
        _ = sbdrm_destroy_dumb(card.fd, handle)
    }

    /// The pixel at (x, y) as 0xXXRRGGBB.
    public subscript(x: Int, y: Int) -> UInt32 {
        get { pixels.load(fromByteOffset: y * pitch + x * 4, as: UInt32.self) }
        set { pixels.storeBytes(of: newValue, toByteOffset: y * pitch + x * 4, as: UInt32.self) }
    }
}
