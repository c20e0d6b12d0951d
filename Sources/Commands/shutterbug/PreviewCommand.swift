import ArgumentParser
import JobOptions
import Capture
import KMS
import ProcessTriggers
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

struct Preview: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the camera on a display until interrupted (or for --duration / --frames).",
        discussion: """
            The camera streams a viewfinder (XRGB8888 at the largest size of the sensor's aspect \
            that fits the display's mode) and each frame is imported into the display with no \
            copy where the plane can show it, else converted into dumb buffers. Commits are \
            atomic and non-blocking; frames that come while a flip is pending are dropped and \
            counted. The display is put back as it was on exit.
            """)

    @OptionGroup var camera: CameraOptions

    @Option(name: .long, help: ArgumentHelp("The display: auto (the first connected one) or CARD[:CONNECTOR] (card0, card0:HDMI-A-1, :Virtual-1).", valueName: "auto|card"))
    var display: String = "auto"

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Stop after this many seconds (0.1...86400).", valueName: "s"))
    var duration: Double?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Stop after this many camera frames (1...10000000).", valueName: "n"))
    var frames: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Testing: read each page-flip event this many milliseconds late, as a slow display would (0...1000).", valueName: "ms"))
    var eventDelay: Double = 0

    @Flag(name: .long, help: "Print one JSON object at the end.")
    var json = false

    func validate() throws {
        do {
            let choice = try PreviewChoice(parsing: display)
            if choice == .off { throw ValidationError("--display off leaves nothing to do; use auto or a card") }
        } catch let e as ShutterbugError { throw ValidationError(e.message) }
        if let duration { try NumericInput.check(duration, "--duration", in: 0.1...86400, unit: "s") }
        if let frames, !(1...10_000_000).contains(frames) { throw ValidationError("--frames must be in 1...10000000, not \(frames)") }
        try NumericInput.check(eventDelay, "--event-delay", in: 0...1000, unit: "ms")
    }

    func run() async throws {
        guard let sink = PreviewOptions.open(try PreviewChoice(parsing: display)) else {
            // The reason is already said; nothing to show it on.
            throw ExitCode(69)
        }
        defer { sink.close() }
        sink.eventDelay = .microseconds(Int64(eventDelay * 1000))
        let cam = try camera.open()
        defer { cam.release() }
        let stream = PreviewOptions.viewfinder(for: sink.display, camera: cam)
        let session = CaptureSession(backend: cam)
        let config = try await session.start(streams: [stream], preparedBracketCount: 1, sinks: [sink], framesPerSink: PreviewOptions.framesPerSink)
        if !json { print("preview of \(cam.info.id) \(config.streams[0]) on \(sink.display.card.path) \(sink.display.connector.name) \(sink.display.mode)") }

        // Until --frames, --duration or SIGINT/SIGTERM, whichever comes first.
        let signals = try [SignalTriggerSource(signal: SIGINT, name: "SIGINT"), SignalTriggerSource(signal: SIGTERM, name: "SIGTERM")]
        let started = MonotonicClock.now()
        await withTaskGroup(of: Void.self) { group in
            for s in signals { group.addTask { for await _ in s.triggers() { return } } }
            if let duration { group.addTask { try? await Task.sleep(for: .seconds(duration)) } }
            if let frames { group.addTask { for await _ in await session.requests(count: frames) {} } }
            await group.next()
            signals.forEach { $0.stop() }
            group.cancelAll()
        }
        let elapsed = MonotonicClock.now() - started
        let failure = await session.failureReason
        let sinkStats = await session.sinkStatistics.first
        await session.stop()
        sink.close()
        if let failure { throw failure }
        if json {
            var o = JSONObject()
            o.add("camera", cam.info.id)
            o.add("stream", config.streams[0].description)
            o.add("seconds", elapsed.secondsValue)
            o.add("sessionDropped", sinkStats?.dropped)
            sink.add(to: &o)
            print(o.text)
        } else {
            print(sink.summaryLine)
            print("in \(elapsed.millisecondsDescription); frames the session could not offer (the preview held all it may): \(sinkStats?.dropped ?? 0)")
        }
    }
}
