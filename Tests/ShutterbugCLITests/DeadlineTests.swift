import Foundation
import Testing
import TestSupport

@Suite("withDeadline: every wait in a test ends by its deadline, saying what it waited for")
struct DeadlineTests {
    @Test("a body that ignores cancellation (a blocking call) still fails at the deadline, not when it returns")
    func blockingBody() async throws {
        let began = ContinuousClock.now
        do {
            _ = try await withDeadline(.milliseconds(200), "a call that blocks for 3 s") {
                try await offPool { usleep(3_000_000); return 1 }
            }
            Issue.record("the deadline did not fire")
        } catch let e as DeadlineExceeded {
            #expect(e.description.contains("a call that blocks for 3 s"))
        }
        #expect(ContinuousClock.now - began < .milliseconds(2500), "returned at the deadline, not after the 3 s call")
    }

    @Test("a body that finishes in time gives its value; orNil turns running out into nil")
    func inTime() async throws {
        let v = try await withDeadline(.seconds(30), "a quick answer") { 42 }
        #expect(v == 42)
        let none: Int? = try await withDeadline(.milliseconds(50), "nothing", orNil: true) { () async throws -> Int? in
            try await Task.sleep(for: .seconds(30))
            return 1
        }
        #expect(none == nil)
    }
}
