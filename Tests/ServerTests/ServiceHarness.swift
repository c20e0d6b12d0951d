import Capture
import Foundation
import ImageOutput
@testable import Server
import ShutterbugCore
import SimulatedCamera

/// A running `CameraService` on the simulated IMX477 in virtual time (640x480 stills), over a
/// fresh output folder; `body` gets the service, the folder and the API's access settings.
/// `configure` adjusts the simulation (a scene schedule, a seed).
func withSimulatedService<T: Sendable>(token: String? = nil, reserve: Int64 = 64 << 20, holding: HeldFrames = .none, prepare: (String) throws -> Void = { _ in },
                                       configure: (inout SimulationOptions) -> Void = { _ in },
                                       _ body: @Sendable (CameraService, String, HTTPAPI.Access) async throws -> T) async throws -> T {
    let dir = NSTemporaryDirectory() + "sb-api-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var options = SimulationOptions()
    options.clock = .virtual
    options.seed = 3
    configure(&options)
    let cam = SimulatedCamera(profile: .imx477, options: options)
    defer { cam.release() }
    let session = CaptureSession(backend: cam)
    let config = try await session.start(stream: StreamRequest(role: .still, width: 640, height: 480), preparedBracketCount: 5, holding: holding)
    try prepare(dir)
    let directory = try OutputDirectory(path: dir, reserve: reserve)
    let writer = try PhotoFileWriter(directory: directory, streams: config.streams, camera: CameraDescription(profile: .imx477))
    let service = CameraService(session: session, camera: cam, writer: writer, directory: directory, sensorModes: cam.capabilities.sensorModes)
    defer { Task { await session.stop() } }
    return try await body(service, dir, HTTPAPI.Access(host: "127.0.0.1", port: 8080, token: token))
}
