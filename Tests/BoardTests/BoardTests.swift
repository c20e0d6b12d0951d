import Foundation
import KMS
import LinuxGPIO
import ShutterbugCore
import Testing

/// Whether these tests run inside the virtual board (board/virtual/run.sh sets it).
let onVirtualBoard = ProcessInfo.processInfo.environment["SHUTTERBUG_BOARD"] == "virtual"

/// The kernel's display and GPIO interfaces, exercised against vkms and gpio-sim.
@Suite("Virtual board kernel interfaces", .serialized, .enabled(if: onVirtualBoard, "needs the virtual board's vkms and gpio-sim drivers: run through board/virtual/run.sh"), .timeLimit(.minutes(3)))
struct BoardTests {
    /// The gpio-sim chip board-init created, and the sysfs folder of its line 0.
    func simulatedChip() throws -> (chip: GPIOChip, line0: String) {
        let config = "/sys/kernel/config/gpio-sim/board-gpio"
        let device = try String(contentsOfFile: config + "/dev_name", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let chipName = try String(contentsOfFile: config + "/bank0/chip_name", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return (try GPIOChip(path: "/dev/" + chipName), "/sys/devices/platform/\(device)/\(chipName)/sim_gpio0")
    }

    @Test("a gpio-sim line delivers both edges with kernel timestamps on the monotonic clock")
    func gpioEdges() throws {
        let (chip, line0) = try simulatedChip()
        #expect(chip.lineCount == 8)
        let offset = try #require(chip.line(named: "shutter"))
        #expect(offset == 0)
        try "pull-down".write(toFile: line0 + "/pull", atomically: false, encoding: .utf8)
        let request = try chip.requestEdges(offset: offset)
        #expect(try request.value() == false)

        let before = MonotonicClock.now()
        try "pull-up".write(toFile: line0 + "/pull", atomically: false, encoding: .utf8)
        let rising = try #require(try request.nextEdge(timeout: .seconds(2)))
        try "pull-down".write(toFile: line0 + "/pull", atomically: false, encoding: .utf8)
        let falling = try #require(try request.nextEdge(timeout: .seconds(2)))
        let after = MonotonicClock.now()

        #expect(rising.kind == .rising)
        #expect(falling.kind == .falling)
        #expect(before <= rising.timestamp && rising.timestamp <= falling.timestamp && falling.timestamp <= after)
        #expect(falling.lineSequence == rising.lineSequence + 1)
        #expect(try request.nextEdge(timeout: .milliseconds(100)) == nil, "no edge without a change")
    }

    @Test("vkms shows a frame and writeback returns the same pixels")
    func vkmsWriteback() throws {
        let path = try #require(Card.allPaths().first { (try? Card(path: $0))?.driverName == "vkms" }, "no vkms card")
        let card = try Card(path: path)
        let (connectors, crtcs, planes) = try card.resources()
        #expect(connectors.contains { !$0.isWriteback })
        #expect(connectors.contains { $0.isWriteback })
        #expect(!crtcs.isEmpty)
        let primary = try #require(planes.first { $0.isPrimary })
        #expect(primary.formats.contains(.xrgb8888))

        let width = 640, height = 480
        let shown = try DumbFramebuffer(card: card, width: width, height: height)
        let captured = try DumbFramebuffer(card: card, width: width, height: height)
        for y in 0..<height {
            for x in 0..<width {
                let r = UInt32(x * 255 / (width - 1)), g = UInt32(y * 255 / (height - 1)), b = UInt32((x ^ y) & 0xff)
                shown[x, y] = 0xff00_0000 | r << 16 | g << 8 | b
                captured[x, y] = 0
            }
        }
        try card.writeback(shown, into: captured)
        var differing = 0
        for y in 0..<height {
            for x in 0..<width where shown[x, y] & 0xff_ffff != captured[x, y] & 0xff_ffff { differing += 1 }
        }
        #expect(differing == 0, "\(differing) of \(width * height) pixels differ")
    }
}
