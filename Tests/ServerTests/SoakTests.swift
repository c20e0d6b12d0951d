import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import Server
import ShutterbugCore
import SimulatedCamera
import TestSupport
import Testing

/// Issue 49: the service as a whole over a simulated day, judged by what it leaves. A timelapse
/// job of EV brackets runs while the API asks, at random (seeded), for photos, EV brackets and
/// manual brackets, as the light goes from day to dusk and back. Then only the output folder is
/// read: every photo's pixels (djpeg, not our code) and every sidecar against its files.
///
/// The rule that caught the worst drift (auto exposure never coming back after a bracket): a
/// photo at 0 EV, taken by auto exposure, is as bright as auto exposure makes any scene, within
/// 1/3 EV, whatever was captured before it.
@Suite("Soak: the service over a simulated day, judged by its photos", .serialized, .timeLimit(.minutes(8)))
struct SoakTests {
    /// Mean linear light (the sRGB curve undone) of a JPEG's luma, decoded by libjpeg-turbo's
    /// djpeg to a greyscale PGM.
    static func meanLinear(_ jpeg: String) async throws -> Double {
        let r = try await runChild("/usr/bin/djpeg", ["-grayscale", "-pnm", jpeg])
        try #require(r.status == 0, "djpeg \(jpeg): \(r.err)")
        // P5\n<w> <h>\n255\n then the samples.
        let bytes = [UInt8](r.stdout)
        var newlines = 0, start = 0
        for (i, b) in bytes.enumerated() where b == 10 {
            newlines += 1
            if newlines == 3 { start = i + 1; break }
        }
        var table = [Double](repeating: 0, count: 256)
        for v in 0..<256 {
            let c = Double(v) / 255
            table[v] = c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4)
        }
        var sum = 0.0
        for b in bytes[start...] { sum += table[Int(b)] }
        return sum / Double(bytes.count - start)
    }

    /// Every capture's sidecar under `dir`: its path and its JSON.
    static func sidecars(_ dir: String) throws -> [(path: String, json: [String: Any])] {
        let e = try #require(FileManager.default.enumerator(atPath: dir))
        var out: [(String, [String: Any])] = []
        while let f = e.nextObject() as? String {
            guard f.hasSuffix("_capture.json") else { continue }
            let data = try Data(contentsOf: URL(fileURLWithPath: dir + "/" + f))
            out.append((dir + "/" + f, try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(f)")))
        }
        return out.sorted { $0.0 < $1.0 }
    }

    @Test("a simulated day of API photos and brackets beside a timelapse of EV brackets: every 0 EV photo within 1/3 EV of auto exposure's brightness, brackets stepping by their EV, every file its sidecar lists whole and none that none lists")
    func day() async throws {
        // Dusk and dawn within auto exposure's reach (it is judged, not its limits): 4,000 lux
        // to 40 and back over 20 minutes of the camera's clock.
        try await withSimulatedService(configure: {
            $0.seed = 49
            $0.sceneSchedule = .dayNight(period: 1200, day: 4000, night: 40)
        }) { service, dir, access in
            let app = Application(router: HTTPAPI.router(service, access: access))
            let start = ISO8601DateFormatter().string(from: Date().addingTimeInterval(2))
            let slots = 36
            try await app.test(.router) { client in
                let job = #"{"name": "roof", "options": {"interval": "30s", "count": \#(slots), "ev": [-1, 0, 1], "start": "\#(start)"}}"#
                try await client.execute(uri: "/api/jobs", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: job)) { r in
                    #expect(r.status == .created, "\(String(buffer: r.body))")
                }
                var rng = SplitMix64(seed: 49)
                var asked: [String: Int] = [:]
                var lastDone = -1
                // At each slot the job takes, one or two API captures at random.
                while true {
                    let done = lastDone
                    let status = try await withDeadline(.seconds(120), "the job's next slot") { () -> JobStatus? in
                        while true {
                            if let s = await service.jobStatuses().first(where: { $0.name == "roof" }),
                               s.taken + s.skipped + s.failed + s.missed != done || s.state == .finished || s.state == .failed {
                                return s
                            }
                            try await Task.sleep(for: .milliseconds(5))
                        }
                    }
                    guard let status else { break }
                    lastDone = status.taken + status.skipped + status.failed + status.missed
                    if status.state == .finished || status.state == .failed { break }
                    for _ in 0..<(1 + Int(rng.next() % 2)) {
                        let (kind, body): (String, String) = switch rng.next() % 4 {
                        case 0: ("photo", "{}")
                        case 1: ("EV bracket", #"{"ev": [-2, 0, 2]}"#)
                        case 2: ("manual bracket", #"{"exposuresUs": [500, 60000], "gain": 4}"#)
                        default: ("photo", "{}")
                        }
                        asked[kind, default: 0] += 1
                        try await client.execute(uri: "/api/capture", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: body)) { r in
                            #expect(r.status == .created, "\(kind): \(r.status) \(String(buffer: r.body))")
                        }
                    }
                }
                let final = try #require(await service.jobStatuses().first { $0.name == "roof" })
                #expect(final.state == .finished && final.taken == slots, "the job: \(final.state) \(final.taken) of \(slots) taken")
                #expect((asked["photo"] ?? 0) >= 5 && (asked["EV bracket"] ?? 0) >= 3 && (asked["manual bracket"] ?? 0) >= 3, "\(asked)")
            }

            // The judge: the folder only.
            var listed: Set<String> = []
            var zeroEV: [(path: String, mean: Double, when: Double)] = []
            var evSteps: [[Double]] = []
            var problems: [String] = []
            for (path, car) in try Self.sidecars(dir) {
                let folder = (path as NSString).deletingLastPathComponent
                let steps = car["steps"] as? [[String: Any]] ?? []
                if car["incomplete"] != nil { problems.append("\(path): incomplete \(car["incomplete"]!)") }
                for step in steps {
                    let files = (step["files"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }.map { folder + "/" + $0 }
                    for f in files {
                        listed.insert((f as NSString).standardizingPath)
                        if !FileManager.default.fileExists(atPath: f) { problems.append("\(path) lists \(f), not on disk") }
                    }
                }
                // The job's own photos follow its exposure ramp (not auto exposure): judged by
                // the journal below. The API's are judged here.
                guard !path.contains("/roof/") else { continue }
                let requested = steps.map { $0["requested"] as? String ?? "" }
                let totals = steps.map { s -> Double in
                    let f = s["frame"] as? [String: Any] ?? [:]
                    return (f["exposureTimeUs"] as? Double ?? 0) * (f["analogueGain"] as? Double ?? 0) * (f["digitalGain"] as? Double ?? 1)
                }
                for (i, r) in requested.enumerated() where r == "+0.0 EV" || r == "the settings in force" {
                    guard let jpeg = (steps[i]["files"] as? [[String: Any]] ?? []).compactMap({ $0["path"] as? String }).first(where: { $0.hasSuffix(".jpg") }) else { continue }
                    let start = (steps[i]["frame"] as? [String: Any])?["exposureStartNs"] as? Double ?? 0
                    zeroEV.append((path, try await Self.meanLinear(folder + "/" + jpeg), start / 1e9))
                }
                if requested == ["-2.0 EV", "+0.0 EV", "+2.0 EV"] { evSteps.append(totals) }
            }
            // Nothing on disk that no sidecar lists (the journal and keogram aside).
            let e = try #require(FileManager.default.enumerator(atPath: dir))
            while let f = e.nextObject() as? String {
                let full = ((dir + "/" + f) as NSString).standardizingPath
                // A job's contact sheet is its own picture of its slots, not a capture.
                guard f.hasSuffix(".jpg") || f.hasSuffix(".dng"), !f.hasSuffix("contact-sheet.jpg") else { continue }
                if !listed.contains(full) { problems.append("\(f): on disk, in no sidecar") }
            }
            #expect(problems.isEmpty, "\(problems.prefix(20))")

            // Every 0 EV photo as bright as auto exposure makes the scene: the median of them is
            // the reference (one drifting photo cannot move it), each within 1/3 EV.
            try #require(zeroEV.count >= 8, "too few 0 EV photos to judge: \(zeroEV.count)")
            let reference = zeroEV.map(\.mean).sorted()[zeroEV.count / 2]
            let wrong = zeroEV.filter { abs(log2($0.mean / reference)) > 1.0 / 3 }
            #expect(wrong.isEmpty, "\(wrong.count) of \(zeroEV.count) 0 EV photos off auto exposure's brightness (\(reference)) by more than 1/3 EV: \(wrong.map { "\(($0.path as NSString).lastPathComponent) \(String(format: "%.4f", $0.mean)) (\(String(format: "%+.2f", log2($0.mean / reference))) EV)" })")
            // EV brackets step by 2 EV in what each frame carried.
            for t in evSteps {
                #expect(abs(log2(t[1] / t[0]) - 2) < 0.15 && abs(log2(t[2] / t[1]) - 2) < 0.15, "EV bracket totals \(t)")
            }
            #expect(evSteps.count >= 3, "\(evSteps.count) EV brackets judged")
        }
    }
}
