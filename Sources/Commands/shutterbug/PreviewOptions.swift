import ArgumentParser
import KMS
import ShutterbugCore

/// `--preview`: the camera on a display while a command runs, never in capture's way.
struct PreviewOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Show the camera on a display: auto (the first connected one), off, or CARD[:CONNECTOR] (card0, card0:HDMI-A-1, :Virtual-1). No display is a normal state: one line says why and capture carries on.", valueName: "auto|off|card"))
    var preview: String = "off"

    func validate() throws {
        do { _ = try PreviewChoice(parsing: preview) } catch let e as ShutterbugError { throw ValidationError(e.message) }
    }

    /// Opens the display and the sink, saying in one line on standard error what happened.
    func open() -> PreviewSink? {
        guard let choice = try? PreviewChoice(parsing: preview), choice != .off else { return nil }
        return Self.open(choice)
    }

    static func open(_ choice: PreviewChoice) -> PreviewSink? {
        let (display, reason) = Display.open(choice)
        guard let display else {
            notice(reason)
            return nil
        }
        do {
            let sink = try PreviewSink(display: display)
            notice(reason)
            return sink
        } catch {
            notice("preview off: \(error)")
            return nil
        }
    }

    /// Frames a preview sink may hold: the one on screen and the one waiting for its flip.
    static let framesPerSink = 2

    /// The viewfinder stream for `camera` on a display, at the aspect of its sensor (the
    /// profile's full resolution, else the pixel array libcamera reports, else the mode's).
    static func viewfinder(for display: Display, camera: any CameraBackend) -> StreamRequest {
        let full = camera.sensorProfile?.fullResolution
        let w = full?.width ?? camera.info.pixelArrayWidth ?? display.mode.width
        let h = full?.height ?? camera.info.pixelArrayHeight ?? display.mode.height
        return viewfinder(for: display, sensor: (w, h))
    }

    /// The viewfinder stream for a display: XRGB8888 at the largest size of the sensor's
    /// aspect that fits the mode (the Pi's Viewfinder role at display size).
    /// Within 1% of the mode in both directions it is the mode itself, so a plane that cannot
    /// scale or place (vkms's primary plane) still shows it with no copy.
    static func viewfinder(for display: Display, sensor: (Int, Int)) -> StreamRequest {
        let fit = display.fit(width: sensor.0, height: sensor.1)
        let m = display.mode
        let close = Double(m.width - fit.w) <= 0.01 * Double(m.width) && Double(m.height - fit.h) <= 0.01 * Double(m.height)
        return StreamRequest(role: .viewfinder, width: (close ? m.width : fit.w) & ~1, height: (close ? m.height : fit.h) & ~1, pixelFormat: .xrgb8888)
    }
}

extension PreviewSink {
    /// The summary line, and the JSON fields, of what the preview did.
    var summaryLine: String {
        let s = statistics
        return "preview: \(s.shown) frames shown, \(s.dropped) dropped while a flip was pending, \(s.failed) commits refused; \(s.path?.rawValue ?? "no frame came"): \(s.pathReason)"
    }

    func add(to o: inout JSONObject) {
        let s = statistics
        var p = JSONObject()
        p.add("card", display.card.path)
        p.add("connector", display.connector.name)
        p.add("mode", display.mode.description)
        p.add("shown", s.shown)
        p.add("dropped", s.dropped)
        p.add("failed", s.failed)
        p.add("path", s.path?.rawValue)
        p.add("why", s.pathReason)
        o.add("preview", object: p)
    }
}
