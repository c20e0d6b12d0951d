import ArgumentParser
import JobOptions
import ShutterbugCore

/// The one rule every command follows for DNG's raw stream. On a Pi the raw stream picks the
/// sensor mode, and by default it asks for the full sensor (4056x3040 at 10 fps on the HQ
/// camera, where 640x480 alone streams at 120): so the raw stream asks instead for the mode the
/// processed streams run in alone, unless `--raw-size` names one, and the command says which
/// mode it got.
struct RawStreamRule {
    /// The mode the processed streams run in without a raw stream.
    var alone: SensorModeReport?
    /// `--raw-size`, when given.
    var requested: (Int, Int)?

    /// Configures `camera` with `processed` alone to learn its mode, then returns the raw
    /// stream to add beside them.
    static func raw(for camera: any CameraBackend, processed: [StreamRequest], rawSize: String?) throws -> (StreamRequest, RawStreamRule) {
        let requested = try NumericInput.size(rawSize, "--raw-size", example: "2028x1520")
        _ = try camera.configure(processed)
        let rule = RawStreamRule(alone: camera.sensorModeReport, requested: requested)
        var raw = StreamRequest(role: .raw)
        if let (w, h) = requested ?? rule.alone.flatMap({ m in m.width.flatMap { w in m.height.map { (w, $0) } } }) {
            raw.width = w
            raw.height = h
        }
        return (raw, rule)
    }

    /// What to tell the user once the camera runs in `mode`: the sensor mode DNG's raw stream
    /// streams in, and whether it is slower than the processed stream alone would be.
    func line(_ mode: SensorModeReport?) -> String? {
        guard let mode else { return nil }
        if let alone, alone.isFaster(than: mode) {
            return requested != nil
                ? "--raw-size puts the sensor in \(mode), slower than the \(alone) the processed stream runs in alone"
                : "DNG needs a raw stream, which switches the sensor from \(alone) to \(mode)"
        }
        return "DNG's raw stream: sensor mode \(mode)\(requested == nil ? ", the processed stream's own" : ", from --raw-size")"
    }
}
