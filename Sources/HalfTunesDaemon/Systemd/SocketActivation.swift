import CSystemd
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The listening socket a service manager passed in (socket activation, `FileDescriptorName=control`).
struct ActivatedSocket: Sendable {
    let fd: Int32
    /// The socket's path as bound by the manager ("@name" for an abstract socket).
    let path: String
}

enum SocketActivationError: Error, CustomStringConvertible {
    case listenFDs(String)
    case noControlSocket([String])
    case notAUnixListener(fd: Int32, name: String)

    var description: String {
        switch self {
        case .listenFDs(let reason):
            return "cannot take the sockets passed by the service manager: \(reason)"
        case .noControlSocket(let names):
            return "the service manager passed sockets named \(names.joined(separator: ", ")) but none named 'control' "
                + "(set FileDescriptorName=control in the .socket unit)"
        case .notAUnixListener(let fd, let name):
            return "the socket '\(name)' passed as fd \(fd) is not a listening Unix stream socket "
                + "(use ListenStream=/path/to/control.sock in the .socket unit)"
        }
    }
}

enum SocketActivation {
    static let controlName = "control"

    /// The `control` socket from `$LISTEN_FDS`/`$LISTEN_FDNAMES`, or nil when the daemon was not socket-activated.
    /// A single unnamed socket is accepted too. Sockets other than `control` are closed.
    static func controlSocket(logger: Logger) throws(SocketActivationError) -> ActivatedSocket? {
        var rawNames: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = Int(sd_listen_fds_with_names(1, &rawNames))
        guard count >= 0 else { throw .listenFDs(String(cString: strerror(Int32(-count)))) }
        var names: [String] = []
        if let rawNames {
            for i in 0..<count {
                names.append(rawNames[i].map { String(cString: $0) } ?? "unknown")
                free(rawNames[i])
            }
            free(rawNames)
        }
        guard count > 0 else { return nil }
        while names.count < count { names.append("unknown") }
        let first = Int32(SD_LISTEN_FDS_START)
        let index: Int
        if let named = names.firstIndex(of: controlName) {
            index = named
        } else if count == 1 && names[0] == "unknown" {
            index = 0
        } else {
            for i in 0..<count { close(first + Int32(i)) }
            throw .noControlSocket(names)
        }
        for i in 0..<count where i != index {
            logger.warning("closing a socket passed by the service manager that halftunesd does not use",
                           metadata: ["fd": "\(first + Int32(i))", "name": "\(names[i])"])
            close(first + Int32(i))
        }
        let fd = first + Int32(index)
        guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
            close(fd)
            throw .notAUnixListener(fd: fd, name: names[index])
        }
        _ = fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC)
        return ActivatedSocket(fd: fd, path: boundPath(fd) ?? "fd \(fd)")
    }

    /// The path a Unix socket is bound to, from getsockname(2).
    static func boundPath(_ fd: Int32) -> String? {
        var addr = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let offset = MemoryLayout<sa_family_t>.size // sun_path follows sun_family
        guard rc == 0, Int(length) > offset else { return nil }
        let pathLength = Int(length) - offset
        return withUnsafeBytes(of: &addr.sun_path) { raw -> String? in
            let bytes = Array(raw.prefix(pathLength))
            if bytes.first == 0 { // abstract namespace
                return "@" + String(decoding: bytes.dropFirst(), as: UTF8.self)
            }
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
