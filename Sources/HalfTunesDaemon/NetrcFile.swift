// The daemon user's netrc file (`netrc` setting, else $NETRC or ~/.netrc), read again when it changes.
import Foundation
import HalfTunesEngine
import HalfTunesProtocol
import NIOConcurrencyHelpers

/// Credentials for the tasks of the daemon's own user that carry none of their own (`Netrc`): looked up by the
/// task URL's host at each attempt's start. The file is checked for a change (inode, size, mtime) at most once a
/// second, so an attempt costs a lock and, rarely, a `stat`; a missing or unreadable file is no credentials.
/// Thread-safe.
final class NetrcFile: Sendable {
    private struct Stamp: Equatable {
        var inode: UInt64
        var size: Int64
        var modified: Double
    }

    private struct Cache {
        var checkedAt = -Double.infinity
        var stamp: Stamp?
        var netrc = Netrc()
    }

    let path: String
    private let cache = NIOLockedValueBox(Cache())

    init(path: String) {
        self.path = path
    }

    func credentials(for url: String, now: Double) -> Credentials? {
        guard let host = URLComponents(string: url)?.host, !host.isEmpty else { return nil }
        return current(now: now).credentials(for: host)
    }

    private func current(now: Double) -> Netrc {
        cache.withLockedValue { c in
            guard now - c.checkedAt >= 1 else { return c.netrc }
            c.checkedAt = now
            var st = stat()
            guard stat(path, &st) == 0 else {
                c.stamp = nil
                c.netrc = Netrc()
                return c.netrc
            }
            let stamp = Stamp(inode: UInt64(st.st_ino), size: Int64(st.st_size),
                              modified: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
            guard stamp != c.stamp else { return c.netrc }
            c.stamp = stamp
            c.netrc = (try? String(contentsOfFile: path, encoding: .utf8)).map(Netrc.parse) ?? Netrc()
            return c.netrc
        }
    }
}
