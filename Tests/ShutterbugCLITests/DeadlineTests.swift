import Foundation
import Testing
import TestSupport

@Suite("withDeadline: every wait in a test ends by its deadline, saying what it waited for")
struct DeadlineTests {
    @Test("a body that ignores cancellation (blocked until released) still fails at the deadline: withDeadline returns while the body is still blocked")
    func blockingBody() async throws {
        let gate = DispatchSemaphore(value: 0)
        let safety = Flag()
        // Only so that a withDeadline that waits for its body cannot hang the run: released
        // after 120 s, and then the test fails below.
        let release = Task {
            try? await Task.sleep(for: .seconds(120))
            safety.set()
            gate.signal()
        }
        do {
            _ = try await withDeadline(.milliseconds(200), "a call blocked until released") {
                try await offPool { gate.wait(); return 1 }
            }
            Issue.record("the deadline did not fire")
        } catch let e as DeadlineExceeded {
            #expect(e.description.contains("a call blocked until released"))
        }
        #expect(!safety.isSet, "withDeadline returned only when the blocked body was released")
        release.cancel()
        gate.signal()
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

private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.lock(); value = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
}
