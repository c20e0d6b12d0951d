import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Random brackets on the simulated Pi pipeline: manual (sometimes with near-identical steps),
/// EV and focus, with random landing, drops, start timing and scene brightness.
@Suite("Brackets: properties over random runs", .timeLimit(.minutes(4)))
struct BracketPropertyTests {
    /// Grating contrast (sd / mean of the Y plane, sampled): what focus does to the pixels.
    static func contrast(_ b: any FrameBuffer) -> Double {
        b.withUnsafeBytes { bytes in
            var sum = 0.0, sq = 0.0, n = 0.0
            let stride = b.planes[0].stride
            var y = 0
            while y < b.height {
                var x = 0
                while x < b.width {
                    let v = Double(bytes[y * stride + x])
                    sum += v; sq += v * v; n += 1
                    x += 3
                }
                y += 7
            }
            let mean = sum / n
            return (sq / n - mean * mean).squareRoot() / max(mean, 1)
        }
    }

    struct Photo { var step: ResolvedStep; var metadata: FrameMetadata; var contrast: Double }

    static func capture(_ session: CaptureSession, _ settings: PhotoSettings) async throws -> (photos: [Photo], resolved: ResolvedPhotoSettings?) {
        var photos: [Photo] = []
        var resolved: ResolvedPhotoSettings?
        for try await e in await session.capture(settings) {
            switch e {
            case .photo(let p):
                // Rendered and read off Swift's pool (see `record`).
                let buffer = p.buffers[0]
                photos.append(Photo(step: p.step, metadata: p.metadata, contrast: try await offPool { contrast(buffer) }))
                p.release()
            case .captureFinished(let r): resolved = r
            default: break
            }
        }
        return (photos, resolved)
    }

    @Test("every photo carries its step (exposure, analogue and digital gain, a settled lens), none from before the bracket, in step order; focus frames are as sharp as a locked lens at the same position",
          arguments: 0..<36)
    func randomRuns(seed: Int) async throws {
        var rng = SplitMix64(seed: UInt64(seed) &* 0x5851_F42D &+ 99)
        let kind = seed % 3  // 0 manual, 1 EV, 2 focus
        let profile: SensorProfile = kind == 2 ? .imx708 : [SensorProfile.imx219, .imx477, .imx708][Int(rng.next() % 3)]
        let landing = [SimulationOptions.Landing.early, .late, .random][Int(rng.next() % 3)]
        let drops = [0.0, 0.05, 0.1][Int(rng.next() % 3)]
        let lux = pow(10, 0.5 + rng.unit() * 3.5)  // 3 to 10,000 lux
        // The subject at a whole number of dioptres, 2 to 7 (focus steps are put near it, where
        // the grating's contrast tells one lens position from another).
        let subject = Double(2 + rng.next() % 6)
        let distance = 1 / subject
        // A small processed stream (the sensor mode follows it) keeps pixels cheap; focus runs
        // at full resolution too, where frames are slow and the lens moves within a step.
        let small = kind != 2 || seed % 2 == 0
        let stream = small ? StreamRequest(role: .viewfinder, width: 640, height: 480) : StreamRequest(role: .still)
        let (session, cam) = try await simulatedSession(profile, landing: landing, drops: drops, seed: UInt64(seed + 1), stream: stream) {
            $0.sceneLux = lux
            $0.subjectDistance = distance
        }
        defer { cam.release() }
        // Start timing: a few single photos first, so the bracket starts at another frame.
        for _ in 0..<Int(rng.next() % 3) { _ = try await Self.capture(session, PhotoSettings()) }
        let before = try #require(await session.latestFrame?.sequence)
        let timing = await session.timing

        let bracket: BracketSettings
        switch kind {
        case 0:
            var steps: [(duration: Duration, gain: Gain)] = (0..<(2 + Int(rng.next() % 5))).map { _ in
                (.microseconds(Int64(300 + rng.next() % 40_000)), Gain(1 + rng.unit() * 7))
            }
            // Sometimes a step one line from another: metadata cannot tell them apart.
            if rng.next() % 4 == 0 { steps.append((steps[0].duration + timing.lineTime, steps[0].gain)) }
            bracket = .manualExposure(steps)
        case 1:
            bracket = .exposureBias((0..<(2 + Int(rng.next() % 4))).map { _ in Double(Int(rng.next() % 9)) - 4 })
        default:
            let offsets = [-1.5, -0.5, 0, 0.3, 1.0]
            bracket = .lensPositions((0..<(2 + Int(rng.next() % 3))).map { _ in Dioptres(subject + offsets[Int(rng.next() % 5)]) })
        }
        let result: (photos: [Photo], resolved: ResolvedPhotoSettings?)
        do {
            result = try await Self.capture(session, PhotoSettings(bracket: bracket))
        } catch let e as ShutterbugError where e.code == .invalidArgument {
            // Refused when planned: only for steps the metadata cannot tell apart.
            #expect(e.message.contains("cannot be told apart"), "seed \(seed): \(e)")
            return
        }
        let photos = result.photos
        #expect(photos.map(\.step.index) == Array(0..<bracket.count), "seed \(seed): photos out of step order")
        #expect(Set(photos.map(\.metadata.sequence)).count == photos.count, "seed \(seed): a frame used twice")
        for p in photos {
            #expect(p.metadata.sequence > before, "seed \(seed): frame \(p.metadata.sequence) is from before the bracket (\(before))")
            #expect(p.step.planned.isCarried(by: p.metadata, lineTime: timing.lineTime), "seed \(seed) step \(p.step.index): \(p.step.planned) vs \(p.metadata)")
            if let g = p.step.planned.gain, let d = p.metadata.digitalGain {
                #expect(abs(p.metadata.analogueGain!.value * d.value - g) <= 0.03 * g, "seed \(seed): digital gain \(d)")
            }
        }
        guard kind == 2 else { return }
        // Focus: each step's frame is as sharp as a frame taken with the lens locked there.
        for p in photos {
            let lens = try #require(p.step.planned.lens)
            _ = try await session.configure { $0.lockedFocus = Dioptres(lens) }
            let reference = try await Self.capture(session, PhotoSettings()).photos[0]
            #expect(reference.metadata.lensPosition?.value == lens)
            #expect(abs(p.contrast - reference.contrast) <= 0.1 * reference.contrast + 0.005,
                    "seed \(seed): step at \(lens) dpt (subject at \(String(format2: subject)) dpt) has contrast \(p.contrast), a locked lens there \(reference.contrast)")
        }
    }
}
