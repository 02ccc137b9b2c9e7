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
