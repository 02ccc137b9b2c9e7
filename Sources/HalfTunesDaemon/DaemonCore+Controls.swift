// A new task's controls (expected checksum, bandwidth limit, priority, begin date): checked and applied at task.create.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// task.create's checks of the issue-4 controls: checksum (downloads only), bandwidth limit.
    func validateControls(_ p: TaskCreateParams) throws(RPCError) {
        if let checksum = p.checksum {
            guard p.kind == nil || p.kind == .download else {
                throw RPCError.invalidParams("checksum applies to downloads only (this is a \(p.kind!.rawValue) task)")
            }
            if let problem = Checksum.problem(with: checksum) {
                throw RPCError.invalidParams("checksum \(problem)")
            }
        }
        if let limit = p.bandwidthLimit, let problem = ByteRate.problem(with: limit) {
            throw RPCError.invalidParams("bandwidthLimit must be \(problem)")
        }
        if let date = p.earliestBeginDate, Timestamp.parse(date) == nil {
            throw RPCError.invalidParams("earliestBeginDate must be an RFC 3339 date-time such as "
                                         + "2026-11-25T22:00:00Z or 2026-11-25T23:00:00+01:00 (got '\(date)')")
        }
        if let n = p.maxConnections {
            guard p.kind == nil || p.kind == .download else {
                throw RPCError.invalidParams("maxConnections applies to downloads only (this is a \(p.kind!.rawValue) task)")
            }
            let range = SessionConfiguration.maxConnectionsRange
            guard range.contains(n) else {
                throw RPCError.invalidParams("maxConnections must be from \(range.lowerBound) to \(range.upperBound) (got \(n))")
            }
        }
    }

    /// Stores the controls of `p` (already validated) in a new task's row.
    func applyControls(_ p: TaskCreateParams, to record: inout TaskRecord) {
        record.checksum = p.checksum.flatMap { Checksum(parsing: $0)?.description }
        record.priority = p.priority ?? .normal
        record.bandwidthLimit = p.bandwidthLimit.flatMap { $0 > 0 ? $0 : nil }
        record.maxConnections = p.maxConnections
        record.earliestBeginDate = p.earliestBeginDate.flatMap(Timestamp.parse)
    }
}
