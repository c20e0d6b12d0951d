import CLibcameraBridge
import ShutterbugCore

// Conversions between the bridge's plain C structs and Shutterbug's types. No C type appears in
// a public signature.

extension sbc_controls {
    init(_ c: CameraControls) {
        self.init()
        set = c.set.rawValue  // ControlSet bits are sbc_control_bit values
        if let v = c.aeEnabled { ae_enable = v }
        if let e = c.exposureTime { exposure_time_us = Int64(e.microsecondsValue.rounded()) }
        if let g = c.analogueGain { analogue_gain = Float(g.value) }
        if let ev = c.exposureValue { exposure_value = Float(ev) }
        if let v = c.awbEnabled { awb_enable = v }
        if let g = c.colourGains { colour_gains = (Float(g.red), Float(g.blue)) }
        if let l = c.frameDurationLimits {
            frame_duration_min_us = Int64(l.lowerBound.microsecondsValue.rounded())
            frame_duration_max_us = Int64(l.upperBound.microsecondsValue.rounded())
        }
        if let m = c.afMode { af_mode = m.rawValue }
        if let p = c.lensPosition { lens_position = Float(p.value) }
    }
}

extension CompletedRequest {
    init(_ c: sbc_completion, buffers: [any FrameBuffer]) {
        let has = { (bit: sbc_metadata_bit) in c.metadata_set & bit.rawValue != 0 }
        var m = FrameMetadata(sequence: c.sequence)
        if has(SBC_META_SENSOR_TIMESTAMP) { m.sensorTimestamp = SensorTime(nanoseconds: c.sensor_timestamp_ns) }
        if has(SBC_META_EXPOSURE_TIME) { m.exposureTime = .microseconds(Int64(c.exposure_time_us)) }
        if has(SBC_META_ANALOGUE_GAIN) { m.analogueGain = Gain(Double(c.analogue_gain)) }
        if has(SBC_META_DIGITAL_GAIN) { m.digitalGain = Gain(Double(c.digital_gain)) }
        if has(SBC_META_FRAME_DURATION) { m.frameDuration = .microseconds(c.frame_duration_us) }
        if has(SBC_META_LENS_POSITION) { m.lensPosition = Dioptres(Double(c.lens_position)) }
        if has(SBC_META_COLOUR_GAINS) { m.colourGains = ColourGains(red: Double(c.colour_gains.0), blue: Double(c.colour_gains.1)) }
        if has(SBC_META_COLOUR_TEMPERATURE) { m.colourTemperature = Int(c.colour_temperature) }
        if has(SBC_META_LUX) { m.lux = Double(c.lux) }
        if has(SBC_META_CONTROL_LIST_SEQUENCE) { m.controlListSequence = c.control_list_sequence }
        if has(SBC_META_COLOUR_CORRECTION_MATRIX) {
            m.colourCorrectionMatrix = withUnsafeBytes(of: c.colour_correction_matrix) { Array($0.bindMemory(to: Float.self)).map(Double.init) }
        }
        if has(SBC_META_SENSOR_BLACK_LEVELS) {
            m.sensorBlackLevels = withUnsafeBytes(of: c.sensor_black_levels) { Array($0.bindMemory(to: Int32.self)).map(Int.init) }
        }
        if has(SBC_META_SENSOR_TEMPERATURE) { m.sensorTemperature = Double(c.sensor_temperature) }
        if has(SBC_META_FOCUS_FOM) { m.focusFoM = Int(c.focus_fom) }
        if has(SBC_META_AF_STATE) { m.afState = AutofocusState(rawValue: Int(c.af_state)) }
        if has(SBC_META_FRAME_WALL_CLOCK) { m.wallClock = WallClockTime(nanoseconds: c.frame_wall_clock_ns) }
        // Without SensorTimestamp (vimc), the buffer's own timestamp is the frame's clock. A
        // cancelled request's buffer metadata is not filled in: ignore it.
        if m.sensorTimestamp == nil, c.status == SBC_REQUEST_COMPLETE || c.status == SBC_REQUEST_STARTUP, c.buffer_timestamp_ns > 0, c.buffer_timestamp_ns < UInt64(Int64.max) {
            m.sensorTimestamp = SensorTime(nanoseconds: Int64(c.buffer_timestamp_ns))
        }
        if c.status == SBC_REQUEST_CANCELLED { m.sequence = 0 }
        let status: CompletedRequest.Status
        switch c.status {
        case SBC_REQUEST_CANCELLED: status = .cancelled
        case SBC_REQUEST_ERROR: status = .error
        case SBC_REQUEST_STARTUP: status = .startup
        default: status = .complete
        }
        self.init(slot: Int(c.slot), cookie: c.cookie, status: status, metadata: m, buffers: buffers, requestSequence: c.request_sequence)
    }
}
