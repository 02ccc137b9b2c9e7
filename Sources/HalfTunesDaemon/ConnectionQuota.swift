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

/// The requests all of one uid's connections have read and not yet answered, against one budget
/// (`max-input-per-uid`): each connection pauses at 64 requests or 4 MiB of its own, but 64 connections of one
/// user would otherwise hold 256 MiB of queued lines. Past the budget, each of the uid's connections that has
/// requests of its own waiting stops being read (`ReadBacklog`).
final class UIDInput: Sendable {
    let maxPerUID: Int
    private let held = NIOLockedValueBox<[UInt32: Int]>([:])

    init(maxPerUID: Int) { self.maxPerUID = maxPerUID }

    /// Counts `bytes` read for `uid`; whether the uid now holds its budget or more.
    func charge(_ uid: UInt32, _ bytes: Int) -> Bool {
        held.withLockedValue { h in
            let now = h[uid, default: 0] + bytes
            h[uid] = now
            return now >= maxPerUID
        }
    }

    /// Gives back `bytes` answered (0: none); whether the uid still holds its budget or more.
    func release(_ uid: UInt32, _ bytes: Int) -> Bool {
        held.withLockedValue { h in
            let n = h[uid, default: 0] - bytes
            h[uid] = n > 0 ? n : nil
            return n >= maxPerUID
        }
    }

    func held(_ uid: UInt32) -> Int { held.withLockedValue { $0[uid, default: 0] } }
}

/// One connection's requests read and not yet answered, and whether its reading is paused for them: at 64
/// requests or 4 MiB of its own (resuming below 8 and 2 MiB), or while its uid's connections together hold
/// their budget (`UIDInput`). A connection is paused only while requests of its own wait, so the answer to
/// its last one always resumes it: one user's connections cannot hold each other paused for ever.
struct ReadBacklog: Equatable {
    static let maxQueuedRequests = 64
    static let maxQueuedBytes = 4 << 20
    static let resumeBelow = 8

    private(set) var queued = 0
    private(set) var bytes = 0
    /// What of `bytes` is counted against the uid's budget (lines read before the peer was known are not).
    private(set) var charged = 0
    private(set) var paused = false
    /// Its requests are no longer served (the connection was refused or ended): nothing more is charged.
    private(set) var closed = false

    /// Whether a line read now is counted for the uid.
    var charges: Bool { !closed }

    /// A line of `count` bytes was read (`charged`: counted for the uid, which now is `uidFull` or not); true:
    /// reading pauses now.
    mutating func read(_ count: Int, charged isCharged: Bool, uidFull: Bool) -> Bool {
        queued += 1
        bytes += count
        if isCharged { charged += count }
        guard !paused, queued >= Self.maxQueuedRequests || bytes >= Self.maxQueuedBytes || uidFull else { return false }
        paused = true
        return true
    }

    /// How many bytes the answer to a request of `count` bytes gives back to the uid's budget.
    func release(for count: Int) -> Int { min(count, charged) }

    /// A request of `count` bytes was answered, `released` of them given back to the uid (which now is
    /// `uidFull` or not); true: reading resumes now.
    mutating func answered(_ count: Int, released: Int, uidFull: Bool) -> Bool {
        queued -= 1
        bytes -= count
        charged -= released
        guard paused else { return false }
        let ownRoom = queued < Self.resumeBelow && bytes < Self.maxQueuedBytes / 2
        guard queued == 0 || (ownRoom && !uidFull) else { return false }
        paused = false
        return true
    }

    /// No more of its requests will be answered: what is still charged to the uid, to give back.
    mutating func close() -> Int {
        closed = true
        defer { charged = 0 }
        return charged
    }
}
