import ShutterbugCore

/// A timelapse run at a glance: thumbnails of slots spread evenly over the run, in a grid,
/// each labelled with its slot, time of day, exposure and gain.
public enum RunSheet {
    public struct Thumb: Sendable {
        /// 8-bit sRGB, row-major.
        public var rgb: [UInt8]
        public var width: Int
        public var height: Int
        public var labels: [String]
        public init(rgb: [UInt8], width: Int, height: Int, labels: [String]) {
            self.rgb = rgb
            self.width = width
            self.height = height
            self.labels = labels
        }
    }

    /// Thumbnails are stored this wide.
    public static let thumbWidth = 128
    /// Tiles drawn at twice the thumbnail's size, at most this many across.
    static let columns = 6
    static let scale = 2
    static let pad = 12

    /// The sheet as a JPEG: `thumbs` in order, left to right, top to bottom.
    public static func jpeg(_ thumbs: [Thumb], title: String, quality: Int = 88) throws -> [UInt8] {
        guard !thumbs.isEmpty else { throw ShutterbugError(.invalidState, "no slot has a thumbnail yet") }
        let tw = thumbWidth * scale
        let th = (thumbs.map(\.height).max() ?? 96) * scale
        let cols = min(columns, thumbs.count)
        let rows = (thumbs.count + cols - 1) / cols
        let lines = thumbs.map(\.labels.count).max() ?? 0
        let cellH = th + pad / 2 + lines * ContactSheet.lineHeight + pad
        let titleH = ContactSheet.lineHeight + pad
        // As wide as the tiles, or the title where it is longer (a run of one slot).
        let titleW = 2 * pad + title.count * (BitmapFont.width + 1) * ContactSheet.scale
        let width = (max(pad + cols * (tw + pad), titleW) + 1) & ~1
        let height = ((pad + titleH + rows * cellH) + 1) & ~1
        var canvas = Canvas(width: width, height: height, fill: (34, 34, 34))
        canvas.text(title, at: (pad, pad), colour: (235, 235, 235))
        for (i, t) in thumbs.enumerated() {
            let x0 = pad + (i % cols) * (tw + pad), y0 = pad + titleH + (i / cols) * cellH
            // Nearest-neighbour at twice the size: the thumbnail is box-filtered already.
            var big = [UInt8](repeating: 0, count: t.width * scale * t.height * scale * 3)
            for y in 0..<(t.height * scale) {
                for x in 0..<(t.width * scale) {
                    let s = ((y / scale) * t.width + x / scale) * 3, d = (y * t.width * scale + x) * 3
                    big[d] = t.rgb[s]
                    big[d + 1] = t.rgb[s + 1]
                    big[d + 2] = t.rgb[s + 2]
                }
            }
            canvas.blit(big, width: t.width * scale, height: t.height * scale, at: (x0, y0))
            var y = y0 + th + pad / 2
            for line in t.labels {
                canvas.text(line, at: (x0, y), colour: (235, 235, 235))
                y += ContactSheet.lineHeight
            }
        }
        return try ContactSheet.jpeg(rgb: canvas.pixels, width: width, height: height, quality: quality)
    }
}
