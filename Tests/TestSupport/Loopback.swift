#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection to 127.0.0.1:`port`, as a raw socket (for tests that must send what no HTTP
/// client sends: half a request, a byte at a time); nil where connect fails (errno says why).
public func loopbackConnection(port: UInt16) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard rc == 0 else {
        let saved = errno
        close(fd)
        errno = saved
        return nil
    }
    return fd
}
