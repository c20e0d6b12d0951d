import ArgumentParser
import Capture
import ImageOutput
import KMS
import ShutterbugCore

/// The camera, its streams, its preview and its session, opened one way for every command
/// (`bracket`, `trigger`, `timelapse`, `serve`): the processed stream the command asks for, the
/// raw stream beside it when DNG is wanted (its sensor mode chosen by `RawStreamRule`, said
/// once), a viewfinder stream at the display's size when there is a preview, and the session
/// started with room for the command's brackets. What the camera adjusted is said the same way
/// everywhere.
struct CaptureRig {
    let camera: any CameraBackend
    let session: CaptureSession
    let configuration: CameraConfiguration
    let preview: PreviewSink?
    let rawRule: RawStreamRule?

    /// Whether to add the raw stream for DNG.
    enum Raw {
        case none
        /// DNG is asked for: the raw stream in the processed stream's mode (or `--raw-size`'s).
        case forDNG(rawSize: String?)
    }

    /// Opens and starts it. A configuration the camera refuses or the memory budget does not
    /// hold is a usage error (exit 64) when `usageErrors`; the camera is released and the
    /// preview closed on any failure.
    ///
    /// - Parameters:
    ///   - controls: the controls to start with, given the opened camera (an external-trigger
    ///     sensor's fixed exposure), or nil.
    static func open(_ open: () throws -> any CameraBackend, processed: StreamRequest, raw: Raw, preview previewOptions: PreviewOptions? = nil,
                     bracketCount: Int, holding held: HeldFrames = .none, bursts: [BurstRequest] = [], controls: (any CameraBackend) throws -> CameraControls? = { _ in nil }, usageErrors: Bool = true,
                     notice: (String) -> Void) async throws -> CaptureRig {
        let cam = try open()
        let preview = previewOptions?.open()
        do {
            let session = CaptureSession(backend: cam)
            var streams = [processed]
            var rule: RawStreamRule?
            if case .forDNG(let rawSize) = raw {
                let (stream, r) = try RawStreamRule.raw(for: cam, processed: [processed], rawSize: rawSize)
                streams.append(stream)
                rule = r
            }
            // A preview gets its own viewfinder stream at the display's size, beside the still
            // (and raw) streams, as the Pi's Viewfinder role would.
            if let preview { streams.append(PreviewOptions.viewfinder(for: preview.display, camera: cam)) }
            let config: CameraConfiguration
            do {
                config = try await session.start(streams: streams, preparedBracketCount: max(bracketCount, 1), controls: try controls(cam),
                                                 sinks: preview.map { [$0] } ?? [], framesPerSink: PreviewOptions.framesPerSink, holding: held, bursts: bursts)
            } catch let e as ShutterbugError where e.code == .invalidArgument && usageErrors {
                // Over the memory budget, or a configuration the camera refuses: said before
                // anything is captured (exit 64).
                throw ValidationError(e.message)
            }
            for a in config.adjustments { notice("adjusted: \(a)") }
            if let line = rule?.line(cam.sensorModeReport) { notice(line) }
            return CaptureRig(camera: cam, session: session, configuration: config, preview: preview, rawRule: rule)
        } catch {
            preview?.close()
            cam.release()
            throw error
        }
    }

    /// What the files say about the camera: its profile, or what libcamera reports of it.
    var description: CameraDescription { Bracket.cameraDescription(camera, configuration) }

    /// A writer for the rig's streams into `directory`, checked for `formats`.
    func writer(_ directory: OutputDirectory, formats: Set<PhotoFormat>, template: FileNameTemplate = .default, jpegQuality: Int = 92,
                contactSheet: Bool = false) throws -> PhotoFileWriter {
        let writer = try PhotoFileWriter(directory: directory, streams: configuration.streams, camera: description, template: template,
                                         jpegQuality: jpegQuality, contactSheet: contactSheet)
        try writer.check(formats)
        // A photo a killed run renamed into place after its capture's last sidecar is named
        // there (not in a timelapse's folder, whose journal is its record and keeps each
        // sidecar's checksum).
        directory.listPhotosAfterInterruptedSidecars(template: template)
        return writer
    }

    /// Runs `body`, then closes the rig however it ended: the session stopped first (copies
    /// still reading the camera's buffers finish, every request back), then the preview closed
    /// (the display put back) and the camera released. A camera released under a running session
    /// (a `defer` on an early error) could unmap a buffer a copy was reading.
    func closing<T>(_ body: () async throws -> T) async throws -> T {
        let result: T
        do {
            result = try await body()
        } catch {
            await close()
            throw error
        }
        await close()
        return result
    }

    /// Stops the session, closes the preview and releases the camera.
    func close() async {
        await session.stop()
        preview?.close()
        camera.release()
    }
}
