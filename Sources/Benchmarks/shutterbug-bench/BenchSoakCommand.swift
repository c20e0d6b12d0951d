import ArgumentParser
import Foundation
import JobOptions
import ShutterbugCore
import Soak

struct BenchSoak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "The service over simulated days, judged by the photos it leaves: captures by kind, photos judged, wrong exposures, lost or orphan files, memory and descriptors.",
        discussion: """
            In process, on the simulated HQ camera in virtual time: a timelapse job of -1/0/+1 EV \
            brackets (--slots-per-day a day) and, at each slot, one or two captures asked of the \
            service at random (a photo, a -2/0/+2 EV bracket, a manual bracket at 0.5 ms and 60 ms, \
            gain 4), while the light goes from 4,000 lux to 40 and back each simulated day (a \
            day is --day-length of the camera's clock). Then the folder alone is judged: every \
            file each sidecar lists on disk, no photo none lists, no temporary file; every 0 EV \
            photo by auto exposure (decoded by djpeg) within 1/3 EV of the median of them; every \
            EV bracket stepping by 2 EV in what its frames carried. A second job takes manual DNG+JPEG \
            brackets (24 MB kept). As root the folder is a tmpfs of its own, filled to the last byte \
            for a tenth of the run a third of the way in (--no-full-disk leaves it out). Every file \
            is sent to SeaweedFS (when board/setup-host.sh installed it), which is killed for a \
            tenth of the run two thirds of the way in: then every capture file on disk must be in \
            the bucket whole and every object one the upload journal sent. A third of the asks go \
            over MQTT to the service as a fleet node on a Mosquitto broker of its own, which is \
            killed for a tenth of the run half-way (its asks then go to the API). Exits 1 when \
            anything is wrong.
            """)

    @Option(name: .long, help: "Simulated days (0.1...365).")
    var days: Double = 7

    @Option(name: .long, help: ArgumentHelp("The camera's clock per simulated day (the light's cycle): 60s...24h.", valueName: "time"))
    var dayLength: String = "20m"

    @Option(name: .long, help: "Timelapse slots a day (4...1440).")
    var slotsPerDay: Int = 36

    @Option(name: .long, help: "Seed of the captures' kinds and of the camera.")
    var seed: UInt64 = 49

    @Option(name: .long, help: ArgumentHelp("Directory for the files (created, and left to read; without it a temporary one, removed).", valueName: "dir"))
    var dir: String?

    @Flag(name: .long, help: "Leave out the full disk (as root the soak's folder is a tmpfs of its own, filled to the last byte for a while).")
    var noFullDisk = false

    @Flag(name: .long, help: "One JSON object instead of the table.")
    var json = false

    func length() throws -> Duration { try NumericInput.period(dayLength, "--day-length", in: 60...86_400) }

    func validate() throws {
        guard days.isFinite, (0.1...365).contains(days) else { throw ValidationError("--days must be in 0.1...365, not \(days)") }
        guard (4...1440).contains(slotsPerDay) else { throw ValidationError("--slots-per-day must be in 4...1440, not \(slotsPerDay)") }
        _ = try length()
    }

    func run() async throws {
        let folder = dir ?? NSTemporaryDirectory() + "sb-bench-soak-\(getpid())"
        // A folder of the caller's is left to read; our own is removed.
        defer { if dir == nil { try? FileManager.default.removeItem(atPath: folder) } }
        var scenario = SoakScenario(days: days, dayLength: try length(), slotsPerDay: slotsPerDay, seed: seed, fullDisk: !noFullDisk)
        scenario.keepFiles = dir != nil
        let r = try await scenario.run(in: folder, progress: { line in if !json { print("  " + line) } })
        let j = r.judgement
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(r), as: UTF8.self))
        } else {
            print("soak: \(String(format2: r.days)) simulated days in \(String(format2: r.wallSeconds)) s")
            print("  captures asked: \(r.photos) photos, \(r.evBrackets) EV brackets, \(r.manualBrackets) manual brackets; \(r.capturesFailed.count) failed")
            print("  timelapse: \(r.slotsTaken) of \(r.slots) slots taken, \(r.slotsSkipped) skipped, \(r.slotsMissed) missed, \(r.slotsFailed) failed\(r.jobMessage.map { " (\($0))" } ?? "")")
            print("  manual DNG+JPEG job (24 MB kept): \(r.manualTaken) of \(r.manualSlots) slots taken, \(r.manualSkipped) skipped, \(r.manualMissed) missed, \(r.manualFailed) failed\(r.manualMessage.map { " (\($0))" } ?? "")")
            print("  full disk: \(r.fullDisk); \(r.refusedForSpace) captures refused for want of space meanwhile, \(r.capturesAfterFullDisk) API captures after it")
            print("  uploads: \(r.uploads); \(r.uploadsDone) of \(r.uploadsQueued) files uploaded, \(r.uploadsFailed.count) failed, \(r.notUploaded.count) on disk and not in the bucket whole, \(r.bucketStrays.count) objects the journal does not account for")
            print("  MQTT: \(r.mqtt.isEmpty ? "up all along" : r.mqtt); \(r.mqttCaptures) captures answered over it, \(r.mqttAskedWhileDown) asked while the broker was away (sent to the API)\(r.mqttBackAfterSeconds.map { String(format: "; the node answered %.1f s after the broker's return", $0) } ?? "")")
            print("  triggers (zero shutter lag, and bursts around the trigger): \(r.triggerCaptures) captured, \(r.triggerFailures) failed, \(r.triggerDropped) dropped as busy")
            print("  faults: 1% of frames dropped, \(r.stalls) stalls of 0.9 s; reload: \(r.reload.joined(separator: ", "))")
            print("  judged: \(j.captures) captures, \(j.zeroEVJudged) photos at 0 EV (\(j.zeroEVWrong.count) wrong by more than 1/3 EV), \(j.evBracketsJudged) EV brackets (\(j.evBracketsWrong.count) wrong)")
            print("  journals: \(j.journalMissing.count) files listed and missing; slots failed: \(j.slotsFailedForSpace) for want of space, \(j.slotsFailedOther.count) for anything else; \(j.slotsSkippedOther.count) skipped for anything but space (late: other captures held the camera)")
            print("  files: \(j.missing.count) listed and missing, \(j.orphans.count) orphan, \(j.incomplete.count) incomplete, \(j.temporaries.count) temporary")
            print("  resident memory \(r.rssStartKB) kB → \(r.rssEndKB) kB\(r.rssByDayKB.isEmpty ? "" : " (at each day's end: " + r.rssByDayKB.map { "\($0 / 1024) MB" }.joined(separator: ", ") + ")"), descriptors \(r.fdsStart) → \(r.fdsEnd)")
            if dir != nil, r.fullDisk.hasPrefix("filled") { print("  the folder is the soak's tmpfs, left mounted to read: umount \(folder) when done") }
            for line in (r.capturesFailed + j.zeroEVWrong + j.evBracketsWrong + j.missing + j.orphans + j.incomplete + j.journalMissing + j.slotsFailedOther + r.uploadsFailed + r.notUploaded + r.bucketStrays).prefix(20) { print("  ! " + line) }
        }
        // A slot may be skipped as late when other captures hold the camera at its instant (the
        // job then cannot begin on time, and says so; each job holds the camera's clock at its
        // wake, so it is never asleep past it); none may fail or go missing. A full disk may refuse what is asked while it lasts (for want of space, and nothing
        // else), and what comes after it must be captured again.
        let recovered = !r.fullDisk.hasPrefix("filled") || r.capturesAfterFullDisk > 0
        // Memory and descriptors flat: a few descriptors of the uploader's and the broker's
        // connections at most, and the last day's memory within half again of the first day's
        // (the caches, pools and allocator's arenas fill on the first day and level off).
        let flat = r.fdsEnd <= r.fdsStart + 8 && (r.rssByDayKB.first.map { first in r.rssByDayKB.allSatisfy { $0 <= first * 3 / 2 } } ?? true)
        if !flat { FileHandle.standardError.write("soak: not flat: descriptors \(r.fdsStart) → \(r.fdsEnd), memory at each day's end \(r.rssByDayKB) kB\n".data(using: .utf8)!) }
        // A slot may fail only for want of space (the disk filled under it), as its journal says.
        guard j.ok, flat, r.capturesFailed.isEmpty, r.triggerFailures == 0, r.slotsFailed + r.manualFailed == j.slotsFailedForSpace, r.slotsMissed == 0,
              r.slotsTaken + r.slotsSkipped + r.slotsFailed == r.slots, r.manualMissed == 0, r.manualTaken > 0 || r.manualSlots < 6, recovered,
              r.uploadsFailed.isEmpty, r.notUploaded.isEmpty, r.bucketStrays.isEmpty,
              r.mqtt.hasPrefix("not") || r.mqttCaptures > 0 || r.slots < 6 else { throw ExitCode(1) }
    }
}
