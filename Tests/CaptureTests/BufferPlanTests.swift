import CaptureScheduler
import ShutterbugCore
import Testing

/// The pure parts the session asks before it allocates or captures: how buffers are shared out
/// (`BufferPlan`), whether a bracket fits this camera (`CaptureMachine.validate`), and what the
/// frames have shown (`FrameTally`).
@Suite("Buffer plan, bracket validation and the frame tally (pure)")
struct BufferPlanTests {
    @Test("each stream asks for the bracket, the pipeline and the sinks; a bracket holds what the camera gave beyond the pipeline and the sinks, at least one")
    func shares() throws {
        let plan = try BufferPlan(bracketCount: 5, sinks: 2, framesPerSink: 3)
        #expect(plan.buffersPerStream == 5 + RequestFeeder.pipelineDepth + 6)
        let requests = plan.requests([StreamRequest(role: .still), StreamRequest(role: .raw, bufferCount: 2)])
        #expect(requests.map(\.bufferCount) == [plan.buffersPerStream, plan.buffersPerStream] && requests.map(\.role) == [.still, .raw])
        #expect(plan.photos(slots: plan.buffersPerStream) == 5)
        #expect(plan.photos(slots: RequestFeeder.pipelineDepth + 7) == 1, "fewer buffers than asked: the bracket gets what is left")
        #expect(plan.photos(slots: 3) == 1, "never less than one")
    }

    @Test("a bracket outside 1...32 or frames per sink outside 1...8 is refused with the range", arguments: [(0, 1), (33, 1), (9, 0), (9, 9)])
    func bounds(bracket: Int, perSink: Int) {
        #expect { try BufferPlan(bracketCount: bracket, sinks: 1, framesPerSink: perSink) } throws: { e in
            let text = "\(e)"
            return (bracket == 0 || bracket == 33) ? text.contains("1...32") && text.contains("\(bracket)") : text.contains("1...8") && text.contains("\(perSink)")
        }
    }

    @Test("a configuration over the memory budget is refused naming its bytes, the budget and what to ask for; one within it passes")
    func budget() throws {
        let plan = try BufferPlan(bracketCount: 9, sinks: 1, framesPerSink: 1)
        let frame = 4056 * 3040 * 3 / 2
        let config = CameraConfiguration(streams: [StreamConfiguration(role: .still, width: 4056, height: 3040, pixelFormat: .yuv420, stride: 4056, frameSize: frame, bufferCount: plan.buffersPerStream)], adjustments: [])
        #expect { try plan.check(config, within: MemoryBudget(bytes: 100 << 20, source: "a test pool")) } throws: { e in
            let text = "\(e)"
            return text.contains("100 MB (a test pool)") && text.contains("9 for a bracket's or a burst's photos") && text.contains("1 for sinks") && text.contains("SHUTTERBUG_MEMORY_BUDGET_MB")
        }
        try plan.check(config, within: MemoryBudget(bytes: config.bufferBytes, source: "exactly enough"))
    }

    @Test("a bracket the camera cannot take is refused by name: no focus motor, no exposure controls, more steps than its buffers, manual steps the frames could not tell apart")
    func validate() throws {
        let timing = CameraTiming(landingOffsets: 2...3, lineTime: .microseconds(20), margin: .milliseconds(1), minFramePeriod: .milliseconds(33),
                                  ipaMinInterval: .milliseconds(33), gainRange: 1...16, exposureRange: .microseconds(100)...(.seconds(1)), readoutTime: .milliseconds(20))
        let exposure = CaptureMachine(timing: timing, limits: ControlLimits(supported: [.exposureTime, .analogueGain, .aeEnable]))
        let none = CaptureMachine(timing: timing, limits: ControlLimits(supported: []))
        let ev = PhotoSettings(bracket: .exposureBias([-1, 0, 1]))
        try exposure.validate(ev, camera: "sim:a", slots: 7, photos: 3)
        try exposure.validate(PhotoSettings(), camera: "sim:a", slots: 5, photos: 1)
        #expect { try exposure.validate(ev, camera: "sim:a", slots: 6, photos: 2) } throws: { "\($0)".contains("accepted 1...2") && "\($0)".contains("6 buffers") }
        #expect { try none.validate(ev, camera: "sim:b", slots: 7, photos: 3) } throws: { "\($0)".contains("sim:b does not support ExposureTime") }
        #expect { try exposure.validate(PhotoSettings(bracket: .lensPositions([Dioptres(1), Dioptres(2)])), camera: "sim:a", slots: 7, photos: 3) } throws: { "\($0)".contains("no focus motor") }
        // Two exposures within one line time (20 µs) at the same gain: no frame could tell them apart.
        let close = PhotoSettings(bracket: .manualExposure([(.microseconds(10_000), Gain(1)), (.microseconds(10_010), Gain(1))]))
        #expect { try exposure.validate(close, camera: "sim:a", slots: 7, photos: 3) } throws: { "\($0)".contains("cannot be told apart") }
    }

    @Test("the tally counts frames, start-up frames and errors, not cancelled requests, and the frames dropped before the first and between sequence numbers")
    func tally() {
        var t = FrameTally()
        func frame(_ seq: UInt32, _ status: CompletedRequest.Status, at ms: Int64) -> CompletedRequest {
            CompletedRequest(slot: 0, cookie: UInt64(seq), status: status, metadata: FrameMetadata(sequence: seq, sensorTimestamp: SensorTime(nanoseconds: ms * 1_000_000)), buffers: [])
        }
        // Frames 0 and 1 never came back: the sensor counts from 0 when it starts.
        for (seq, status) in [(2, CompletedRequest.Status.startup), (3, .startup), (4, .complete), (7, .complete), (8, .error), (11, .cancelled), (9, .complete)] {
            t.count(frame(UInt32(seq), status, at: Int64(seq) * 33))
        }
        #expect(t.statistics.frames == 3 && t.statistics.startup == 2 && t.statistics.errors == 1 && t.statistics.dropped == 4, "\(t.statistics)")
        // Time: a frame after a gap over a second is handed back to be judged; others are not.
        #expect(t.arrived(frame(10, .complete, at: 1000)) == nil && t.frameTime == SensorTime(nanoseconds: 1_000_000_000))
        t.handled()
        #expect(t.frameTime == nil)
        #expect(t.arrived(frame(11, .complete, at: 1033)) == nil)
        #expect(t.arrived(frame(12, .complete, at: 2100)) == SensorTime(nanoseconds: 2_100_000_000))
        #expect(t.arrived(frame(13, .cancelled, at: 9000)) == nil, "a cancelled request brings no time")
        t.stopped()
        #expect(t.arrived(frame(14, .complete, at: 20000)) == nil, "the first frame after a restart is no gap")
    }
}
