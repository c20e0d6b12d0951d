import ShutterbugCore

extension Card {
    /// A scan-out layer: shows a framebuffer, scaled and placed, on a CRTC.
    public struct Plane: Sendable, Hashable {
        public var id: UInt32
        /// Bit i set: it can be on CRTC index i.
        public var possibleCrtcs: UInt32
        public var formats: [PixelFormat]
        public var isPrimary: Bool
        public var isCursor: Bool
        /// What it shows now (0: nothing), restored when a preview ends.
        public var crtcID: UInt32
        public var framebufferID: UInt32
    }
}
