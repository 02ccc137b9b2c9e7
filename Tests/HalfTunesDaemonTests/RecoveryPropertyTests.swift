import Foundation
import GRDB
@testable import HalfTunesDaemon
import HalfTunesCore
import HalfTunesEngine
@testable import HalfTunesJournal
import HalfTunesProtocol
import Logging
import NIOPosix
import Testing

/// Recovery, property-style: a journal of many tasks in every state, spread over two users' sessions, is
/// recovered by a real `DaemonCore` (no transfer may start: `maxConcurrent` 0) to the states, queue order and
/// counts the journal implies; recovering again from what that core left gives exactly the same.
@Suite("Recovery of tasks in every state")
struct RecoveryPropertyTests {
    /// 20,000 in the suite (a debug build recovers them twice in about 30 s); `HALFTUNES_RECOVERY_TASKS=100000`
    /// runs issue 11's 100,000.
    static let taskCount = ProcessInfo.processInfo.environment["HALFTUNES_RECOVERY_TASKS"].flatMap { Int($0) } ?? 20_000

    /// What a client sees of one task.
    struct Seen: Equatable {
        var state: TaskState
        var queuePosition: Int?
        var waitingReason: String?
        var nextAttemptAt: String?
        var error: String?
        var bytesDurable: Int64
        var priority: TaskPriority?
    }

    @Test func aJournalOfTasksInEveryStateRecoversToTheSameStateTwice() async throws {
        let dir = NSTemporaryDirectory() + "recovery-" + ResumeData.newToken()
        try FileManager.default.createDirectory(atPath: dir + "/dl", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let now = Timestamp.now()
        let sessions: [(name: String, uid: UInt32)] = [("1000/a", 1000), ("1000/b", 1000), ("1001/c", 1001)]
        var rng = SplitMix(seed: 0x5EC0_7E4F)
        var rows: [TaskRecord] = []
        let states: [TaskState] = [.suspended, .queued, .running, .waiting, .completed, .failed, .canceled]
        for i in 0..<Self.taskCount {
            let session = sessions[Int(rng.next() % 3)]
            let state = states[Int(rng.next() % UInt64(states.count))]
            var r = TaskRecord(session: session.name, url: "http://127.0.0.1:9/\(i % 7)/f\(i)", state: state,
                               destination: dir + "/dl/f\(i)", partialPath: dir + "/dl/.f\(i).partial",
                               queueOrder: Int64(rng.next() % 5_000) - (rng.next() % 50 == 0 ? 10_000 : 0),
                               createdAt: now, updatedAt: now, resourceDeadline: now + 1e6,
                               priority: [TaskPriority.low, .normal, .high][Int(rng.next() % 3)])
            switch state {
            case .waiting:
                r.waitingReason = TaskError(code: TaskErrorCode.connectionLost, message: "lost \(i)")
                r.nextAttemptAt = now + 1e5 + Double(i)
            case .failed, .canceled:
                r.error = TaskError(code: state == .failed ? TaskErrorCode.ioError : TaskErrorCode.canceled, message: "ended \(i)")
            case .completed:
                r.bytesDurable = Int64(i)
                r.location = r.destination
            default:
                break
            }
            rows.append(r)
        }

        let journal = try Journal(path: dir + "/journal.sqlite")
        for s in sessions {
            try journal.upsertSession(SessionRecord(identifier: s.name, uid: s.uid, configuration: SessionConfiguration(),
                                                    state: .active, createdAt: now))
        }
        let insert = "INSERT INTO tasks (" + TaskRecord.columns.joined(separator: ", ") + ") VALUES ("
            + Array(repeating: "?", count: TaskRecord.columns.count).joined(separator: ", ") + ")"
        let written = rows
        let ids: [Int64] = try await journal.dbQueue.write { db in
            var ids: [Int64] = []
            for r in written {
                try db.cachedStatement(sql: insert).execute(arguments: try r.arguments())
                ids.append(db.lastInsertedRowID)
            }
            return ids
        }
        for (i, id) in ids.enumerated() { rows[i].id = id }

        // What the journal implies: running tasks are queued again; the queue is ordered by priority, then the
        // old queue order, then id, and shared between the two users; every other state stays.
        let owner = Dictionary(uniqueKeysWithValues: sessions.map { ($0.name, $0.uid) })
        let queued = rows.filter { $0.state == .queued || $0.state == .running }
            .sorted { ($0.priority.rank, $0.queueOrder, $0.id!) < ($1.priority.rank, $1.queueOrder, $1.id!) }
        let order = QueuePlanner.fairOrder(queued.map { ($0.id!, owner[$0.session]!) }, running: [:])
        let position = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0 + 1) })
        var expected: [Int64: Seen] = [:]
        for r in rows {
            let state: TaskState = r.state == .running ? .queued : r.state
            expected[r.id!] = Seen(state: state, queuePosition: position[r.id!], waitingReason: r.waitingReason?.code,
                                   nextAttemptAt: r.nextAttemptAt.map(Timestamp.format), error: r.error?.code,
                                   bytesDurable: r.bytesDurable, priority: r.priority)
        }
        var counts: [String: Int] = [:]
        for seen in expected.values { counts[seen.state.rawValue, default: 0] += 1 }

        let first = try await Self.recover(journal, dir: dir)
        #expect(first.status == counts)
        let mismatches = expected.filter { first.tasks[$0.key] != $0.value }
        #expect(mismatches.isEmpty, "\(mismatches.count) tasks differ, e.g. \(String(describing: mismatches.first)) vs \(String(describing: mismatches.first.map { first.tasks[$0.key] }))")
        #expect(first.tasks.count == Self.taskCount)

        let second = try await Self.recover(journal, dir: dir)
        #expect(second.status == first.status)
        #expect(second.tasks == first.tasks, "a second recovery differs from the first")
        try journal.close()
    }

    /// Runs a core over the journal: recovery, then every task as root sees it through task.list's pages.
    static func recover(_ journal: Journal, dir: String) async throws -> (status: [String: Int], tasks: [Int64: Seen]) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let clients = try HTTPClients(eventLoopGroup: group, caFile: nil)
        let config = DaemonConfiguration(socketPath: dir + "/control.sock", stateDirectory: dir,
                                         downloadsDirectory: dir + "/dl", maxConcurrent: 0)
        let core = DaemonCore(configuration: config, journal: journal, clients: clients,
                              logger: Logger(label: "recovery-test"))
        try await core.recover()
        var seen: [Int64: Seen] = [:]
        var cursor: String?
        repeat {
            let page = try await core.listTasks(TaskListParams(cursor: cursor), caller: Caller(uid: 0)).decoded()
            for t in page.tasks {
                seen[t.id] = Seen(state: t.state, queuePosition: t.queuePosition, waitingReason: t.waitingReason?.code,
                                  nextAttemptAt: t.nextAttemptAt, error: t.error?.code, bytesDurable: t.bytesDurable,
                                  priority: t.priority)
            }
            cursor = page.nextCursor
        } while cursor != nil
        let status = await core.status().tasks.filter { $0.value > 0 }
        await core.shutdown()
        await clients.shutdown()
        try await group.shutdownGracefully()
        return (status, seen)
    }
}
