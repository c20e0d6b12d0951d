import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 49, item 1: a capture that sets exposure and gain by hand gives the camera back to auto
/// exposure, and the captures after it are metered by auto exposure, not by the last step.
/// Judged across a sequence of captures, by metadata and by pixels (the scene is constant, so
/// every 0 EV photo should be as bright as the first).
@Suite("Auto exposure comes back after every capture that set it by hand", .timeLimit(.minutes(3)))
struct AutoExposureReturnTests {
    static func total(_ m: FrameMetadata) -> Double { m.exposureTime!.secondsValue * m.totalGain!.value }
    static func stops(_ a: Double, _ b: Double) -> Double { abs(log2(a / b)) }

    @Test("photos and EV brackets after manual and EV brackets are metered as before them", arguments: [SensorProfile.imx219, .imx477, .imx708])
    func sequence(profile: SensorProfile) async throws {
        let (session, cam) = try await simulatedSession(profile, landing: .random, seed: 7, stream: StreamRequest(role: .video))
        defer { cam.release() }
        // The reference: what auto exposure settles on before anything was set by hand.
        let first = try await record(await session.capture(PhotoSettings(bracket: .exposureBias([-2, 0, 2]))), measure: true)
        let reference = Self.total(first.photos[1].metadata)
        let referenceMean = try #require(first.photos[1].mean)
        var log: [String] = []
        for round in 0..<3 {
            // A manual bracket whose last step is 4 stops over the metered exposure.
            let manual: [(Duration, Gain)] = [(.microseconds(1000), Gain(1)), (.microseconds(40000), Gain(4))]
            _ = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(manual))))
            let photo = try await record(await session.capture(PhotoSettings()), measure: true)
            let t = Self.total(photo.photos[0].metadata)
            log.append("round \(round) photo: \(photo.photos[0].metadata.exposureTime!) × \(photo.photos[0].metadata.totalGain!.value)")
            #expect(Self.stops(t, reference) <= 1.0 / 3, "\(profile.model) round \(round): a 0 EV photo after a manual bracket is \(t) s·gain, auto exposure's is \(reference); \(log)")
            let photoMean = try #require(photo.photos[0].mean)
            #expect(Self.stops(photoMean, referenceMean) <= 1.0 / 3, "\(profile.model) round \(round): pixels \(photoMean) against \(referenceMean)")
            // An EV bracket: its 0 EV step is auto exposure's, not the last bracket's +2 EV.
            let ev = try await record(await session.capture(PhotoSettings(bracket: .exposureBias([-2, 0, 2]))), measure: true)
            let mid = Self.total(ev.photos[1].metadata)
            log.append("round \(round) EV 0: \(mid)")
            #expect(Self.stops(mid, reference) <= 1.0 / 3, "\(profile.model) round \(round): the 0 EV step is \(mid), auto exposure's \(reference); \(log)")
            let evMean = try #require(ev.photos[1].mean)
            #expect(Self.stops(evMean, referenceMean) <= 1.0 / 3, "\(profile.model) round \(round): 0 EV pixels \(evMean) against \(referenceMean)")
            let steps = ev.photos.map { Self.total($0.metadata) }
            #expect(abs(steps[1] / steps[0] - 4) < 0.15 && abs(steps[2] / steps[1] - 4) < 0.15, "steps \(steps)")
        }
    }

    @Test("a single photo straight after a bracket is not the bracket's last step")
    func notTheLastStep() async throws {
        let (session, cam) = try await simulatedSession(.imx477, landing: .late, seed: 3, stream: StreamRequest(role: .video))
        defer { cam.release() }
        let before = try await record(await session.capture(PhotoSettings(bracket: .exposureBias([0]))))
        let reference = Self.total(before.photos[0].metadata)
        let bracket = try await record(await session.capture(PhotoSettings(bracket: .manualExposure([(.microseconds(30000), Gain(8))]))))
        let photo = try await record(await session.capture(PhotoSettings()))
        #expect(photo.photos[0].metadata.sequence > bracket.photos[0].metadata.sequence + 4)
        let total = Self.total(photo.photos[0].metadata)
        #expect(Self.stops(total, reference) <= 1.0 / 3,
                "photo \(photo.photos[0].metadata) after step \(bracket.photos[0].metadata); auto exposure's total \(reference)")
    }
}
