import Foundation
import Testing

/// `shutterbug doctor` run on this machine as a user would: no camera, no Pi, no root needed.
@Suite("shutterbug doctor", .timeLimit(.minutes(2)))
struct DoctorCLITests {
    @Test("--json is one object; its exit status is 1 exactly when a check is a problem; the libcamera line names the loaded library")
    func json() async throws {
        let r = try await CLITests.shutterbug("doctor", "--json", "--output", NSTemporaryDirectory())
        let o = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout) \(r.stderr)")
        let checks = try #require(o["checks"] as? [[String: Any]])
        let names = checks.compactMap { $0["name"] as? String }
        for name in ["libcamera", "cameras", "cma", "dma-heap", "groups", "gpio", "disk", "clock", "service"] {
            #expect(names.contains(name), "no \(name) check in \(names)")
        }
        let problems = checks.filter { $0["status"] as? String == "problem" }.count
        #expect(o["problems"] as? Int == problems)
        #expect(r.status == (problems > 0 ? 1 : 0), "\(r.stdout)")
        // The library really loaded, by what it calls itself, against the headers built with.
        let version = try #require(o["libcamera"] as? String)
        #expect(version.hasPrefix("v0.") || version.hasPrefix("0."), "\(version)")
        #expect(o["compiledAgainst"] as? String != nil)
        #expect(checks.allSatisfy { ["ok", "warning", "problem", "unknown"].contains($0["status"] as? String ?? "") })
    }

    @Test("the text form: a line a check with its status first, fixes under them, and the count last")
    func text() async throws {
        let r = try await CLITests.shutterbug("doctor", "--output", "/nonexistent/deep/folder")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.last?.contains("problem") == true && lines.last?.contains("warning") == true, "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("ok ") || $0.hasPrefix("warning ") || $0.hasPrefix("problem ") })
        // The output folder does not exist: the free space of the nearest folder that does.
        #expect(lines.contains { $0.contains("disk") && $0.contains("/nonexistent/deep/folder") }, "\(r.stdout)")
    }

    @Test("an unknown option is refused with usage, not a crash")
    func badOption() async throws {
        let r = try await CLITests.shutterbug("doctor", "--jsn")
        #expect(r.status == 64)
        #expect(r.stderr.contains("--jsn"), "\(r.stderr)")
    }
}
