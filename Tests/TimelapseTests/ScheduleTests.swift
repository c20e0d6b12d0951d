import Foundation
import ShutterbugCore
import Testing
import Timelapse

@Suite("Timelapse schedule: a wall-clock grid waited for on the monotonic clock")
struct ScheduleTests {
    let second: Int64 = 1_000_000_000
    /// 2026-11-23T12:00:07Z, and CLOCK_REALTIME - CLOCK_MONOTONIC on an imagined Pi.
    var start: WallClockTime { WallClockTime(nanoseconds: 1_795_435_207 * second) }
    let offset = ClockOffset(nanoseconds: 1_795_000_000 * 1_000_000_000)

    func monotonic(_ wall: WallClockTime, _ offset: ClockOffset) -> SensorTime { wall - offset }

    @Test("slots fall on the grid (:00, :30), each taken at its instant on the monotonic clock, and the count ends it")
    func grid() {
        var s = TimelapseSchedule(.init(interval: .seconds(30), start: start, count: 3))
        #expect(s.anchor.nanoseconds % (30 * second) == 0 && s.anchor >= start && s.anchor.nanoseconds - start.nanoseconds < 30 * second)
        var walls: [Int64] = []
        var now = monotonic(start, offset)
        while case .take(let k, let wall, let instant) = s.step(now: now, offset: offset) {
            #expect(instant == monotonic(wall, offset))
            #expect(k == walls.count)
            walls.append(wall.nanoseconds)
            now = instant + .milliseconds(200)
            s.taken(k)
        }
        #expect(walls.count == 3 && s.total == 3)
        #expect(zip(walls, walls.dropFirst()).allSatisfy { $1 - $0 == 30 * second })
        #expect(s.step(now: now, offset: offset) == .finished)
    }

    @Test("a list of times: slot k is the k-th time at or after the start (sorted, once each), the end and the count bound it, a late one is skipped, and a resumed job keeps its numbering")
    func listedTimes() {
        let t = { (s: Int64) in WallClockTime(nanoseconds: self.start.nanoseconds + s * self.second) }
        // Given out of order, with a duplicate and one before the start.
        let times = [t(3600), t(-60), t(600), t(600), t(7200), t(601)]
        var s = TimelapseSchedule(.init(times: times, start: start))
        #expect(s.total == 4 && s.anchor == t(600) && s.plan.interval == .seconds(1))
        #expect(s.tolerance == .milliseconds(500), "half the shortest gap")
        var now = monotonic(start, offset)
        var walls: [WallClockTime] = []
        while true {
            let step = s.step(now: now, offset: offset)
            guard case .take(let k, let wall, let instant) = step else {
                if case .skip(let k, _, let why) = step {
                    // Slot 1 (t+601) comes 1 s after slot 0, which took 2 s.
                    #expect(k == 1 && why.contains("late by"))
                    continue
                }
                #expect(step == .finished)
                break
            }
            #expect(k == walls.count + (walls.count >= 1 ? 1 : 0) && instant == monotonic(wall, offset))
            walls.append(wall)
            now = instant + .seconds(2)
            s.taken(k)
        }
        #expect(walls == [t(600), t(3600), t(7200)])
        // Bounded by an end and by a count.
        #expect(TimelapseSchedule(.init(times: times, start: start, end: t(3600))).total == 2)
        #expect(TimelapseSchedule(.init(times: times, start: start, count: 3)).total == 3)
        // Resumed after slot 1 with the job's first anchor as the start: slot 2 is t+3600 again.
        var r = TimelapseSchedule(.init(times: times, start: t(600)), resumeAfter: 1, anchor: t(600))
        guard case .take(2, let wall, _) = r.step(now: monotonic(t(3000), offset), offset: offset) else { Issue.record("not slot 2"); return }
        #expect(wall == t(3600))
    }

    @Test("a late slot is skipped with how late it was, never fired late; the next is on time")
    func late() {
        var s = TimelapseSchedule(.init(interval: .seconds(10), start: start))
        guard case .take(0, let wall0, let i0) = s.step(now: monotonic(start, offset), offset: offset) else { Issue.record("no slot 0"); return }
        s.taken(0)
        // The capture of slot 0 took 25 s: slots 1 and 2 have passed.
        let now = i0 + .seconds(25)
        guard case .skip(1, _, let why1) = s.step(now: now, offset: offset), case .skip(2, _, _) = s.step(now: now, offset: offset) else {
            Issue.record("slots 1 and 2 not skipped"); return
        }
        #expect(why1.contains("late by"))
        guard case .take(3, let wall3, _) = s.step(now: now, offset: offset) else { Issue.record("slot 3 not next"); return }
        #expect(wall3.nanoseconds - wall0.nanoseconds == 30 * second)
    }

    @Test("the wall clock steps forward an hour: the slots it passed are skipped as a jump, no burst; back an hour: no slot twice, the grid kept")
    func wallClockSteps() {
        var s = TimelapseSchedule(.init(interval: .seconds(600), start: start))
        guard case .take(0, let wall0, let i0) = s.step(now: monotonic(start, offset), offset: offset) else { Issue.record("no slot 0"); return }
        s.taken(0)
        // NTP steps the wall clock 59 min 50 s ahead, 1 s after slot 0.
        let ahead = ClockOffset(nanoseconds: offset.nanoseconds + 3590 * second)
        let now = i0 + .seconds(1)
        var skipped = 0
        var next: TimelapseSchedule.Step = .finished
        while true {
            next = s.step(now: now, offset: ahead)
            guard case .skip(_, _, let why) = next else { break }
            #expect(why.contains("jumped forward") || why.contains("late"), "\(why)")
            skipped += 1
        }
        #expect(skipped == 5, "59 min 51 s at 10 minutes: slots 1...5 passed, slot 6 (an hour on) is still ahead")
        guard case .take(6, let wall6, let i6) = next else { Issue.record("not slot 6: \(next)"); return }
        #expect(wall6.nanoseconds - wall0.nanoseconds == 6 * 600 * second)
        #expect(i6 > now, "no burst: slot 6 is still ahead on the monotonic clock")
        s.taken(6)
        // Back an hour: slot 7 is on the grid, 70 minutes after slot 0's wall time, never slot 1 again.
        let back = offset
        guard case .take(7, let wall7, let i7) = s.step(now: i6 + .seconds(1), offset: back) else { Issue.record("not slot 7"); return }
        #expect(wall7.nanoseconds - wall0.nanoseconds == 7 * 600 * second)
        #expect(i7 - i6 > .seconds(3590), "the wait grows by the step back")
    }

    @Test("an end time bounds the slots; resuming continues the numbering after the last decided slot")
    func endAndResume() {
        let end = WallClockTime(nanoseconds: start.nanoseconds + 95 * second)
        let s = TimelapseSchedule(.init(interval: .seconds(30), start: start, end: end))
        #expect(s.total == 4 || s.total == 3)
        #expect(s.total == Int((end.nanoseconds - s.anchor.nanoseconds + 30 * second - 1) / (30 * second)))
        var r = TimelapseSchedule(.init(interval: .seconds(30), start: start, end: end), resumeAfter: 1)
        #expect(r.next == 2)
        if case .take(let k, _, _) = r.step(now: monotonic(start, offset), offset: offset) { #expect(k == 2) } else { Issue.record("no slot 2") }
    }
}

@Suite("Exposure ramp: damped, bounded per slot, time first then gain, darker at night")
struct RampTests {
    let config: ExposureRamp.Configuration = {
        var c = ExposureRamp.Configuration(exposure: .microseconds(30)...(.seconds(2)), gain: 1...16)
        c.maxStep = 1.0 / 3.0
        c.damping = 0.5
        return c
    }()

    /// A scene: linear mean = lux-proportional rate × exposure × gain, clipped.
    func meter(_ s: ExposureRamp.Settings, lux: Double) -> Double { min(1, 0.18 * lux / 400 * s.total / 0.01) }

    @Test("from day to night and back: every step within the bound, exposure before gain, the mean back on target by day and darker at night")
    func dayNightDay() {
        var ramp = ExposureRamp(config, settings: .init(exposure: .milliseconds(1), gain: 1))
        let down: [Double] = (0..<400).map { (i: Int) -> Double in 100_000 * pow(10.0, -7 * Double(i) / 399) }
        let up: [Double] = (0..<400).map { (i: Int) -> Double in 0.01 * pow(10.0, 7 * Double(i) / 399) }
        let luxes = down + up + Array(repeating: 100_000, count: 40)
        var previous: Double?
        for lux in luxes {
            let s = ramp.settings
            if s.gain > 1.0001 { #expect(s.exposure >= config.exposure.upperBound - .microseconds(1), "gain \(s.gain) before the longest exposure \(s.exposure)") }
            let d = ramp.update(metered: meter(s, lux: lux), lux: lux, exposedWith: s)
            #expect(abs(d.stepEV) <= config.maxStep + 1e-9, "step \(d.stepEV) at \(lux) lux")
            if let p = previous { #expect(abs(log2(ramp.settings.total / p)) <= config.maxStep + 1e-9) }
            previous = ramp.settings.total
        }
        // By day (the last lux is 100,000 again) it has settled within the deadband of the target.
        let final = meter(ramp.settings, lux: 100_000)
        #expect(abs(log2(final / 0.18)) < 0.1, "mean \(final)")
    }

    @Test("at night the target is darker by the night offset; at dusk part of it")
    func nightOffset() {
        var ramp = ExposureRamp(config, settings: .init(exposure: .milliseconds(10), gain: 1))
        let night = ramp.update(metered: 0.18, lux: 0.1, exposedWith: ramp.settings)
        #expect(night.phase == "night" && abs(night.nightOffsetEV + 1) < 1e-9)
        #expect(night.stepEV < 0, "a mid-grey frame is one stop too bright at night")
        let dusk = ramp.update(metered: 0.18, lux: 7, exposedWith: ramp.settings)
        #expect(dusk.phase == "dusk" && dusk.nightOffsetEV < 0 && dusk.nightOffsetEV > -1)
        let day = ramp.update(metered: 0.18, lux: 1000, exposedWith: ramp.settings)
        #expect(day.phase == "day" && day.stepEV == 0 && day.note.hasPrefix("held"))
    }

    @Test("a bias keeps its spread around the ramped base")
    func bias() {
        let ramp = ExposureRamp(config, settings: .init(exposure: .milliseconds(8), gain: 1))
        #expect(abs(ramp.settings(bias: 2).total / ramp.settings.total - 4) < 1e-6)
        #expect(abs(ramp.settings(bias: -2).total / ramp.settings.total - 0.25) < 1e-6)
    }
}

@Suite("White balance cross-faded from slot to slot")
struct WhiteBalanceFadeTests {
    @Test("the first slot takes what AWB measures; after a jump in the light each slot moves halfway, at most the bound per slot, and arrives")
    func fade() {
        var f = WhiteBalanceFade(maxStep: 0.1)
        let daylight = ColourGains(red: 2.0, blue: 1.6), tungsten = ColourGains(red: 1.2, blue: 2.8)
        #expect(f.next(measured: daylight) == daylight)
        var previous = daylight
        var slots = 0
        while slots < 200 {
            let g = f.next(measured: tungsten)
            #expect(abs(log2(g.red / previous.red)) <= 0.1 + 1e-12 && abs(log2(g.blue / previous.blue)) <= 0.1 + 1e-12, "\(previous) -> \(g)")
            // Always between where it was and where it is going.
            #expect(g.red <= previous.red && g.red >= tungsten.red - 1e-9 && g.blue >= previous.blue && g.blue <= tungsten.blue + 1e-9)
            previous = g
            slots += 1
            if abs(log2(g.red / tungsten.red)) < 0.001 && abs(log2(g.blue / tungsten.blue)) < 0.001 { break }
        }
        // 0.74 stops of red at 0.1 per slot, then halving: some 7 slots bound, then about ten more.
        #expect(slots > 7 && slots < 30, "\(slots) slots")
        // Restored from the journal, it goes on from the gains it had.
        var resumed = WhiteBalanceFade(maxStep: 0.1, applied: daylight)
        #expect(abs(log2(resumed.next(measured: tungsten).red / daylight.red) + 0.1) < 1e-9)
    }
}
