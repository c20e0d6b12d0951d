import CSystemShims
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The memory layout of one simulated stream's buffers.
struct SimulatedBufferLayout: Sendable {
    var width: Int
    var height: Int
    var format: PixelFormat
    var planes: [PlaneLayout]
    var size: Int

    /// Lays out a frame the way libcamera's Pi pipeline does: rows aligned to 64 bytes, YUV420
    /// as three planes in one buffer.
    init(width: Int, height: Int, format: PixelFormat) {
        self.width = width
        self.height = height
        self.format = format
        func align(_ v: Int) -> Int { (v + 63) & ~63 }
        switch format {
        case .yuv420:
            let ys = align(width)
            let cs = align(width / 2)
            let yLen = ys * height
            let cLen = cs * (height / 2)
            planes = [
                PlaneLayout(offset: 0, length: yLen, stride: ys),
                PlaneLayout(offset: yLen, length: cLen, stride: cs),
                PlaneLayout(offset: yLen + cLen, length: cLen, stride: cs),
            ]
            size = yLen + 2 * cLen
        default:
            let stride = align(format.bayer?.rowBytes(width: width) ?? width * (format.bytesPerPixel ?? 2))
            planes = [PlaneLayout(offset: 0, length: stride * height, stride: stride)]
            size = stride * height
        }
    }
}

/// A simulated stream buffer: process memory allocated once, rendered lazily from the recipe of
/// the frame it last carried, so frames nobody looks at cost nothing to "capture".
///
/// `@unchecked Sendable`: the sensor thread sets `recipe` before it hands the completion over
/// (the completion queue's lock orders it), and only the slot's owner touches the buffer until
/// it queues the slot again, so no two threads use it at once.
final class SimulatedFrameBuffer: SnapshotFrameBuffer, @unchecked Sendable {
    let layout: SimulatedBufferLayout
    let profile: SensorProfile
    fileprivate let memory: UnsafeMutableRawBufferPointer
    /// The dmabuf behind `memory`, where the kernel has a DMA heap.
    private let dmabuf: Int32?
    private let renderer: SceneRenderer
    var recipe: SimulatedPipeline.FrameRecipe?
    /// Whether `snapshot` hands out recipes.
    var snapshots = true
    fileprivate var rendered: SimulatedPipeline.FrameRecipe?

    init(layout: SimulatedBufferLayout, profile: SensorProfile, renderer: SceneRenderer, dmaHeap: Bool = true) throws {
        self.layout = layout
        self.profile = profile
        self.renderer = renderer
        // A real dmabuf from the system DMA heap where the kernel offers one (the virtual
        // board; a Pi), so a display can import the frame with no copy as it would a
        // libcamera buffer. Otherwise anonymous pages. Either way zero, page-aligned and
        // touched only when a frame is rendered into them: allocating a 12 MP stream's buffers
        // is instant, in the session's prepare, rather than a write of hundreds of megabytes.
        let size = max(layout.size, 1)
        let fd = Self.useDMAHeap && dmaHeap ? sbshim_dma_heap_alloc(UInt64((size + 4095) & ~4095)) : -ENOENT
        let p: UnsafeMutableRawPointer?
        if fd >= 0 {
            p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            if p == nil || p == MAP_FAILED { close(fd) }
        } else {
            p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        }
        guard let p, p != MAP_FAILED else { throw ShutterbugError.fromErrno(-errno, while: "allocating a \(size)-byte simulated buffer") }
        memory = UnsafeMutableRawBufferPointer(start: p, count: layout.size)
        dmabuf = fd >= 0 ? fd : nil
    }

    deinit {
        munmap(memory.baseAddress, max(memory.count, 1))
        if let dmabuf { close(dmabuf) }
    }

    /// Whether to try the DMA heap: once per process, only where the heap device exists
    /// (`SHUTTERBUG_SIM_DMABUF=0` turns it off).
    static let useDMAHeap: Bool = access("/dev/dma_heap/system", R_OK) == 0 && getenv("SHUTTERBUG_SIM_DMABUF").map { String(cString: $0) != "0" } ?? true

    var width: Int { layout.width }
    var height: Int { layout.height }
    var pixelFormat: PixelFormat { layout.format }
    var planes: [PlaneLayout] { layout.planes }
    var dmabufFD: Int32? { dmabuf }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        prepareContents()
        return try body(UnsafeRawBufferPointer(memory))
    }

    /// The frame's recipe in a buffer of its own, rendered when first read (a pool's copy of a
    /// frame held for zero shutter lag costs nothing until it is looked at, as the frame
    /// itself did).
    /// None when the camera was told to let the pool copy bytes (`SimulationOptions.snapshotCopies`).
    func snapshot() -> (any FrameBuffer)? {
        guard snapshots, let buffer = try? SimulatedFrameBuffer(layout: layout, profile: profile, renderer: renderer, dmaHeap: false) else {
            return nil
        }
        buffer.recipe = recipe
        if let recipe, rendered == recipe {
            // Already rendered here: its pixels are copied, not rendered again.
            buffer.memory.copyMemory(from: UnsafeRawBufferPointer(memory))
            buffer.rendered = recipe
        }
        return buffer
    }

    /// Renders the frame's recipe into the memory if it has not been yet.
    func prepareContents() {
        guard let recipe, recipe != rendered else { return }
        if let dmabuf { _ = sbshim_dmabuf_sync(dmabuf, 1) }
        renderer.render(recipe, into: memory, layout: layout, profile: profile)
        if let dmabuf { _ = sbshim_dmabuf_sync(dmabuf, 0) }
        rendered = recipe
    }
}
