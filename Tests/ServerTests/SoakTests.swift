import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import Server
import ShutterbugCore
import SimulatedCamera
import Soak
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

            // The judge: the folder only (the bench's soak judges the same way).
            let j = try SoakJudgement.judge(dir, jobFolders: ["roof"])
            #expect(j.incomplete.isEmpty && j.missing.isEmpty && j.orphans.isEmpty && j.temporaries.isEmpty,
                    "incomplete \(j.incomplete), missing \(j.missing), orphans \(j.orphans), temporaries \(j.temporaries)")
            // Every 0 EV photo as bright as auto exposure makes the scene: the median of them is
            // the reference (one drifting photo cannot move it), each within 1/3 EV.
            try #require(j.zeroEVJudged >= 8, "too few 0 EV photos to judge: \(j.zeroEVJudged)")
            #expect(j.zeroEVWrong.isEmpty, "\(j.zeroEVWrong.count) of \(j.zeroEVJudged) 0 EV photos more than 1/3 EV off auto exposure's brightness (\(j.zeroEVReference)): \(j.zeroEVWrong)")
            // EV brackets step by 2 EV in what each frame carried.
            #expect(j.evBracketsJudged >= 3 && j.evBracketsWrong.isEmpty, "\(j.evBracketsJudged) EV brackets judged; wrong: \(j.evBracketsWrong)")
        }
    }
}
