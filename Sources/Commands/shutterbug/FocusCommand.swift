import ArgumentParser
import JobOptions
import Capture
import CaptureScheduler
import KMS
import ShutterbugCore

struct Focus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock focus at a lens position and print the first frame that carries it.",
        discussion: """
            The reported lens position is the commanded one and already shows on the frame that \
            commanded the move; the lens is there one frame later plus its settle time. The \
            sync frame printed is that frame.
            """)

    @OptionGroup var camera: CameraOptions
    @OptionGroup var previewOptions: PreviewOptions

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Lens position in dioptres (0 = infinity, 2 = 50 cm).", valueName: "dpt"))
    var lens: Double

    @Flag(name: .long, help: "Print one JSON object.")
    var json = false

    func validate() throws {
        try NumericInput.check(lens, "--lens", in: 0...100, unit: "dioptres")
    }

    func run() async throws {
        let cam = try camera.open()
        defer { cam.release() }
        let session = CaptureSession(backend: cam)
        let preview = previewOptions.open()
        defer { preview?.close() }
        try await session.start(streams: [StreamRequest(role: .viewfinder)], preparedBracketCount: 1, sinks: preview.map { [$0] } ?? [], framesPerSink: PreviewOptions.framesPerSink)
        // Stopped whatever the lock's outcome, before the defer releases the camera: frames
        // still being read are done with first (issue 49 item 13).
        let result: CaptureSession.ConfigurationResult
        do {
            result = try await session.configure { $0.lockedFocus = Dioptres(lens) }
        } catch {
            await session.stop()
            throw error
        }
        await session.stop()
        if let preview {
            preview.close()
            notice(preview.summaryLine)
        }
        for a in result.adjustments { notice("adjusted: \(a)") }
        guard let sync = result.focus else { throw ShutterbugError(.system, "focus lock reported no sync point") }
        if json {
            var o = JSONObject()
            o.add("camera", cam.info.id)
            o.add("lens", lens)
            o.add("syncFrame", Int(sync.sequence))
            o.add("syncTimestampNs", sync.timestamp?.nanoseconds)
            o.add("requestFrame", Int(sync.requestFrame))
            o.add("framesAfterRequest", sync.framesAfterRequest)
            print(o.text)
        } else {
            print("focus at \(String(format2: lens)) dpt on \(cam.info.id): first frame carrying it \(sync.sequence) (t=\(sync.timestamp?.description ?? "-")), \(sync.framesAfterRequest) frames after the request's own frame \(sync.requestFrame)")
        }
    }
}
