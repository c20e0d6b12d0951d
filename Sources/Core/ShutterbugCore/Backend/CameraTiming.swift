/// What the scheduler must know about the camera's timing to plan requests and judge frames.
public struct CameraTiming: Sendable, Hashable {
    /// Sensor frames after a request's paired frame on which its sensor controls can land.
    public var landingOffsets: ClosedRange<Int>
    /// Reported exposure is a whole number of lines: the matching tolerance.
    public var lineTime: Duration
    /// Integration margin: a frame lasts at least exposure + margin.
    public var margin: Duration
    /// The mode's shortest frame period.
    public var minFramePeriod: Duration
    /// The IPA runs at most this often; frames faster than this skip it (0: no limit).
    public var ipaMinInterval: Duration
    /// Analogue gain range, for adjusting requests.
    public var gainRange: ClosedRange<Double>
    /// Exposure range of the mode.
    public var exposureRange: ClosedRange<Duration>
    /// Time to read a frame out (for when a lens move has settled).
    public var readoutTime: Duration
    /// Mechanical settle time of the focus motor.
    public var lensSettleTime: Duration

    public init(landingOffsets: ClosedRange<Int>, lineTime: Duration, margin: Duration, minFramePeriod: Duration, ipaMinInterval: Duration, gainRange: ClosedRange<Double>, exposureRange: ClosedRange<Duration>, readoutTime: Duration, lensSettleTime: Duration = .milliseconds(12)) {
        self.landingOffsets = landingOffsets
        self.lineTime = lineTime
        self.margin = margin
        self.minFramePeriod = minFramePeriod
        self.ipaMinInterval = ipaMinInterval
        self.gainRange = gainRange
        self.exposureRange = exposureRange
        self.readoutTime = readoutTime
        self.lensSettleTime = lensSettleTime
    }

    /// The timing of a known sensor in one of its modes, on the Raspberry Pi pipeline.
    public init(profile: SensorProfile, mode: SensorMode, ipaMinInterval: Duration = .nanoseconds(33_333_333)) {
        self.init(landingOffsets: profile.delays.landingOffsets, lineTime: mode.lineTime, margin: mode.margin,
                  minFramePeriod: mode.minFramePeriod, ipaMinInterval: ipaMinInterval, gainRange: profile.analogueGainRange,
                  exposureRange: profile.exposureRange(in: mode), readoutTime: mode.readoutTime)
    }

    /// An exposure rounded to whole lines: what the sensor will apply and report.
    public func quantise(_ exposure: Duration) -> Duration {
        let line = lineTime.nanosecondsValue
        return lineTime * Int(max(1, (exposure.nanosecondsValue + line / 2) / line))
    }

    /// The shortest frame period at which the IPA runs on every frame, so settings can change
    /// on consecutive frames.
    public var everyFramePeriod: Duration { max(minFramePeriod, ipaMinInterval) }

    /// The frame durations auto exposure may use between captures: every frame's period up to
    /// a quarter second (the IPA's default longest frame).
    public var autoFrameDurationLimits: ClosedRange<Duration> { everyFramePeriod...max(everyFramePeriod, .milliseconds(250)) }

    /// The frame period for an exposure: long enough for it, never faster than every-frame,
    /// rounded up to a whole microsecond (libcamera's `FrameDurationLimits` unit), so the
    /// frame the sensor is given never cuts the exposure by a line.
    public func framePeriod(for exposure: Duration) -> Duration {
        let ns = (exposure + margin).nanosecondsValue
        return max(everyFramePeriod, .nanoseconds((ns + 999) / 1_000 * 1_000))
    }

    /// The most frames a request's sensor controls can take to land: the later landing, plus
    /// the frames the IPA may skip before it runs (ceil(interval / period) - 1).
    public func latestLanding(framePeriod: Duration) -> Int {
        let skip = framePeriod >= ipaMinInterval * 0.9 ? 0 : Int((ipaMinInterval * 0.9).nanosecondsValue / max(1, framePeriod.nanosecondsValue))
        return landingOffsets.upperBound + skip
    }
}

extension CameraTiming {
    /// What is assumed of a camera Shutterbug knows nothing about (vimc, a USB camera): late
    /// landings allowed, the frame and exposure limits it reports, the Pi IPA's 30 Hz.
    public static func conservative(limits: ControlLimits) -> CameraTiming {
        CameraTiming(landingOffsets: 3...6, lineTime: .microseconds(30), margin: .milliseconds(2), minFramePeriod: limits.frameDuration?.lowerBound ?? .milliseconds(33),
                     ipaMinInterval: .nanoseconds(33_333_333), gainRange: limits.analogueGain ?? 1...16,
                     exposureRange: limits.exposureTime ?? .microseconds(30)...(.seconds(1)), readoutTime: .milliseconds(35))
    }
}
