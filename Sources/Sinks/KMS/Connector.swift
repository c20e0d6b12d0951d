import CDRM
import ShutterbugCore

extension Card {
    /// A display output ("HDMI-A-1", "Virtual-1", "Writeback-1").
    public struct Connector: Sendable, Hashable {
        public var id: UInt32
        /// The kernel's name for it: type and number, as `modetest` and Wayland print them.
        public var name: String
        public var isWriteback: Bool
        public var connected: Bool
        public var modes: [Mode]
        /// The CRTC driving it now (0: none).
        public var crtcID: UInt32
        /// Bit i set: CRTC index i can drive it.
        public var possibleCrtcs: UInt32

        /// The mode the display prefers, else its first.
        public var preferredMode: Mode? { modes.first(where: \.preferred) ?? modes.first }

        init(card: Card, _ c: drmModeConnector, crtcIDs: [UInt32]) {
            id = c.connector_id
            let type = drmModeGetConnectorTypeName(c.connector_type).map { String(cString: $0) } ?? "Unknown"
            name = "\(type)-\(c.connector_type_id)"
            isWriteback = c.connector_type == UInt32(DRM_MODE_CONNECTOR_WRITEBACK)
            connected = c.connection == DRM_MODE_CONNECTED
            modes = (0..<Int(c.count_modes)).map { Mode(c.modes[$0]) }
            var crtc: UInt32 = 0
            var possible: UInt32 = 0
            for i in 0..<Int(c.count_encoders) {
                guard let e = drmModeGetEncoder(card.fd, c.encoders[i]) else { continue }
                defer { drmModeFreeEncoder(e) }
                possible |= e.pointee.possible_crtcs
                if e.pointee.encoder_id == c.encoder_id { crtc = e.pointee.crtc_id }
            }
            crtcID = crtc
            possibleCrtcs = possible
        }
    }

    /// A display mode.
    public struct Mode: Sendable, Hashable, CustomStringConvertible {
        public var width: Int
        public var height: Int
        public var refresh: Int
        public var preferred: Bool
        let raw: drmModeModeInfo

        init(_ mi: drmModeModeInfo) {
            width = Int(mi.hdisplay)
            height = Int(mi.vdisplay)
            refresh = Int(mi.vrefresh)
            preferred = mi.type & UInt32(DRM_MODE_TYPE_PREFERRED) != 0
            raw = mi
        }

        public var description: String { "\(width)x\(height)@\(refresh)" }
        public static func == (a: Mode, b: Mode) -> Bool { a.width == b.width && a.height == b.height && a.refresh == b.refresh }
        public func hash(into h: inout Hasher) { h.combine(width); h.combine(height); h.combine(refresh) }
    }
}
