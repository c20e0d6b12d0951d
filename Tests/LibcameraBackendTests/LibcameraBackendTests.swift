import CameraConformance
import LibcameraBackend
import ShutterbugCore
import Testing

/// The libcamera backend against the real libcamera. Without a camera (CI's unit tier) the
/// manager still starts and lists nothing; the conformance suite needs a camera and runs on the
/// virtual board (vimc) or a Pi.
@Suite("libcamera backend")
struct LibcameraBackendTests {
    static let cameras: [CameraInfo] = (try? LibcameraManager.shared().cameras) ?? []
    static let hasCamera = !cameras.isEmpty

    @Test("the bridge was built against a known libcamera")
    func version() {
        let parts = LibcameraManager.libcameraVersion.split(separator: ".").compactMap { Int($0) }
        #expect(parts.count == 3)
    }

    @Test("no camera is a normal state: the manager starts and lists what is there")
    func managerStarts() throws {
        let m = try LibcameraManager.shared()
        for c in m.cameras {
            #expect(!c.id.isEmpty)
            #expect(!c.isSimulated)
        }
    }

    @Test("opening a camera that is not there names the ones that are")
    func openMissing() throws {
        let m = try LibcameraManager.shared()
        #expect {
            _ = try m.open("/base/no/such/camera")
        } throws: { error in
            guard let e = error as? ShutterbugError else { return false }
            return e.code == .noSuchCamera && e.message.contains("cameras present")
        }
    }

    static var conformance: CameraConformance {
        CameraConformance(
            stream: StreamRequest(role: .viewfinder, width: 636, height: 480),
            unsupportedControl: CameraControls(exposureTime: .milliseconds(10), analogueGain: Gain(2), lensPosition: Dioptres(1)),
            frameTimeout: .seconds(10)
        ) {
            let m = try LibcameraManager.shared()
            guard let first = m.cameras.first else { throw ShutterbugError(.noSuchCamera, "no camera") }
            return try m.open(first.id)
        }
    }

    @Suite("conformance on a real camera", .enabled(if: hasCamera, "needs a libcamera camera: runs on the virtual board (vimc) or a Raspberry Pi"))
    struct Conformance {
        @Test func configure() throws { try LibcameraBackendTests.conformance.configureReportsAdjustments() }
        @Test func buffers() throws { try LibcameraBackendTests.conformance.allocatesReadableBuffers() }
        @Test func capture() async throws { try await LibcameraBackendTests.conformance.capturesWithRequestReuse(frames: 100) }
        @Test func stop() async throws { try await LibcameraBackendTests.conformance.stopReturnsEveryRequest() }
        @Test func restart() async throws { try await LibcameraBackendTests.conformance.restartsAfterStop() }
        @Test func misuse() throws { try LibcameraBackendTests.conformance.rejectsMisuse() }
        @Test func unsupported() async throws { try await LibcameraBackendTests.conformance.reportsUnsupportedControls() }
        @Test func release() async throws { try await LibcameraBackendTests.conformance.releaseEndsTheSequence() }
    }
}
