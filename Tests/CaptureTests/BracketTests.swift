import Capture
import CaptureScheduler
import ShutterbugCore
import SimulatedCamera
import Testing

@Suite("Brackets on the simulated Pi pipeline", .timeLimit(.minutes(3)))
struct BracketTests {
    static let exposures: [(Duration, Gain)] = [(.microseconds(1000), Gain(1)), (.microseconds(4000), Gain(1)), (.microseconds(16000), Gain(1)), (.microseconds(16000), Gain(4)), (.microseconds(2000), Gain(2))]

    @Test("a manual bracket lands on consecutive frames, each identified by its metadata",
          arguments: [SensorProfile.imx219, .imx477, .imx708], [SimulationOptions.Landing.early, .late, .random])
    func consecutive(profile: SensorProfile, landing: SimulationOptions.Landing) async throws {
        let (session, cam) = try await simulatedSession(profile, landing: landing)
        defer { cam.release() }
        let r = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(Self.exposures.map { ($0.0, $0.1) }))))
        expectOrder(r, steps: 5)
        let timing = await session.timing
        for p in r.photos {
            #expect(p.step.planned.isCarried(by: p.metadata, lineTime: timing.lineTime), "step \(p.step.index): \(p.metadata)")
        }
        let seqs = r.photos.map(\.metadata.sequence).sorted()
        if landing == .random {
            // The IPA may turn late once inside the bracket (it cannot catch up while every
            // write differs), which repeats one step's frame: N or N + 1 frames, never a retry.
            #expect([4, 5].contains(seqs.last! - seqs.first!), "\(profile.model) \(landing): frames \(seqs)")
        } else {
            #expect(seqs.last! - seqs.first! == 4, "\(profile.model) \(landing): frames \(seqs)")
        }
        #expect(r.resolved?.retries == 0)
        #expect(await heldAfterRelease(session) == 0)
        // Exposure started at the first step's first row, ended after the last readout.
        #expect(r.started! < r.ended!)
    }

    @Test("random landing and drops: every photo carries its step, none twice, none skipped (seeded random brackets)",
          arguments: 0..<24)
    func randomised(seed: Int) async throws {
        var rng = SplitMix64(seed: UInt64(seed) &* 7919 &+ 3)
        let profile = [SensorProfile.imx219, .imx477, .imx708][seed % 3]
        let drops = [0.0, 0.05, 0.15][(seed / 3) % 3]
        let n = 1 + Int(rng.next() % 9)
        let gains = profile.analogueGainRange
        let steps: [(duration: Duration, gain: Gain)] = (0..<n).map { _ in
            let e = Duration.microseconds(Int64(200 + rng.next() % 60_000))
            let g = gains.lowerBound + Double(rng.next() % 1000) / 1000 * (min(gains.upperBound, 12) - gains.lowerBound)
            return (e, Gain(g))
        }
        let (session, cam) = try await simulatedSession(profile, landing: .random, drops: drops, seed: UInt64(seed + 100))
        defer { cam.release() }
        let timing0 = await session.timing
        let targets = steps.map { StepTarget(exposure: timing0.quantise(min(max($0.duration, timing0.exposureRange.lowerBound), timing0.exposureRange.upperBound)), gain: $0.gain.value) }
        if StepTarget.firstAmbiguousPair(targets, lineTime: timing0.lineTime) != nil {
            // Steps the metadata cannot tell apart are refused, never attributed wrongly.
            await #expect(throws: ShutterbugError.self) { try await record(await session.capture(PhotoSettings(bracket: .manualExposure(steps)))) }
            await #expect(throws: ShutterbugError.self) { try await session.validate(PhotoSettings(bracket: .manualExposure(steps))) }
            return
        }
        let r = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(steps))))
        expectOrder(r, steps: n)
        let timing = await session.timing
        for p in r.photos {
            #expect(p.step.planned.isCarried(by: p.metadata, lineTime: timing.lineTime), "seed \(seed) step \(p.step.index) planned \(p.step.planned), frame \(p.metadata)")
        }
        #expect(Set(r.photos.map(\.metadata.sequence)).count == n)
        #expect(await heldAfterRelease(session) == 0)
    }

    @Test("an EV bracket meters first; steps differ by 2^ΔEV in metadata and in pixels")
    func evBracket() async throws {
        let (session, cam) = try await simulatedSession(.imx477, landing: .random)
        defer { cam.release() }
        let r = try await record(await session.capture(PhotoSettings(bracket: .exposureBias([-2, 0, 2]))), measure: true)
        expectOrder(r, steps: 3)
        let totals = r.photos.map { $0.metadata.exposureTime!.secondsValue * $0.metadata.totalGain!.value }
        #expect(abs(totals[1] / totals[0] - 4) < 0.1)
        #expect(abs(totals[2] / totals[1] - 4) < 0.1)
        let means = r.photos.map { $0.mean! }
        #expect(abs(means[1] / means[0] - 4) < 0.25, "pixel means \(means)")
        #expect(r.resolved?.meteredExposure != nil)
    }

    @Test("long exposures come out exactly as planned, not a line short", arguments: SensorProfile.catalogue)
    func longExposuresExact(profile: SensorProfile) async throws {
        let (session, cam) = try await simulatedSession(profile, landing: .early)
        defer { cam.release() }
        let gain = Gain(profile.analogueGainRange.lowerBound)
        let r = try await record(await session.capture(PhotoSettings(bracket: .manualExposure([(.seconds(exactly: 1.0 / 3), gain), (.milliseconds(500), gain), (.seconds(2), gain)]))))
        for p in r.photos {
            let planned = try #require(p.step.planned.exposure), actual = try #require(p.metadata.exposureTime)
            #expect(abs((actual - planned).nanosecondsValue) < 1_000, "\(profile.model): planned \(planned), got \(actual)")
        }
    }

    @Test("a seeded run in virtual time repeats exactly, whatever the machine's speed (manual, EV and focus brackets with drops)",
          arguments: 0..<3)
    func seededRepeats(kind: Int) async throws {
        func once() async throws -> [String] {
            let profile: SensorProfile = kind == 2 ? .imx708 : .imx219
            let (session, cam) = try await simulatedSession(profile, landing: .random, drops: 0.1, seed: 42)
            defer { cam.release() }
            let bracket: BracketSettings = switch kind {
            case 0: .manualExposure([(.microseconds(1000), Gain(1)), (.microseconds(4000), Gain(2)), (.microseconds(16000), Gain(1))])
            case 1: .exposureBias([-2, 0, 2])
            default: .lensPositions([Dioptres(1), Dioptres(3)])
            }
            let r = try await record(await session.capture(PhotoSettings(bracket: bracket)))
            // Everything but absolute times (they start from the machine's clock).
            return r.photos.map { "\($0.metadata.sequence) \($0.metadata.exposureTime!) \($0.metadata.analogueGain!) \($0.metadata.lensPosition.map { "\($0.value)" } ?? "-")" }
                + (r.resolved?.discarded.map { "\($0.sequence): \($0.reason)" } ?? []) + ["retries \(r.resolved?.retries ?? -1)"]
        }
        // Two at once, so they compete for the CPU with each other and the tests beside them.
        async let a = once()
        async let b = once()
        let (x, y) = try await (a, b)
        #expect(x == y)
        #expect(try await once() == x)
    }

    @Test("after a focus bracket the lens goes back to the locked position, never in between steps")
    func focusRestores() async throws {
        let (session, cam) = try await simulatedSession(.imx708, landing: .random)
        defer { cam.release() }
        _ = try await session.configure { $0.lockedFocus = Dioptres(1.5) }
        let during = await session.frames()
        let r = try await record(await session.capture(PhotoSettings(bracket: .lensPositions([Dioptres(3), Dioptres(4)]))))
        expectOrder(r, steps: 2)
        #expect(r.photos.map { $0.metadata.lensPosition?.value } == [3, 4])
        // Keep frames coming with single photos until one is back at the lock (in virtual
        // time frames happen only while something waits on them).
        var back: FrameMetadata?
        for _ in 0..<20 where back == nil {
            let p = try await record(await session.capture(PhotoSettings())).photos[0].metadata
            if abs((p.lensPosition?.value ?? -1) - 1.5) < 0.01 { back = p }
        }
        let returned = try #require(back, "the lens never went back to the locked 1.5 dpt after the bracket")
        // Every frame up to that photo is already in the observer's buffer.
        var leftLock = false
        for await m in during {
            let lens = m.lensPosition?.value ?? -1
            if lens > 1.5 { leftLock = true }
            // Once it left the lock, the lens does not go back to it between the steps.
            if leftLock, m.sequence < r.photos[1].metadata.sequence { #expect(lens > 1.51, "frame \(m.sequence): lens \(lens) between steps") }
            if m.sequence >= returned.sequence { break }
        }
        #expect(leftLock)
    }

    @Test("a focus bracket steps the lens and each photo is the frame after it settled")
    func focusBracket() async throws {
        let (session, cam) = try await simulatedSession(.imx708, landing: .random)
        defer { cam.release() }
        let r = try await record(await session.capture(PhotoSettings(bracket: .lensPositions([Dioptres(0.5), Dioptres(1), Dioptres(2)]))))
        expectOrder(r, steps: 3)
        for p in r.photos { #expect(abs(p.metadata.lensPosition!.value - p.step.planned.lens!) < 0.01) }
    }

    @Test("settings beyond the sensor are adjusted and reported")
    func adjusted() async throws {
        let (session, cam) = try await simulatedSession(.imx219)
        defer { cam.release() }
        let r = try await record(await session.capture(PhotoSettings(bracket: .manualExposure([(.seconds(20), Gain(1)), (.milliseconds(5), Gain(40))]))))
        let notes = r.resolved?.adjustments ?? []
        #expect(notes.contains { $0.contains("exposure") && $0.contains("11.76 s") })
        #expect(notes.contains { $0.contains("gain 40.00 adjusted to 10.67") })
    }

    @Test("a bracket larger than prepared is refused with the accepted range")
    func tooLarge() async throws {
        let (session, cam) = try await simulatedSession(.imx477, prepared: 3)
        defer { cam.release() }
        await #expect(throws: ShutterbugError.self) {
            _ = try await record(await session.capture(PhotoSettings(bracket: .exposureBias([-2, -1, 0, 1, 2]))))
        }
        #expect(await session.maxBracketedCapturePhotoCount == 3)
    }

    @Test("cancelling mid-bracket returns every buffer and the next capture works")
    func cancel() async throws {
        let (session, cam) = try await simulatedSession(.imx477, landing: .late)
        defer { cam.release() }
        let stream = await session.capture(PhotoSettings(bracket: .manualExposure(Self.exposures.map { ($0.0, $0.1) })))
        // The consumer cancels itself once the bracket is under way.
        let task = Task {
            for try await e in stream {
                if case .exposureStarted = e { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        _ = await task.result
        #expect(await heldAfterRelease(session) == 0)
        let r = try await record(await session.capture(PhotoSettings(bracket: .manualExposure(Self.exposures.map { ($0.0, $0.1) }))))
        expectOrder(r, steps: 5)
    }

    @Test("the next capture can begin while the previous one's photos are still held")
    func responsive() async throws {
        let (session, cam) = try await simulatedSession(.imx477, prepared: 3)
        defer { cam.release() }
        var held: [CapturedPhoto] = []
        for try await e in await session.capture(PhotoSettings(bracket: .exposureBias([-1, 0, 1]))) {
            if case .photo(let p) = e { held.append(p) }
        }
        #expect(held.count == 3)
        #expect(await session.photosHeld == 3)
        let r = try await record(await session.capture(PhotoSettings()))
        #expect(r.photos.count == 1)
        for p in held { p.release() }
    }
}
