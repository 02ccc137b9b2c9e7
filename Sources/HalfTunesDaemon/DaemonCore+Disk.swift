// Each user's share of the disk (`max-disk-per-uid`): the ledger's charges kept by the runner as partials come and go.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// The ledger of `configuration.maxDiskPerUID`: a percentage is of the downloads directory's file system
    /// (the nearest existing directory on its way), as it is at start; the daemon's own uid and root are not
    /// limited.
    static func diskLedger(for configuration: DaemonConfiguration) -> DiskLedger {
        var fs = statvfs()
        var path = configuration.downloadsDirectory
        while statvfs(path, &fs) != 0, path != "/" {
            path = (path as NSString).deletingLastPathComponent
            if path.isEmpty { path = "/" }
        }
        let size = fileSystemSize(fs).total
        var limit = configuration.maxDiskPerUID.bytes(ofFileSystemSize: size)
        if case .percent = configuration.maxDiskPerUID, size <= 0 { limit = nil } // a size nobody could read: no share
        return DiskLedger(limit: limit, exempt: [0, geteuid()])
    }

    /// Removes a partial file the daemon made (`PartialFile.remove`) and its charge.
    func discardPartial(_ path: String) {
        PartialFile.remove(path: path)
        diskLedger.remove(path)
    }

    /// Refuses a new download while its uid's partials already hold all that `max-disk-per-uid` allows: it could
    /// not write a byte.
    func checkDiskBudget(owner: UInt32) throws(RPCError) {
        guard let limit = diskLedger.limit(for: owner) else { return }
        let held = diskLedger.charged(owner)
        guard held < limit else {
            throw RPCError(.limitExceeded, "uid \(owner)'s unfinished downloads and kept resume data already hold \(held) "
                + "bytes on disk, all that max-disk-per-uid allows (\(limit) bytes); let some finish, or cancel some "
                + "(resume data keeps its bytes until redeemed or expired)")
        }
    }

    /// At start, after the tasks (whose partials `recover` charges as it reads them): what each kept resume-data
    /// partial holds.
    func chargeResumeDataPartials() {
        guard diskLedger.limitsAnyone else { return }
        for token in (try? journal.resumeTokens(createdBefore: .infinity)) ?? [] {
            guard let uid = state.sessions[token.session]?.record.uid, diskLedger.limit(for: uid) != nil else { continue }
            let held = token.ranges.clipped(to: PartialFile.length(path: token.partialPath) ?? 0).count
            diskLedger.set(token.partialPath, uid: uid, bytes: held)
        }
    }
}
