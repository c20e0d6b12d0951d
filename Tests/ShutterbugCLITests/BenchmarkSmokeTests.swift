import Foundation
import TestSupport
import Testing

/// Every benchmark, run at a tiny size, so none rots unseen (issue 49 item 15: `shutterbug-bench
/// timelapse` failed outright for a wave after a key it read was renamed). Each must exit 0 and
/// print what its full run prints: JSON lines that parse, with the keys its figures come from,
/// or its summary line. The figures themselves mean nothing at this size. One at a time: some
/// time themselves against a peer on the same cores. `serve-load` runs in the api tier (30 s)
/// and `preview` in the virtual board (it needs a display device).
@Suite("Benchmarks, tiny: each completes and its output parses", .serialized, .timeLimit(.minutes(5)))
struct BenchmarkSmokeTests {
    static var bench: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("shutterbug-bench").path
    }

    /// The JSON objects among the lines printed (a benchmark's --json output, one per line).
    static func objects(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    @Test("JSON benchmarks: each line an object with the keys its figures come from", arguments: [
        (["bracket", "--runs", "1", "--json"], ["schedulerFrames", "peerFrames", "schedulerTimeOverFloor"]),
        (["stream", "--frames", "4000", "--json"], ["cpuPerFrameSteadyUs", "rssRatio"]),
        (["timelapse", "--slots", "10", "--compare-slots", "10", "--json"], ["taken", "errorP99Us", "unlockedErrorP50Us"]),
        (["trigger", "--triggers", "10", "--restarts", "2", "--cameras", "sim:imx219", "--json"], ["oursP99Us", "restartP50Us"]),
        (["output", "--seconds", "0.5", "--rounds", "1", "--files", "1", "--json"], ["jpegOneThreadRatio"]),
        (["upload", "--megabytes", "8", "--slots", "10", "--write-slots", "5", "--json"], ["slotErrorRatioP50"]),
        (["soak", "--days", "0.2", "--json"], ["judgement", "slotsTaken", "rssEndKB"]),
    ])
    func json(args: [String], keys: [String]) async throws {
        let r = try await runChild(Self.bench, args)
        #expect(r.status == 0, "\(args): status \(r.status): \(r.err.suffix(2000))")
        let objects = Self.objects(r.out)
        #expect(!objects.isEmpty, "\(args): no JSON line in \(r.out.suffix(2000))")
        for key in keys {
            #expect(objects.contains { $0[key] != nil }, "\(args): no line has '\(key)': \(r.out.suffix(2000))")
        }
    }

    @Test("text benchmarks: each prints its summary", arguments: [
        (["precapture", "--seconds", "2", "--cameras", "sim:imx219"], "bursts/s"),
        (["client-wait", "--rounds", "1"], "URLSession/libcurl CPU"),
        (["fleet-scale", "--nodes", "10", "--small", "1", "--rounds", "5", "--flood", "10"], "ratio busy / idle"),
    ])
    func text(args: [String], says: String) async throws {
        let r = try await runChild(Self.bench, args)
        #expect(r.status == 0, "\(args): status \(r.status): \(r.err.suffix(2000))")
        #expect(r.out.contains(says), "\(args): \(r.out.suffix(2000))")
    }
}
