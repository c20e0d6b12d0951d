import Capture
import Foundation
import ImageOutput
import Jobs
@testable import Server
import ShutterbugCore
import Testing

/// A trigger's status in the API is the command's summary report with the trigger's name,
/// state and options beside it, at one level.
@Suite("Status reports")
struct StatusReportTests {
    @Test("a trigger's status: the summary's keys beside its own, read back as written")
    func triggerStatusIsFlat() throws {
        var status = TriggerStatus(name: "door", state: .listening, options: ["--gpio", "shutter"])
        var counts = TriggerCounts()
        (counts.seen, counts.captured, counts.dropped) = (5, 4, 1)
        let lags = (1...4).map { TriggerLag(trigger: SensorTime(nanoseconds: 1_000_000), exposureStart: SensorTime(nanoseconds: 1_000_000 + Int64($0) * 10_000)) }
        status.report = TriggerSummaryReport(source: "gpio shutter", counts: counts, lags: lags)
        let text = CaptureReport.jsonText(status)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(o["name"] as? String == "door" && o["state"] as? String == "listening" && o["source"] as? String == "gpio shutter", "\(text)")
        #expect(o["seen"] as? Int == 5 && o["captured"] as? Int == 4 && o["dropped"] as? Int == 1 && o["kernelDropped"] as? Int == 0, "\(text)")
        let lag = try #require(o["lagToExposureStart"] as? [String: Any], "\(text)")
        #expect(lag["count"] as? Int == 4 && lag["p50Us"] as? Double == 20 && lag["maxUs"] as? Double == 40, "\(text)")
        #expect(o["summary"] == nil && o["stoppedBy"] == nil && o["lagToFiles"] == nil && o["report"] == nil, "\(text)")
        let back = try JSONDecoder().decode(TriggerStatus.self, from: Data(text.utf8))
        #expect(back.report == status.report && back.name == "door" && back.state == .listening && back.options == status.options)
    }
}
