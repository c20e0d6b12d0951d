import CLibcameraBridge
import ShutterbugCore

/// A libcamera dmabuf, mapped read-only for the CPU by the bridge.
///
/// `@unchecked Sendable`: immutable after creation; the memory it points at is owned by the
/// bridge and lent to whoever holds the completed request.
final class LibcameraFrameBuffer: FrameBuffer, @unchecked Sendable {
    let width: Int
    let height: Int
    let pixelFormat: PixelFormat
    let planes: [PlaneLayout]
    let dmabufFD: Int32?
    private let base: UnsafeRawPointer?
    private let extent: Int

    init(stream: StreamConfiguration, info: sbc_buffer_info) {
        width = stream.width
        height = stream.height
        pixelFormat = stream.pixelFormat
        let raw = Swift.withUnsafeBytes(of: info.planes) { Array($0.bindMemory(to: sbc_plane.self).prefix(Int(info.plane_count))) }
        dmabufFD = raw.first.map { $0.fd }
        // A view from offset 0 covers every plane when they share one dmabuf (YUV420 on the
        // Pi, packed RGB on vimc); with several dmabufs it covers the first.
        let sameFD = raw.allSatisfy { $0.fd == raw.first?.fd }
        let used = sameFD ? raw : Array(raw.prefix(1))
        base = raw.first.flatMap { p in p.data.map { UnsafeRawPointer($0) - Int(p.offset) } }
        extent = used.map { Int($0.offset) + Int($0.length) }.max() ?? 0
        let planar = stream.pixelFormat == .yuv420
        planes = raw.enumerated().map { i, p in
            // libcamera reports one stride, for the first plane; YUV420 chroma rows are half.
            let stride = i == 0 || !planar ? stream.stride : stream.stride / 2
            return PlaneLayout(offset: Int(p.offset), length: Int(p.length), stride: stride)
        }
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: base == nil ? 0 : extent))
    }
}
