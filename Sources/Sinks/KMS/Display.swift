import CDRM
import SystemPackage
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// Which display a preview goes to: `auto` (the first card with a connected display whose plane
/// takes the picture), `off`, or a card and optionally a connector by name (`card0`,
/// `/dev/dri/card1:HDMI-A-1`, `:Virtual-1` for that connector on any card).
public enum PreviewChoice: Sendable, Equatable, CustomStringConvertible {
    case auto
    case off
    case named(card: String?, connector: String?)

    /// Parses the `--preview` value.
    ///
    /// - Throws: `.invalidArgument` naming the accepted forms.
    public init(parsing text: String) throws {
        switch text {
        case "auto", "": self = .auto
        case "off", "none": self = .off
        default:
            let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            var card = parts[0].isEmpty ? nil : parts[0]
            if let c = card, !c.hasPrefix("/") { card = "/dev/dri/" + c }
            let connector = parts.count > 1 && !parts[1].isEmpty ? parts[1] : nil
            guard card != nil || connector != nil, card.map({ $0.hasPrefix("/dev/dri/card") }) ?? true else {
                throw ShutterbugError(.invalidArgument, "--preview takes auto, off, CARD, CARD:CONNECTOR or :CONNECTOR (e.g. card0:HDMI-A-1), not '\(text)'")
            }
            self = .named(card: card, connector: connector)
        }
    }

    public var description: String {
        switch self {
        case .auto: "auto"
        case .off: "off"
        case .named(let card, let connector): "\(card ?? "")\(connector.map { ":" + $0 } ?? "")"
        }
    }
}

/// A display found and taken for a preview: the card, the connector, the CRTC driving it, the
/// plane the frames go on and the mode, with what they showed before, to put back.
public final class Display: @unchecked Sendable {
    // `@unchecked Sendable`: fixed after `open`; only the preview thread commits.
    public let card: Card
    public let connector: Card.Connector
    public let crtc: Card.Crtc
    public let plane: Card.Plane
    public let mode: Card.Mode
    /// The CRTC had to be lit with the connector's preferred mode.
    public let modeset: Bool
    /// A black frame at the mode's size, shown until the first camera frame.
    let blank: DumbFramebuffer
    private let previous: Saved
    private var restored = false

    struct Saved {
        var crtcActive: Bool
        var crtcMode: UInt32
        var connectorCrtc: UInt32
        var planeCrtc: UInt32
        var planeFB: UInt32
        var planeRects: [String: UInt64]
    }

    static let rectProperties = ["SRC_X", "SRC_Y", "SRC_W", "SRC_H", "CRTC_X", "CRTC_Y", "CRTC_W", "CRTC_H"]

    /// Finds and takes a display. Returns nil with the reason when there is none to take: no
    /// card, no connected display, no plane that works, or no DRM master. Never throws: a
    /// headless camera is a normal state.
    public static func open(_ choice: PreviewChoice) -> (display: Display?, reason: String) {
        let (wantedCard, wantedConnector): (String?, String?)
        switch choice {
        case .off: return (nil, "preview off (--preview off)")
        case .auto: (wantedCard, wantedConnector) = (nil, nil)
        case .named(let c, let n): (wantedCard, wantedConnector) = (c, n)
        }
        let paths = wantedCard.map { [$0] } ?? Card.allPaths()
        if paths.isEmpty { return (nil, "preview off: no display device (/dev/dri has no card)") }
        var reasons: [String] = []
        for path in paths {
            do {
                let card = try Card(path: path)
                if let d = try open(card, connector: wantedConnector) { return (d, "preview on \(path) \(d.connector.name) \(d.mode)\(d.modeset ? " (lit with its preferred mode)" : "")") }
                reasons.append("\(path): no connected display\(wantedConnector.map { " named \($0)" } ?? "")")
            } catch let e as ShutterbugError {
                reasons.append("\(path): \(e.message)")
            } catch {
                reasons.append("\(path): \(error)")
            }
        }
        return (nil, "preview off: " + reasons.joined(separator: "; "))
    }

    private static func open(_ card: Card, connector wanted: String?) throws -> Display? {
        let (connectors, crtcs, planes) = try card.resources()
        let candidates = connectors.filter { !$0.isWriteback && $0.connected && (wanted == nil || $0.name == wanted) }
        var lastError: ShutterbugError?
        for connector in candidates {
            // The CRTC driving it now, else a free one it can use.
            let busy = Set(connectors.filter { $0.id != connector.id }.map(\.crtcID))
            guard let crtc = crtcs.first(where: { $0.id == connector.crtcID && $0.active })
                ?? crtcs.first(where: { connector.possibleCrtcs & $0.bit != 0 && !busy.contains($0.id) }) else { continue }
            guard let plane = planes.first(where: { $0.isPrimary && $0.possibleCrtcs & crtc.bit != 0 && $0.formats.contains(.xrgb8888) }) else {
                lastError = ShutterbugError(.unsupported, "no primary plane on CRTC \(crtc.id) takes XRGB8888")
                continue
            }
            let lit = crtc.active && crtc.id == connector.crtcID
            guard let mode = lit ? crtc.mode : connector.preferredMode else { continue }
            var rects: [String: UInt64] = [:]
            for name in rectProperties { rects[name] = card.property(object: plane.id, type: UInt32(DRM_MODE_OBJECT_PLANE), named: name)?.value ?? 0 }
            let saved = Saved(crtcActive: crtc.active, crtcMode: crtc.modeBlob, connectorCrtc: connector.crtcID,
                              planeCrtc: plane.crtcID, planeFB: plane.framebufferID, planeRects: rects)
            let blank = try DumbFramebuffer(card: card, width: mode.width, height: mode.height)
            for y in 0..<mode.height { for x in 0..<mode.width { blank[x, y] = 0xff00_0000 } }
            let display = Display(card: card, connector: connector, crtc: crtc, plane: plane, mode: mode, modeset: !lit, blank: blank, previous: saved)
            do {
                // Test, then take it for real: a commit here fails with EACCES/EPERM without
                // DRM master, EBUSY or EINVAL when the plane is someone else's.
                try display.showBlank(testOnly: true)
                try display.showBlank(testOnly: false)
                return display
            } catch let e as ShutterbugError {
                display.restored = true  // nothing was changed
                let why = e.errno == Errno(rawValue: EACCES) || e.errno == Errno(rawValue: EPERM) ? "not DRM master (another program owns the display)" : e.message
                lastError = ShutterbugError(e.code, "\(connector.name): \(why)")
            }
        }
        if let lastError { throw lastError }
        return nil
    }

    private init(card: Card, connector: Card.Connector, crtc: Card.Crtc, plane: Card.Plane, mode: Card.Mode, modeset: Bool, blank: DumbFramebuffer, previous: Saved) {
        self.card = card
        self.connector = connector
        self.crtc = crtc
        self.plane = plane
        self.mode = mode
        self.modeset = modeset
        self.blank = blank
        self.previous = previous
    }

    deinit { restore() }

    /// The black frame on the plane, full screen, with the modeset if one is needed.
    private func showBlank(testOnly: Bool) throws {
        let r = AtomicRequest(card: card)
        var blob: UInt32 = 0
        if modeset {
            blob = try AtomicRequest.modeBlob(card: card, mode: mode)
            try r.setCrtc(crtc.id, "MODE_ID", UInt64(blob))
            try r.setCrtc(crtc.id, "ACTIVE", 1)
            try r.setConnector(connector.id, "CRTC_ID", UInt64(crtc.id))
        }
        defer { if blob != 0 { drmModeDestroyPropertyBlob(card.fd, blob) } }
        try place(r, framebuffer: blank.framebufferID, source: (mode.width, mode.height), destination: (0, 0, mode.width, mode.height))
        try r.commit(testOnly: testOnly, allowModeset: modeset)
    }

    /// Adds the plane's framebuffer and rectangles to a request.
    func place(_ r: AtomicRequest, framebuffer: UInt32, source: (w: Int, h: Int), destination d: (x: Int, y: Int, w: Int, h: Int)) throws {
        try r.setPlane(plane.id, "FB_ID", UInt64(framebuffer))
        try r.setPlane(plane.id, "CRTC_ID", UInt64(crtc.id))
        try r.setPlane(plane.id, "SRC_X", 0)
        try r.setPlane(plane.id, "SRC_Y", 0)
        try r.setPlane(plane.id, "SRC_W", UInt64(source.w) << 16)
        try r.setPlane(plane.id, "SRC_H", UInt64(source.h) << 16)
        try r.setPlane(plane.id, "CRTC_X", UInt64(d.x))
        try r.setPlane(plane.id, "CRTC_Y", UInt64(d.y))
        try r.setPlane(plane.id, "CRTC_W", UInt64(d.w))
        try r.setPlane(plane.id, "CRTC_H", UInt64(d.h))
    }

    /// The largest rectangle of a `w`x`h` picture's aspect centred in the mode.
    public func fit(width w: Int, height h: Int) -> (x: Int, y: Int, w: Int, h: Int) {
        let scale = min(Double(mode.width) / Double(max(w, 1)), Double(mode.height) / Double(max(h, 1)))
        let dw = min(mode.width, Int((Double(w) * scale).rounded())), dh = min(mode.height, Int((Double(h) * scale).rounded()))
        return ((mode.width - dw) / 2, (mode.height - dh) / 2, dw, dh)
    }

    /// Puts back what the display showed before the preview and gives the display up (DRM
    /// master dropped), so the next program, or the next preview of this one, can take it at
    /// once, whoever still holds a reference to this object (a session's sink list, a frame in
    /// flight): the card's descriptor itself closes only when the last reference goes. Idempotent;
    /// also on deinit.
    public func restore() {
        guard !restored else { return }
        restored = true
        defer { _ = drmDropMaster(card.fd) }
        let r = AtomicRequest(card: card)
        do {
            try r.setPlane(plane.id, "FB_ID", UInt64(previous.planeFB))
            try r.setPlane(plane.id, "CRTC_ID", UInt64(previous.planeCrtc))
            if previous.planeFB != 0 {
                for (name, value) in previous.planeRects { try r.setPlane(plane.id, name, value) }
            }
            if modeset {
                try r.setConnector(connector.id, "CRTC_ID", UInt64(previous.connectorCrtc))
                try r.setCrtc(crtc.id, "MODE_ID", UInt64(previous.crtcMode))
                try r.setCrtc(crtc.id, "ACTIVE", previous.crtcActive ? 1 : 0)
            }
            try r.commit(allowModeset: modeset)
        } catch {
            // The display may have gone (unplugged); nothing else to put back.
        }
    }
}
