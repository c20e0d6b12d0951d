import ProcessTriggers
import ShutterbugCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Process trigger sources: a signal and a line on standard input", .timeLimit(.minutes(1)))
struct ProcessTriggerTests {
    @Test("each SIGUSR2 sent to the process is one trigger, numbered, at an instant between raising and reading")
    func signal() async throws {
        let source = try SignalTriggerSource(signal: SIGUSR2, name: "SIGUSR2")
        let stream = source.triggers()
        let before = MonotonicClock.now()
        // One at a time: a standard signal sent again before the first is handled merges
        // with it (POSIX), so the next is sent once the previous trigger is read.
        var got: [Trigger] = []
        var iterator = stream.makeAsyncIterator()
        for _ in 0..<3 {
            kill(getpid(), SIGUSR2)
            if let t = await iterator.next() { got.append(t) }
        }
        let after = MonotonicClock.now()
        source.stop()
        #expect(got.map(\.sequence) == [1, 2, 3])
        #expect(got.allSatisfy { $0.instant >= before && $0.instant <= after && $0.source == "SIGUSR2" })
    }

    @Test("each newline on the input is one trigger; the end of input ends the sequence")
    func keypress() async throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        let source = try KeypressTriggerSource(input: fds[0])
        let stream = source.triggers()
        let before = MonotonicClock.now()
        _ = "\nshoot\n\n".withCString { write(fds[1], $0, 8) }
        close(fds[1])
        var got: [Trigger] = []
        for await t in stream { got.append(t) }
        close(fds[0])
        #expect(got.map(\.sequence) == [1, 2, 3])
        #expect(got.allSatisfy { $0.instant >= before })
    }
}
