import NIOConcurrencyHelpers

/// Counts open control connections per peer uid, so one user cannot exhaust the daemon's file
/// descriptors or memory by opening connections; the connection over the cap is told why and closed.
final class ConnectionQuota: Sendable {
    let maxPerUID: Int
    private let open = NIOLockedValueBox<[UInt32: Int]>([:])

    init(maxPerUID: Int) { self.maxPerUID = maxPerUID }

    /// Counts a new connection of `uid`; false (and nothing counted) when the uid is at its cap.
    func admit(_ uid: UInt32) -> Bool {
        open.withLockedValue { counts in
            let n = counts[uid, default: 0]
            guard n < maxPerUID else { return false }
            counts[uid] = n + 1
            return true
        }
    }

    func release(_ uid: UInt32) {
        open.withLockedValue { counts in
            let n = counts[uid, default: 0] - 1
            counts[uid] = n > 0 ? n : nil
        }
    }

    func count(_ uid: UInt32) -> Int { open.withLockedValue { $0[uid, default: 0] } }
}

/// The unsent output all of one uid's connections hold together, against one budget: 64 connections of 8 MiB
/// (and 48 MiB of large lines each) would otherwise let one user pin gigabytes.
final class UIDOutput: Sendable {
    let maxPerUID: Int
    private let held = NIOLockedValueBox<[UInt32: Int]>([:])

    init(maxPerUID: Int) { self.maxPerUID = maxPerUID }

    /// Counts `bytes` for `uid`; false when they would take it past its budget: then nothing is counted, and the
    /// `holding` bytes the caller had counted are given back in the same step (the caller closes its connection),
    /// so the uid's other connections never see them and are not closed in turn.
    func charge(_ uid: UInt32, _ bytes: Int, holding: Int) -> Bool {
        held.withLockedValue { h in
            let now = h[uid, default: 0]
            // One line is let through when the uid holds nothing else (a data task's body may be larger than a
            // small budget).
            guard now + bytes <= maxPerUID || now == 0 else {
                let left = now - holding
                h[uid] = left > 0 ? left : nil
                return false
            }
            h[uid] = now + bytes
            return true
        }
    }

    func release(_ uid: UInt32, _ bytes: Int) {
        held.withLockedValue { h in
            let n = h[uid, default: 0] - bytes
            h[uid] = n > 0 ? n : nil
        }
    }

    func held(_ uid: UInt32) -> Int { held.withLockedValue { $0[uid, default: 0] } }
}
