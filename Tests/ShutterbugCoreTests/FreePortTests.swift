import Foundation
import Testing
@testable import TestSupport

@Suite("The tests' own servers: ports no connection can take from them across a restart")
struct FreePortTests {
    @Test("freePort hands out ports below the kernel's ephemeral range, each once, each free on every address")
    func belowEphemeral() throws {
        let range = Broker.ephemeralPorts
        var seen: Set<Int> = []
        for _ in 0..<200 {
            let port = try Broker.freePort()
            #expect(port >= 10_000 && port < range.lowerBound, "\(port) is not below the ephemeral range \(range)")
            #expect(seen.insert(port).inserted, "\(port) handed out twice")
        }
        // A port something listens on is never handed out: hold one, and it is refused.
        let held = try Broker.freePort()
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        a.sin_port = UInt16(held).bigEndian
        let bound = withUnsafePointer(to: &a) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        #expect(bound && listen(fd, 1) == 0)
        #expect(!Broker.canBind(held), "port \(held) is listened on, yet looks free")
    }
}
