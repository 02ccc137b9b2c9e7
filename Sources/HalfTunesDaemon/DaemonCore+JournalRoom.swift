// What room the journal has: free space on its file system, and each uid's share of it.
import Foundation
import HalfTunesCore
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// The size of the state directory's file system and what of it is free (nil: unreadable).
    func stateFileSystem() -> (total: Int64, available: Int64)? {
        var fs = statvfs()
        guard statvfs(configuration.stateDirectory, &fs) == 0 else { return nil }
        return fileSystemSize(fs)
    }

    /// Refuses a call that would add to the journal while the state directory's file system has less free than
    /// `state-min-free-space` keeps (the journal must never meet ENOSPC): reads, pauses, cancels and
    /// acknowledgements (which free space) go on, and the call works again once space returns.
    func checkStateSpace(_ method: String) throws(RPCError) {
        guard let (total, available) = stateFileSystem() else { return }
        let floor = configuration.stateMinFreeSpace.bytes(ofFileSystemSize: total)
        guard available < floor else { return }
        throw RPCError(.limitExceeded, "\(method) is refused: the file system of halftunesd's state directory "
            + "(\(configuration.stateDirectory)) has \(available) bytes free, less than the \(floor) that "
            + "state-min-free-space (\(configuration.stateMinFreeSpace)) keeps for the journal; pauses, cancels and "
            + "reads still work, and new work is taken again once space is freed")
    }
}

/// What each uid holds in the journal, as last read (`Journal.journaledBytes`): read again when older than a
/// second, so a burst of creates costs one read per uid per second, not one per call.
struct JournalShares {
    static let maxAge = 1.0
    var read: [UInt32: (bytes: Int64, at: Double)] = [:]
}

extension DaemonCore {
    /// Refuses new tasks of a uid whose sessions already hold all `max-journal-per-uid` allows (root and the
    /// daemon's own user are not limited). What is journaled is never dropped: acknowledging events, a data task's
    /// body taken, finished tasks deleted after their retention make room again.
    func checkJournalShare(uid: UInt32, method: String = "task.create", reading: Bool = true) async throws(RPCError) {
        guard !state.diskExempt.contains(uid) else { return }
        let total = stateFileSystem()?.total ?? 0
        if case .percent = configuration.maxJournalPerUID, total <= 0 { return }
        guard let limit = configuration.maxJournalPerUID.bytes(ofFileSystemSize: total) else { return }
        let now = clock()
        let bytes: Int64
        if let last = journalShares.read[uid], !reading || now - last.at < JournalShares.maxAge {
            bytes = last.bytes
        } else if reading {
            bytes = try await nonblocking { try $0.journaledBytes(uid: uid) }
            journalShares.read[uid] = (bytes, now)
        } else {
            return // never read yet: the next task.create reads it
        }
        guard bytes >= limit else { return }
        throw RPCError(.limitExceeded, "\(method) is refused: uid \(uid)'s sessions hold \(bytes) bytes in the journal (unacknowledged "
            + "events, data-task bodies, finished tasks kept), all that max-journal-per-uid (\(configuration.maxJournalPerUID)) "
            + "allows: acknowledge events (events.ack), or let finished tasks go (finishedTaskRetention), to create more")
    }
}

extension DaemonCore {
    /// Adds a new task's row, and the most its response may keep, to the cached share of `owner`.
    func noteJournaled(_ record: TaskRecord, owner: UInt32) {
        guard var last = journalShares.read[owner] else { return }
        var bytes = record.url.utf8.count + record.destination.utf8.count + record.partialPath.utf8.count
            + (record.description?.utf8.count ?? 0) + record.headers.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        if record.kind == TaskKind.data.rawValue {
            bytes += ResponseLimit.data(maxBytes: record.maxResponseBytes).maxBytes / 3 * 4 // as base64
        }
        let (sum, overflow) = last.bytes.addingReportingOverflow(Int64(bytes))
        last.bytes = overflow ? .max : sum
        journalShares.read[owner] = last
    }
}
