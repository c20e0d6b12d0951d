import ArgumentParser
import Foundation

/// A `shutterbug serve` the benchmarks start and talk to: its process and the address it said
/// it serves at (it listens on a free port and says which in its log).
struct BenchService {
    let process: Process
    let base: String

    /// Starts `exe serve …arguments` and waits for its "serving http://…/" line; its log is
    /// drained from then on, so it never blocks on a full pipe.
    static func start(_ exe: String, _ arguments: [String]) throws -> BenchService {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = ["serve"] + arguments
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        var text = ""
        while !text.contains("serving ") || !text.hasSuffix("\n") {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let r = text.range(of: #"http://127\.0\.0\.1:\d+/"#, options: .regularExpression) else {
            p.terminate()
            throw ValidationError("the service did not start: \(text)")
        }
        let drain = Thread { while !err.fileHandleForReading.availableData.isEmpty {} }
        drain.start()
        return BenchService(process: p, base: String(text[r]))
    }

    /// SIGTERM, and its exit status once it has gone.
    func stop() -> Int32 {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        return process.terminationStatus
    }
}
