import ArgumentParser
import CaptureScheduler
import Foundation
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

struct BenchTimelapse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timelapse",
        abstract: "A timelapse job as it runs: the slot-to-exposure error, CPU per slot, and resident memory over the run.",
        discussion: """
            Runs `shutterbug timelapse` (the binary beside this one) on the simulated camera in \
            virtual time: --slots slots of a 3-shot EV bracket, JPEG at the sensor's smallest \
            mode, a scene ramping from day to night and back over the run. Samples the child's \
            CPU time and resident memory from /proc as its slots are reported, and prints \
            them per slot at the 10% mark and at the end (resident memory should stay flat), \
            with the schedule error (exposure start of each slot's first frame minus the slot's \
            instant): p50, p99, max. Without phase locking the error is up to a frame period \
            plus the pipeline's landing.
            """)

    @Option(name: .long, help: "Slots to run (100...1000000).")
    var slots: Int = 10_000

    @Option(name: .long, help: ArgumentHelp("Simulated camera profile.", valueName: "sim:MODEL"))
    var camera: String = "sim:imx477"

    @Flag(name: .long, help: "One JSON object instead of the table.")
    var json = false

    func validate() throws {
        guard (100...1_000_000).contains(slots) else { throw ValidationError("--slots must be in 100...1000000, not \(slots)") }
    }

    /// utime + stime (clock ticks) and VmRSS (kB) of a process.
    static func sample(_ pid: Int32) -> (cpu: Duration, rss: Int)? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        // Fields after the command name, which is in parentheses and may hold spaces.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let u = Int(fields[11]), let s = Int(fields[12]) else { return nil }
        let ticks = Int(sysconf(Int32(_SC_CLK_TCK)))
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        return (.milliseconds((u + s) * 1000 / ticks), rss)
    }

    func run() async throws {
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("shutterbug").path
        guard FileManager.default.isExecutableFile(atPath: exe) else {
            throw ValidationError("needs the shutterbug binary beside this one (\(exe)): build it with `swift build` first")
        }
        let dir = NSTemporaryDirectory() + "sb-bench-timelapse-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A day over the run at 10 s per slot: 100,000 lux to 0.01 and back.
        let period = slots * 10
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = ["timelapse", "--camera", camera, "--virtual-time", "--size", "640x480", "--interval", "10s", "--ev", "-1,0,1",
                       "--count", String(slots), "--scene-schedule", "daynight:\(period)s", "--output", dir, "--json"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        let began = Date()
        try p.run()
        let tenth = max(1, slots / 10)
        var marks: [(slot: Int, cpu: Duration, rss: Int)] = []
        var errors: [Duration] = []
        var taken = 0, other = 0
        var pending = Data()
        let handle = out.fileHandleForReading
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let nl = pending.firstIndex(of: 10) {
                let line = pending[pending.startIndex..<nl]
                pending.removeSubrange(pending.startIndex...nl)
                guard let o = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any], let slot = o["slot"] as? Int else { continue }
                if o["state"] as? String == "taken" { taken += 1 } else { other += 1 }
                if let e = o["errorUs"] as? Double { errors.append(.nanoseconds(Int64(e * 1000))) }
                if slot + 1 == tenth || slot + 1 == slots, let s = Self.sample(p.processIdentifier) { marks.append((slot + 1, s.cpu, s.rss)) }
            }
        }
        p.waitUntilExit()
        let seconds = Date().timeIntervalSince(began)
        guard marks.count == 2, let d = LagDistribution(errors) else {
            throw ValidationError("the timelapse ended early (status \(p.terminationStatus), \(taken) slots taken)")
        }
        let perSlotFirst = marks[0].cpu / marks[0].slot
        let perSlotRest = (marks[1].cpu - marks[0].cpu) / (marks[1].slot - marks[0].slot)
        let rssRatio = Double(marks[1].rss) / Double(max(marks[0].rss, 1))
        if json {
            var o = JSONObject()
            o.add("slots", slots)
            o.add("taken", taken)
            o.add("notTaken", other)
            o.add("wallSeconds", seconds)
            o.add("errorP50Us", d.p50.microsecondsValue)
            o.add("errorP99Us", d.p99.microsecondsValue)
            o.add("errorMaxUs", d.max.microsecondsValue)
            o.add("cpuPerSlotFirstTenthMs", perSlotFirst.microsecondsValue / 1000)
            o.add("cpuPerSlotRestMs", perSlotRest.microsecondsValue / 1000)
            o.add("rssAtTenthKB", marks[0].rss)
            o.add("rssAtEndKB", marks[1].rss)
            o.add("rssRatio", rssRatio)
            print(o.text)
            return
        }
        print("bench timelapse: \(slots) slots of a 3-shot bracket from \(camera) in virtual time, 10 s apart, a day from 100,000 lux to 0.01 and back; \(String(format2: seconds)) s")
        print("  slots taken: \(taken), not taken: \(other)")
        print("  slot to exposure start: p50 \(d.p50.preciseDescription), p99 \(d.p99.preciseDescription), max \(d.max.preciseDescription) (no phase locking)")
        print("  CPU per slot: first \(marks[0].slot) slots \(String(format2: perSlotFirst.microsecondsValue / 1000)) ms, slots \(marks[0].slot + 1)-\(marks[1].slot) \(String(format2: perSlotRest.microsecondsValue / 1000)) ms")
        print("  resident memory: \(marks[0].rss / 1024) MiB at slot \(marks[0].slot), \(marks[1].rss / 1024) MiB at slot \(marks[1].slot) (ratio \(String(format2: rssRatio)))")
    }
}
