@testable import Capture
import CaptureScheduler
import Foundation
import ImageOutput
import ShutterbugCore
import Testing

@Suite("The capture report")
struct CaptureReportTests {
    @Test("a frame reporting an infinite lux or a NaN gain still gives a report that encodes: the value is left out, the rest kept")
    func nonFinite() throws {
        var b = CaptureReport.Builder(PhotoSettings())
        let m = FrameMetadata(sequence: 7, sensorTimestamp: SensorTime(nanoseconds: 1_000_000), exposureTime: .milliseconds(10),
                              analogueGain: Gain(.nan), lux: .infinity)
        b.observe(.photoCaptured(ResolvedStep(index: 0, requested: "photo", planned: StepTarget(gain: .infinity), actual: m), m))
        let report = b.report()
        let step = try #require(report.steps.first)
        #expect(step.lux == nil && step.analogueGain == nil && step.plannedGain == nil)
        #expect(step.sequence == 7 && step.exposureTimeUs == 10_000)
        let decoded = try JSONDecoder().decode(CaptureReport.self, from: try JSONEncoder().encode(report))
        #expect(decoded == report)
        #expect(report.jsonText.contains("\"sequence\":7"), "\(report.jsonText)")
    }
}
