import Capture
import CaptureScheduler
import Foundation
import LinuxGPIO
import ShutterbugCore
import SimulatedCamera
import TestSupport
import Testing

extension BoardTests {
/// GPIO edges as triggers on gpio-sim: kernel timestamps on CLOCK_MONOTONIC, every edge read or
/// counted lost, and a capture exposed after each edge from the simulated camera in real time.
@Suite("GPIO trigger source on gpio-sim")
struct GPIOTriggerBoardTests {
    /// The sysfs file that pulls gpio-sim's line 0 (named "shutter" by the board's init).
    func pull() throws -> String { try BoardTests().simulatedChip().line0 + "/pull" }

    enum Event: Sendable {
        case trigger(Trigger)
        case captured(ok: Bool)
        case sourceEnded
        case stormOver(Duration)
    }

    /// The source's first trigger, or nil when none came within `limit`.
    func firstTrigger(of source: GPIOTriggerSource, within limit: Duration) async throws -> Trigger? {
        try await withDeadline(limit, "an edge from \(source.name)", orNil: true) {
            for await t in source.triggers() { return t }
            return nil
        }
    }

    @Test("a storm of toggles as fast as sysfs allows, while captures run: every edge the kernel saw is a capture, coalesced, dropped or counted lost, and a press after it is still captured")
    func storm() async throws {
        let pull = try pull()
        try "pull-down".write(toFile: pull, atomically: false, encoding: .utf8)
        let source = try GPIOTriggerSource(line: "shutter", edges: .both)
        var o = SimulationOptions()
        o.clock = .realTime
        let cam = SimulatedCamera(profile: .imx477, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        _ = try await session.start(streams: [StreamRequest(role: .viewfinder, width: 640, height: 480)], preparedBracketCount: 1)

        // Triggers and finished captures arrive on one stream; the queue decides.
        let (events, post) = AsyncStream<Event>.makeStream()
        let forward = Task { [source] in
            for await t in source.triggers() { post.yield(.trigger(t)) }
            post.yield(.sourceEnded)
        }
        var queue = try TriggerQueue(policy: .coalesce)
        func start(_ actions: [TriggerQueue.Action]) {
            for case .capture(let t) in actions {
                Task {
                    do {
                        let p = try await session.captureFrame(exposedAfter: t.instant, timeout: .seconds(5))
                        p.release()
                        post.yield(.captured(ok: true))
                    } catch {
                        post.yield(.captured(ok: false))
                    }
                }
            }
        }
        let toggles = 2000
        Task.detached {
            let fd = open(pull, O_WRONLY)
            let began = MonotonicClock.now()
            for i in 0..<toggles {
                let text = i % 2 == 0 ? "pull-up" : "pull-down"
                _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
            }
            close(fd)
            post.yield(.stormOver(MonotonicClock.now() - began))
        }
        var ended = false
        for await e in events {
            switch e {
            case .trigger(let t): start(queue.arrived(t))
            case .captured(let ok): start(queue.finished(failed: !ok))
            case .sourceEnded: ended = true
            case .stormOver(let elapsed):
                // The source drains what the kernel holds, then ends.
                print("gpio-sim storm: \(toggles) toggles in \(elapsed.millisecondsDescription) (\(Int(Double(toggles) / elapsed.secondsValue)) per second)")
                source.stop()
            }
            if ended && queue.busy == nil { break }
        }
        print("the kernel reported \(source.edgesRead + source.kernelLost) edges (gpio-sim's interrupt simulation merges toggles faster than it runs), \(source.kernelLost) of them lost before they were read")
        forward.cancel()
        queue.lostBySource(source.kernelLost)
        let c = queue.counts
        print("storm accounting: \(c)")
        #expect(c.seen == source.edgesRead, "\(c)")
        #expect(c.seen == c.captured + c.failed + c.coalesced + c.dropped && queue.balanced, "\(c)")
        #expect(c.captured >= 1 && c.failed == 0, "\(c)")
        // Still responsive: the camera captures straight away after the storm.
        let after = MonotonicClock.now()
        let p = try await session.captureFrame(exposedAfter: after, timeout: .seconds(2))
        #expect(p.metadata.exposureStart! >= after)
        p.release()
        await session.stop()
    }

    @Test("each edge fires a capture from the simulated camera in real time: the chosen frame's exposure began after the edge, and the frame before it did not")
    func capturesAfterEdges() async throws {
        let pull = try pull()
        try "pull-down".write(toFile: pull, atomically: false, encoding: .utf8)
        let source = try GPIOTriggerSource(line: "shutter", edges: .rising)
        var o = SimulationOptions()
        o.clock = .realTime
        let cam = SimulatedCamera(profile: .imx477, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        // The observer first, so it sees every frame from the first.
        _ = try await session.prepare(streams: [StreamRequest(role: .viewfinder, width: 640, height: 480)], preparedBracketCount: 1)
        let frames = await session.frames(buffering: 4096)
        try await session.start()
        // Past the start-up frames before the first press.
        try await session.captureFrame(exposedAfter: MonotonicClock.now()).release()
        var queue = try TriggerQueue(policy: .queue, limit: 4)
        var photos: [(Trigger, FrameMetadata, asked: SensorTime)] = []
        let presses = 4
        let toggler = Task.detached {
            for _ in 0..<presses {
                try "pull-up".write(toFile: pull, atomically: false, encoding: .utf8)
                try await Task.sleep(for: .milliseconds(150))
                try "pull-down".write(toFile: pull, atomically: false, encoding: .utf8)
                try await Task.sleep(for: .milliseconds(150))
            }
        }
        for await t in source.triggers() {
            var actions = queue.arrived(t)
            while let a = actions.first {
                actions.removeFirst()
                guard case .capture(let trigger) = a else { continue }
                let asked = MonotonicClock.now()
                let p = try await session.captureFrame(exposedAfter: trigger.instant)
                photos.append((trigger, p.metadata, asked))
                p.release()
                actions += queue.finished(failed: false)
            }
            if queue.counts.seen == presses { break }
        }
        try await toggler.value
        source.stopAndWait()
        #expect(queue.counts.captured == presses && queue.balanced, "\(queue.counts)")
        var byFrame: [UInt32: FrameMetadata] = [:]
        let last = photos.map(\.1.sequence).max() ?? 0
        for await m in frames {
            byFrame[m.sequence] = m
            if m.sequence >= last { break }
        }
        await session.stop()
        for (t, m, asked) in photos {
            let lag = TriggerLag(trigger: t.instant, exposureStart: try #require(m.exposureStart))
            #expect(lag.toExposureStart >= .zero, "trigger \(t.sequence): exposure began \(lag.toExposureStart) after the edge")
            let previous = try #require(byFrame[m.sequence - 1], "frame before \(m.sequence)")
            // The first frame exposed after the edge that was still to come when the capture was
            // asked for: one whose readout began after the asking was never the session's to
            // miss. (One that came before it, on a machine slow to read the edge, was already
            // back in use: what a ring of recent frames, zero shutter lag, would keep.)
            #expect(previous.exposureStart! < t.instant || previous.sensorTimestamp! <= asked,
                    "trigger \(t.sequence): frame \(previous.sequence) also qualified, and was read out after the capture was asked for")
            // Shutter lag: at most the pipeline (the session's requests in flight) plus a frame.
            #expect(lag.toExposureStart < .milliseconds(250), "trigger \(t.sequence): lag \(lag.toExposureStart)")
        }
    }

    @Test("zero shutter lag from gpio-sim edges: each photo is the frame whose exposure covered the edge, taken from the frames held; where no frame did, the first exposed after, saying why")
    func zeroShutterLagEdges() async throws {
        let pull = try pull()
        try "pull-down".write(toFile: pull, atomically: false, encoding: .utf8)
        let source = try GPIOTriggerSource(line: "shutter", edges: .rising)
        var o = SimulationOptions()
        o.clock = .realTime
        // A dim scene: each exposure takes most of its frame, so most edges fall inside one.
        o.sceneLux = 5
        let cam = SimulatedCamera(profile: .imx219, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        _ = try await session.prepare(streams: [StreamRequest(role: .viewfinder, width: 640, height: 480)], preparedBracketCount: 1, holding: .frames(4))
        let frames = await session.frames(buffering: 4096)
        try await session.start()
        try await session.captureFrame(exposedAfter: MonotonicClock.now()).release()
        let presses = 6
        let toggler = Task.detached {
            for _ in 0..<presses {
                try "pull-up".write(toFile: pull, atomically: false, encoding: .utf8)
                try await Task.sleep(for: .milliseconds(170))
                try "pull-down".write(toFile: pull, atomically: false, encoding: .utf8)
                try await Task.sleep(for: .milliseconds(130))
            }
        }
        // The presses are paced by the toggler (edges 300 ms apart, as a button is pressed);
        // the captures they fire are waited for with a deadline.
        let photos = try await withDeadline(.seconds(60), "\(presses) zero-shutter-lag captures from gpio-sim edges") { () async throws -> [(Trigger, FrameMetadata, ZeroShutterLag?)] in
            var photos: [(Trigger, FrameMetadata, ZeroShutterLag?)] = []
            for await t in source.triggers() {
                var zsl: ZeroShutterLag?
                var frame: FrameMetadata?
                for try await e in await session.capture(PhotoSettings(trigger: t, zeroShutterLag: true)) {
                    switch e {
                    case .photo(let p): frame = p.metadata; p.release()
                    case .captureFinished(let r): zsl = r.zeroShutterLag
                    default: break
                    }
                }
                photos.append((t, try #require(frame, "trigger \(t.sequence): no photo"), zsl))
                if photos.count == presses { break }
            }
            return photos
        }
        try await toggler.value
        source.stopAndWait()
        var seen: [FrameMetadata] = []
        let last = photos.map(\.1.sequence).max() ?? 0
        for await m in frames {
            seen.append(m)
            if m.sequence >= last { break }
        }
        await session.stop()
        var covered = 0
        for (t, m, zsl) in photos {
            let z = try #require(zsl, "trigger \(t.sequence): no zero-shutter-lag report")
            if z.covered {
                covered += 1
                #expect(m.exposure(against: t.instant) == .covering, "trigger \(t.sequence): frame \(m.sequence) said to cover the edge")
            } else {
                #expect(m.exposed(after: t.instant) && z.fallback?.isEmpty == false, "trigger \(t.sequence): \(z)")
                // No complete frame the camera made covered the edge (one capture at a time, so
                // none was taken by another).
                let coveringFrames = seen.filter { $0.exposure(against: t.instant) == .covering }.map(\.sequence)
                #expect(coveringFrames.isEmpty, "trigger \(t.sequence): frames \(coveringFrames) covered the edge, yet frame \(m.sequence) was taken: \(z.fallback ?? "")")
            }
        }
        #expect(covered >= presses / 2, "\(covered) of \(presses) edges covered in a dim scene")
    }

    @Test("a debounced edge's instant is when the line settled, not when the kernel's debounce timer fired a period later")
    func debouncedInstant() async throws {
        let pull = try pull()
        try "pull-down".write(toFile: pull, atomically: false, encoding: .utf8)
        let period = Duration.milliseconds(100)
        let source = try GPIOTriggerSource(line: "shutter", edges: .rising, debounce: period)
        defer { source.stopAndWait() }
        let before = MonotonicClock.now()
        try "pull-up".write(toFile: pull, atomically: false, encoding: .utf8)
        defer { try? "pull-down".write(toFile: pull, atomically: false, encoding: .utf8) }
        let first = try await firstTrigger(of: source, within: .seconds(5))
        let t = try #require(first, "no edge within 5 s of pulling the line up")
        let stamped = t.instant + period - before
        print("debounce \(period.millisecondsDescription): the kernel stamped the edge \(stamped.millisecondsDescription) after the pull; the trigger's instant is \((t.instant - before).millisecondsDescription) after it")
        // The kernel stamps when its timer fires (a period after the change): taken as it is,
        // every debounced trigger would wait a period longer than the press asked for.
        // The debounce is a delayed work counted in whole jiffies from a jiffy already under
        // way, so it fires up to one kernel tick (4 ms at HZ=250, 10 ms at HZ=100) short of the
        // period: the instant may be that much before the pull, never more (seen: 4.11 ms).
        #expect(t.instant >= before - .milliseconds(10), "the instant is more than a kernel tick before the line changed")
        #expect(t.instant - before < period, "the instant is still a debounce period late")
    }

    @Test("a line whose chip goes away (gpio-sim deleted, as an overlay or a USB expander removed) ends the source with the reason, without spinning")
    func chipRemoved() async throws {
        let config = "/sys/kernel/config/gpio-sim/board-gone"
        let fm = FileManager.default
        try fm.createDirectory(atPath: config + "/bank0", withIntermediateDirectories: true)
        defer {
            try? "0".write(toFile: config + "/live", atomically: false, encoding: .utf8)
            rmdir(config + "/bank0")
            rmdir(config)
        }
        try "2".write(toFile: config + "/bank0/num_lines", atomically: false, encoding: .utf8)
        try "1".write(toFile: config + "/live", atomically: false, encoding: .utf8)
        let chip = try String(contentsOfFile: config + "/bank0/chip_name", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let source = try GPIOTriggerSource(line: "\(chip):0", edges: .both)
        #expect(source.failure == nil)
        let ended = Task { () -> Int in
            var n = 0
            for await _ in source.triggers() { n += 1 }
            return n
        }
        let cpuBefore = ProcessCPU.now()
        // Off this thread and with a deadline: a removal the kernel does not finish fails here,
        // saying so, instead of hanging the test.
        try await withDeadline(.seconds(10), "gpio-sim to remove the chip (0 written to \(config)/live)") {
            try await offPool { try "0".write(toFile: config + "/live", atomically: false, encoding: .utf8) }
        }
        let result = try await withDeadline(.seconds(5), "the source to end after its chip went away") { await ended.value }
        let cpu = ProcessCPU.now() - cpuBefore
        let failure = try #require(source.failure, "the source ended without saying why")
        print("chip removed: \(failure) (\(result) edges before; \(cpu.millisecondsDescription) CPU)")
        #expect(failure.message.contains("went away"))
        #expect(cpu < .seconds(1), "the reading thread spun")
        source.stopAndWait()
    }

    @Test("an output line (a busy LED) on gpio-sim: inactive when requested, active while any holder holds it, active-low inverted, inactive again when released")
    func busyLine() throws {
        let (chip, line0) = try BoardTests().simulatedChip()
        let value = line0.replacingOccurrences(of: "sim_gpio0", with: "sim_gpio1") + "/value"
        func level() throws -> String { try String(contentsOfFile: value, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines) }
        do {
            let busy = try GPIOOutputLine.request(line: "\(chip.name):1")
            #expect(try level() == "0")
            try busy.hold()
            #expect(try level() == "1")
            try busy.hold()
            try busy.release()
            #expect(try level() == "1", "still held by one capture")
            try busy.release()
            #expect(try level() == "0")
            try busy.release()
            #expect(try level() == "0", "a release too many changes nothing")
            #expect(busy.changes == 2)
        }
        let inverted = try GPIOOutputLine.request(line: "\(chip.name):1", activeLow: true)
        #expect(try level() == "1", "active-low: inactive is high")
        try inverted.hold()
        #expect(try level() == "0")
        try inverted.release()
        #expect(try level() == "1")
        #expect(throws: ShutterbugError.self) { try GPIOOutputLine.request(line: "\(chip.name):99") }
    }
}
}
