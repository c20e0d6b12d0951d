import ArgumentParser
import CaptureScheduler
import Capture
import Jobs
import LinuxGPIO
import ProcessTriggers
import ShutterbugCore

#if canImport(Glibc)
import Glibc
#endif

/// A trigger's options: its source (a GPIO line, a signal, Enter or a simulated pattern) and
/// the capture each trigger asks for. What `shutterbug trigger` takes beside the camera and the
/// output, and what the service's `triggers:` give (`TriggerDefinition(name:words:)`).
public struct TriggerOptions: ParsableArguments, Sendable {
    public init() {}

    /// The options a trigger in the service may give, as their long names.
    public static let serviceKeys = ["gpio", "edge", "debounce", "bias", "active-low", "simulated", "ev", "format", "policy", "queue", "zsl", "hold", "pre", "post"]

    @Option(name: .long, help: ArgumentHelp("A GPIO line: its name (GPIO17, or a gpio-sim label) or CHIP:OFFSET (gpiochip0:17).", valueName: "line"))
    public var gpio: String?

    @Option(name: .long, help: ArgumentHelp("GPIO edges that trigger: falling (a button to ground), rising or both.", valueName: "edge"))
    public var edge: String = "falling"

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("GPIO debounce by the kernel: 10ms, 500us (1 µs...1 s).", valueName: "time"))
    public var debounce: String?

    @Option(name: .long, help: ArgumentHelp("GPIO bias: pull-up, pull-down or disabled (default: as the line is).", valueName: "bias"))
    public var bias: String?

    @Flag(name: .long, help: "GPIO: the line is active-low.")
    public var activeLow = false

    @Flag(name: .long, help: "Trigger on SIGUSR1 (kill -USR1 PID).")
    public var signal = false

    @Flag(name: .long, help: "Trigger on Enter (each line on standard input).")
    public var keypress = false

    @Option(name: .long, help: ArgumentHelp("A simulated pattern: regular:200ms, poisson:200ms (mean gap) or burst:3,10ms,1s (count, spacing, pause).", valueName: "pattern"))
    public var simulated: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Exposure biases for a bracket per trigger, e.g. -2,0,2.", valueName: "ev,..."))
    public var ev: String?

    @Option(name: .long, help: ArgumentHelp("While a capture runs, further triggers are queued (up to --queue), coalesced into one (the newest) or dropped.", valueName: "queue|coalesce|drop"))
    public var policy: String = "queue"

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Triggers that may wait with --policy queue (1...64).", valueName: "n"))
    public var queue: Int = 8

    @Option(name: .long, help: ArgumentHelp("File formats with --output: dng, jpeg, or both.", valueName: "dng,jpeg"))
    public var format: String = "jpeg"

    @Flag(name: .long, help: "Zero shutter lag: each photo is the frame that was exposing when the trigger came, from the newest frames held (--hold), not the first frame exposed after it; where none covered the instant (between two exposures, a dropped or start-up frame) the first exposed after is taken and the capture says why. With --ev, step 1 is that frame when it carries step 1's exposure (put the camera's own first: --ev 0,-2,2); the other steps are frames still to come. Each trigger's capture is asked for as the trigger comes, up to --queue in flight, taking its frame then even while another capture is under way (--policy does not apply).")
    public var zsl = false

    @Option(name: .long, help: ArgumentHelp("With --zsl: the newest frames held, a count (1...32) or a time window (250ms) at the mode's fastest frame rate. Each takes a buffer per stream; default 3 frames.", valueName: "n|time"))
    public var hold: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Pre-capture: each trigger's capture is a burst of the frames from before the trigger (held, as for --zsl), the frame exposing at it, and --post frames after, written as one numbered sequence: a count (1...30) or a time window (500ms, 1ms...10s) counted at the frame rate the camera runs at when the trigger comes.", valueName: "n|time"))
    public var pre: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Pre-capture: frames after the trigger's frame in each burst, a count (0...32; default 0 with --pre) or a time window (500ms).", valueName: "n|time"))
    public var post: String?

    public func validate() throws {
        let sources = [gpio != nil, signal, keypress, simulated != nil].filter { $0 }.count
        guard sources == 1 else { throw ValidationError("give exactly one trigger source: --gpio LINE, --signal, --keypress or --simulated PATTERN") }
        guard ["falling", "rising", "both"].contains(edge) else { throw ValidationError("--edge must be falling, rising or both, not '\(edge)'") }
        if let bias, GPIOBias(rawValue: bias) == nil { throw ValidationError("--bias must be pull-up, pull-down or disabled, not '\(bias)'") }
        _ = try debouncePeriod()
        if let simulated { _ = try Self.pattern(simulated) }
        _ = try bracket()
        guard TriggerPolicy(rawValue: policy) != nil else { throw ValidationError("--policy must be queue, coalesce or drop, not '\(policy)'") }
        guard TriggerQueue.limitRange.contains(queue) else { throw ValidationError("--queue must be in 1...64, not \(queue)") }
        _ = try formats()
        if let b = try burst(), !b.hasWindow, case .frames(let n) = b.before, case .frames(let m) = b.after, n + 1 + m > 32 {
            throw ValidationError("--pre \(n) --post \(m) make bursts of \(n + 1 + m) frames; at most 32 (a session holds at most 32 photos at once)")
        }
        if (pre != nil || post != nil) && ev != nil { throw ValidationError("--pre and --post take a burst of frames around each trigger; a bracket (--ev) is another capture: drop one of them") }
        if (pre != nil || post != nil) && hold != nil { throw ValidationError("--pre sizes the frames held (its count and two more): drop --hold") }
        if hold != nil && !zsl { throw ValidationError("--hold sizes the frames held for --zsl: give --zsl too") }
        _ = try heldFrames()
    }

    /// The frames held for `--zsl` (default 3: a trigger heard up to two frames late still
    /// finds its frame), none without it.
    public func heldFrames() throws -> HeldFrames {
        // A burst's frames before, and two more so the frame at the trigger is still held when
        // a late-heard edge asks for it.
        if let b = try burst() { return b.held }
        guard zsl else { return .none }
        guard let hold else { return .frames(3) }
        if let n = Int(hold) {
            guard (1...BufferPlan.ringRange.upperBound).contains(n) else { throw ValidationError("--hold must be 1...\(BufferPlan.ringRange.upperBound) frames or a time window (250ms), not \(n)") }
            return .frames(n)
        }
        return .window(try NumericInput.exposure(Substring(hold), "--hold", in: 0.001...10, kind: "a count of frames or a time window"))
    }

    public func formats() throws -> Set<PhotoFormat> { try PhotoFormats.parse(format) }

    /// An EV bracket per trigger (`--ev`), or a single photo.
    public func bracket() throws -> BracketSettings? {
        try ev.map { .exposureBias(try NumericInput.numbers($0, "--ev", in: -8...8, unit: "stops", example: "-2,0,2")) }
    }

    /// The kernel's debounce period, 1 µs...1 s.
    public func debouncePeriod() throws -> Duration? {
        try debounce.map { try NumericInput.exposure(Substring($0), "--debounce", in: 1e-6...1, kind: "a time") }
    }

    /// regular:200ms, poisson:200ms, burst:3,10ms,1s.
    public static func pattern(_ text: String) throws -> PatternTriggerSource.Pattern {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        let form = "--simulated takes regular:200ms, poisson:200ms or burst:3,10ms,1s"
        guard parts.count == 2 else { throw ValidationError("\(form), not '\(text)'") }
        func time(_ s: String) throws -> Duration { try NumericInput.exposure(Substring(s), "--simulated", in: 0.001...3600, kind: "a time") }
        switch parts[0] {
        case "regular": return .regular(period: try time(parts[1]))
        case "poisson": return .poisson(mean: try time(parts[1]), seed: 1)
        case "burst":
            let b = parts[1].split(separator: ",").map(String.init)
            guard b.count == 3, let n = Int(b[0]), (1...1000).contains(n) else { throw ValidationError("\(form) (count 1...1000), not '\(text)'") }
            return .burst(count: n, spacing: try time(b[1]), pause: try time(b[2]))
        default: throw ValidationError("\(form), not '\(text)'")
        }
    }

    /// The job's options (the count, and an external trigger's pulse, are the caller's).
    public func jobOptions(count: Int? = nil, pulseWidth: Duration = .milliseconds(10)) throws -> TriggerJob.Options {
        TriggerJob.Options(bracket: try bracket(), formats: try formats(), policy: TriggerPolicy(rawValue: policy) ?? .queue, queue: queue, count: count, pulseWidth: pulseWidth,
                           zeroShutterLag: try zsl || burst() != nil, burst: try burst())
    }

    /// Pre-capture's burst (`--pre`, `--post`), if asked for: each side a count or a window.
    ///
    /// - Throws: `ValidationError` naming the option and its accepted ranges.
    public func burst() throws -> BurstRequest? {
        guard pre != nil || post != nil else { return nil }
        func span(_ text: String?, _ name: String, frames range: ClosedRange<Int>) throws -> BurstRequest.Span {
            guard let text else { return .frames(0) }
            if let n = Int(text) {
                guard range.contains(n) else { throw ValidationError("\(name) must be \(range) frames or a time window (500ms, 1ms...10s), not \(n)") }
                return .frames(n)
            }
            return .window(try NumericInput.exposure(Substring(text), name, in: 0.001...10, kind: "a count of frames (\(range)) or a time window"))
        }
        return BurstRequest(before: try span(pre, "--pre", frames: 1...30), after: try span(post, "--post", frames: 0...32))
    }

    /// Opens the source on the camera's clock: `start` is the camera's time when the job is
    /// armed (a pattern's first trigger comes 100 ms after it), `realTime` whether a pattern
    /// keeps real time; `announce` gets a line saying what it waits for.
    public func source(realTime: Bool, announce: @escaping @Sendable (String) -> Void = { _ in }) throws -> @Sendable (_ start: SensorTime) throws -> TriggerHandle {
        let (gpio, edge, bias, activeLow, debounce, signal, keypress) = (gpio, edge, bias, activeLow, try debouncePeriod(), signal, keypress)
        let pattern = try simulated.map { try Self.pattern($0) }
        return { start in
            if let gpio {
                let edges: GPIOEdges = edge == "rising" ? .rising : edge == "both" ? .both : .falling
                let g = try GPIOTriggerSource(line: gpio, edges: edges, bias: bias.flatMap(GPIOBias.init), activeLow: activeLow, debounce: debounce)
                announce("waiting for \(edge) edges on \(gpio) (\(g.chipPath) line \(g.offset))")
                return TriggerHandle(source: g, stop: { g.stop() }, close: { g.stopAndWait() }, kernelLost: { g.kernelLost })
            }
            if signal {
                let s = try SignalTriggerSource(signal: SIGUSR1, name: "SIGUSR1")
                announce("waiting for SIGUSR1: kill -USR1 \(getpid())")
                return TriggerHandle(source: s, stop: { s.stop() })
            }
            if keypress {
                let k = try KeypressTriggerSource()
                announce("press Enter to capture")
                return TriggerHandle(source: k, stop: { k.stop() })
            }
            // A simulated pattern ends when its consumer stops listening.
            return TriggerHandle(source: PatternTriggerSource(pattern!, count: 1_000_000, start: start + .milliseconds(100), realTime: realTime), stop: {})
        }
    }
}
