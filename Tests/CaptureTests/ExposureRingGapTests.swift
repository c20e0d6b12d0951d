import CaptureScheduler
import ShutterbugCore
import Testing

/// Issue 49, item 6: why zero shutter lag fell back to a later frame says what happened to the
/// frame that was exposing at the instant, and says "between two exposures" only when it was.
@Suite("Zero shutter lag's fallback reason")
struct ExposureRingGapTests {
    /// Frame `n` of a 100 ms period: exposed for `exposure` ms ending at n × 100 ms.
    func frame(_ n: UInt32, exposure: Int64 = 60) -> FrameMetadata {
        FrameMetadata(sequence: n, sensorTimestamp: SensorTime(nanoseconds: Int64(n) * 100_000_000), exposureTime: .milliseconds(exposure), frameDuration: .milliseconds(100))
    }

    @Test("a frame that covered the instant and went to an earlier capture is named, not called a gap between exposures")
    func coveredThenTaken() {
        // Frame 10 exposed 940...1000 ms; the instant 950 ms; frames 11 and 12 after it.
        let instant = SensorTime(nanoseconds: 950_000_000)
        let why = ExposureRing.gap(before: frame(12), instant: instant, seen: [frame(9), frame(10), frame(11)])
        #expect(why.contains("frame 10, exposing at the instant, went to an earlier capture"), "\(why)")
        #expect(!why.contains("between two exposures"), "\(why)")
    }

    @Test("an instant in the gap between two seen exposures is said to be one")
    func trueGap() {
        // Frame 10 exposed 940...1000 ms, frame 11 1040...1100: the instant 1010 ms is between.
        let instant = SensorTime(nanoseconds: 1_010_000_000)
        let why = ExposureRing.gap(before: frame(12), instant: instant, seen: [frame(9), frame(10), frame(11)])
        #expect(why.contains("fell between two exposures (frames 10 and 11)"), "\(why)")
    }

    @Test("frames around the instant not seen: no claim of a gap")
    func unseen() {
        let instant = SensorTime(nanoseconds: 950_000_000)
        let why = ExposureRing.gap(before: frame(12), instant: instant, seen: [frame(11)])
        #expect(!why.contains("between two exposures"), "\(why)")
        #expect(why.contains("was not among those seen"), "\(why)")
    }
}
