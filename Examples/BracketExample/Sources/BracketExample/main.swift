// A -2/0/+2 EV bracket on the simulated HQ camera, through the AVFoundation-shaped API: photo
// settings with a unique ID, the settings resolved before the first frame, the capture's phases
// as an async sequence, and each photo with the metadata of the frame it provably is.
import Capture
import ShutterbugCore
import SimulatedCamera
#if canImport(Glibc)
import Glibc
#endif

var options = SimulationOptions()
options.clock = .virtual  // as fast as the machine goes; .realTime paces frames like a sensor
options.seed = 1
let camera = SimulatedCamera(profile: .imx477, options: options)

let session = CaptureSession(backend: camera)
let configuration = try await session.start(stream: StreamRequest(role: .still, width: 640, height: 480))
print("streaming: " + configuration.streams.map { "\($0.role) \($0.width)x\($0.height)" }.joined(separator: ", "))

let settings = PhotoSettings(bracket: .exposureBias([-2, 0, 2]))
var photos = 0
for try await event in await session.capture(settings) {
    switch event {
    case .settingsResolved(let resolved):
        print("capture \(resolved.uniqueID): \(resolved.steps.count) steps planned")
    case .exposureStarted(let t):
        print("exposure started at \(t)")
    case .exposureEnded(let t):
        print("exposure ended at \(t)")
    case .photo(let photo):
        let m = photo.metadata
        print("step \(photo.step.index + 1) (\(photo.step.requested)): frame \(m.sequence), \(m.exposureTime.map { $0.exposureDescription } ?? "-") at gain \(m.analogueGain.map { String($0.value) } ?? "-")")
        photos += 1
        photo.release()  // the buffers go back to the camera
    case .captureFinished(let resolved):
        print("finished: \(resolved.steps.count) steps, \(resolved.discarded.count) frames discarded")
    }
}
await session.stop()
camera.release()
if photos != 3 {
    print("expected 3 photos, got \(photos)")
    exit(1)
}
