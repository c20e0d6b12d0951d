import ArgumentParser
import KMS
import LibcameraBackend
import ShutterbugCore

struct Cameras: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List libcamera cameras and the simulated camera profiles.")

    @Flag(name: .long, help: "One JSON object per camera.")
    var json = false

    func run() throws {
        var real: [CameraInfo] = []
        var problem: String?
        do {
            real = try LibcameraManager.shared().cameras
        } catch {
            problem = "\(error)"
        }
        if json {
            for c in real {
                var o = JSONObject()
                o.add("id", c.id)
                o.add("model", c.model)
                o.add("simulated", false)
                o.add("pixelArrayWidth", c.pixelArrayWidth)
                o.add("pixelArrayHeight", c.pixelArrayHeight)
                print(o.text)
            }
            for p in SensorProfile.catalogue {
                var o = JSONObject()
                o.add("id", "sim:\(p.model)")
                o.add("model", p.model)
                o.add("simulated", true)
                o.add("product", p.product)
                o.add("pixelArrayWidth", p.fullResolution.width)
                o.add("pixelArrayHeight", p.fullResolution.height)
                o.add("modes", objects: p.modes.map { m in
                    var mo = JSONObject()
                    mo.add("width", m.width)
                    mo.add("height", m.height)
                    mo.add("bitDepth", p.bitDepth)
                    mo.add("maxFps", m.maxFrameRate)
                    mo.add("lineTimeUs", m.lineTime.microsecondsValue)
                    mo.add("maxExposureS", m.maxExposure.secondsValue)
                    return mo
                })
                print(o.text)
            }
            return
        }
        print("libcamera \(LibcameraManager.libcameraVersion) cameras:")
        if let problem {
            print("  (libcamera could not start: \(problem))")
        } else if real.isEmpty {
            print("  none attached")
        }
        for c in real {
            let size = c.pixelArrayWidth.map { w in " \(w)x\(c.pixelArrayHeight ?? 0)" } ?? ""
            print("  \(c.id)  \(c.model)\(size)")
        }
        print("simulated cameras:")
        for p in SensorProfile.catalogue {
            let gain = p.analogueGainRange
            print("  sim:\(p.model)  \(p.product), delays exposure/gain/vblank \(p.delays.exposure)/\(p.delays.gain)/\(p.delays.vblank), gain \(String(format2: gain.lowerBound))-\(String(format2: gain.upperBound))\(p.hasFocusMotor ? ", focus motor 0-15 dpt" : "")")
            for m in p.modes {
                print("      \(m), line \(String(format2: m.lineTime.microsecondsValue)) µs, exposure up to \(m.maxExposure.millisecondsDescription)")
            }
        }
        // Where --preview can go.
        print("displays (for --preview):")
        let cards = Card.allPaths()
        if cards.isEmpty { print("  none (/dev/dri has no card)") }
        for path in cards {
            do {
                let card = try Card(path: path)
                let (connectors, crtcs, planes) = try card.resources()
                print("  \(path) (\(card.driverName)): \(crtcs.count) CRTCs, \(planes.filter(\.isPrimary).count) primary planes")
                for c in connectors where !c.isWriteback {
                    print("      \(c.name)  \(c.connected ? "connected" : "disconnected")\(c.preferredMode.map { ", preferred \($0)" } ?? "")\(c.crtcID != 0 ? ", lit" : ""), CRTC mask \(c.possibleCrtcs)")
                }
            } catch {
                print("  \(path): \(error)")
            }
        }
    }
}
