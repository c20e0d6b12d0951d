import Capture
import ShutterbugCore
import ShutterbugPosix
import SimulatedCamera
import Testing

@Suite("Buffers sized to memory", .timeLimit(.minutes(2)))
struct MemoryBudgetTests {
    @Test("a configuration over the budget is refused before anything is allocated, with the bytes it needs and the budget")
    func overBudget() async throws {
        var o = SimulationOptions()
        o.clock = .virtual
        let cam = SimulatedCamera(profile: .imx477, options: o)
        defer { cam.release() }
        let session = CaptureSession(backend: cam, memoryBudget: MemoryBudget(bytes: 300 << 20, source: "a test pool"))
        // A 12 MP still and raw pair for a 9-step bracket: 13 buffers each, about 460 MB.
        await #expect {
            try await session.prepare(streams: [StreamRequest(role: .still), StreamRequest(role: .raw)], preparedBracketCount: 9)
        } throws: { e in
            let text = "\(e)"
            return text.contains("13 × 17.8 MB still + 13 × 17.8 MB raw = 463 MB") && text.contains("300 MB (a test pool)")
        }
        #expect(await session.slotLedger.slots == 0, "nothing was allocated")
        // What fits is taken, and says what it takes.
        let config = try await session.prepare(streams: [StreamRequest(role: .still), StreamRequest(role: .raw)], preparedBracketCount: 3)
        #expect(config.bufferBytes == config.streams.reduce(0) { $0 + $1.frameSize * 7 })
        #expect(config.bufferBytes < 300 << 20)
    }

    @Test("the system budget comes from the environment, else the CMA pool, else available memory")
    func systemBudget() throws {
        let forced = MemoryBudget.system(environment: ["SHUTTERBUG_MEMORY_BUDGET_MB": "256"])
        #expect(forced.bytes == 256 << 20 && forced.source == "SHUTTERBUG_MEMORY_BUDGET_MB")
        #expect(MemoryBudget.environmentProblem(environment: ["SHUTTERBUG_MEMORY_BUDGET_MB": "256"]) == nil)
        let bad = MemoryBudget.system(environment: ["SHUTTERBUG_MEMORY_BUDGET_MB": "lots"])
        #expect(bad.source != "SHUTTERBUG_MEMORY_BUDGET_MB", "an unusable value is ignored")
        let problem = try #require(MemoryBudget.environmentProblem(environment: ["SHUTTERBUG_MEMORY_BUDGET_MB": "-5"]))
        #expect(problem.contains("1...1048576") && problem.contains("'-5'") && problem.contains("ignored"))
        // The pool's budget is read and checked the same way.
        #expect(MemoryBudget.pool(environment: ["SHUTTERBUG_POOL_BUDGET_MB": "64"]).bytes == 64 << 20)
        #expect(MemoryBudget.pool(environment: ["SHUTTERBUG_POOL_BUDGET_MB": "nan"]).source != "SHUTTERBUG_POOL_BUDGET_MB")
        let pool = try #require(MemoryBudget.environmentProblem(environment: ["SHUTTERBUG_POOL_BUDGET_MB": "0"]), "an unusable pool budget is said, not silently ignored")
        #expect(pool.contains("SHUTTERBUG_POOL_BUDGET_MB") && pool.contains("'0'") && pool.contains("available"), "\(pool)")
        let machine = MemoryBudget.system(environment: [:])
        #expect(machine.bytes > 0)
        #expect(machine.source.contains("CMA") || machine.source.contains("available"), "\(machine)")
    }
}
