extension Card {
    /// A display controller: scans planes out to the connectors attached to it.
    public struct Crtc: Sendable, Hashable {
        public var id: UInt32
        /// Its index in the card's list, which `possibleCrtcs` masks refer to.
        public var index: Int
        public var active: Bool
        /// The property blob of its mode now (0: none), restored when a preview ends.
        public var modeBlob: UInt32
        public var mode: Mode?

        /// Its bit in a `possibleCrtcs` mask.
        public var bit: UInt32 { 1 << UInt32(index) }
    }
}
