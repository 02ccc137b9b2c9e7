import Foundation
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// task.create's admission is the state's: shutting down, the caps (counting the batch's earlier creates), the
/// session taking tasks, then the new task's lifecycle, first events and queue place.
@Suite("DaemonState: admitting new tasks")
struct DaemonStateAdmissionTests {
    typealias T = DaemonStateTests

    static func state(caps: DaemonState.Caps = DaemonState.Caps()) -> DaemonState {
        var state = DaemonState(limits: T.limits, caps: caps)
        for (name, uid) in [("a", UInt32(1)), ("b", 1), ("c", 2)] {
            _ = state.handle(.sessionOpening(SessionRecord(identifier: name, uid: uid, configuration: .init(), state: .active,
                                                           createdAt: 0), reconfigure: false), now: 0)
        }
        return state
    }

    /// A new task's row as the runner builds it (no id yet): a download when it has a destination, else a data task.
    static func new(_ session: String = "a", _ destination: String? = nil, start: Bool = false) -> DaemonState.NewTask {
        var row = TaskRecord(session: session, kind: destination == nil ? "data" : "download", url: "http://127.0.0.1:9/new",
                             state: .suspended, destination: destination ?? "", partialPath: "", createdAt: 0, updatedAt: 0)
        if let destination { // the runner's name has a random part: here /d/.file.partial for /d/file
            row.partialPath = (destination as NSString).deletingLastPathComponent + "/." + (destination as NSString).lastPathComponent
                + ".partial"
        }
        return DaemonState.NewTask(row: row, start: start)
    }

    static func admission(_ actions: [DaemonState.Action]) -> DaemonState.Admission? {
        guard actions.count == 1, case .admitted(let admission) = actions[0] else { return nil }
        return admission
    }

    static func refusal(_ actions: [DaemonState.Action]) -> DaemonState.CreateRefusal? {
        guard actions.count == 1, case .createRefused(let refusal) = actions[0] else { return nil }
        return refusal
    }

    /// The batch's admitted rows as the journal stores them (with these ids), as the runner feeds them to `created`.
    static func stored(_ state: DaemonState, ids: [Int64]) -> [TaskRecord] {
        zip(state.admitted.rows, ids).map { admitted, id in
            var record = admitted.record
            record.id = id
            return record
        }
    }

    @Test func aNewTaskIsSuspendedOrQueuedAtTheBackWithItsEvents() throws {
        var state = Self.state()
        let suspended = try #require(Self.admission(state.handle(.admitting(Self.new()), now: 0)))
        #expect(suspended.machine.state == .suspended && suspended.queueOrder == nil)
        #expect(suspended.events == [.stateChanged(state: .suspended, previous: nil, reason: nil)])
        #expect(suspended.owner == 1, "its session's uid owns it")
        #expect(Self.admission(state.handle(.admitting(Self.new("c")), now: 0))?.owner == 2)
        let before = state.nextQueueOrder
        let queued = try #require(Self.admission(state.handle(.admitting(Self.new(start: true)), now: 0)))
        #expect(queued.machine.state == .queued && queued.queueOrder == before)
        #expect(queued.events == [.stateChanged(state: .suspended, previous: nil, reason: nil),
                                  .stateChanged(state: .queued, previous: .suspended, reason: nil)])
        #expect(queued.machine.resourceDeadline == SessionConfiguration.defaultResourceTimeout) // its session's, from now (0)
        #expect(queued.resourceDeadline == SessionConfiguration.defaultResourceTimeout)
        // The next one queued takes the next place, although the first is not created yet.
        let next = try #require(Self.admission(state.handle(.admitting(Self.new(start: true)), now: 0)))
        #expect(next.queueOrder == before + 1 && state.nextQueueOrder == before + 2)
        // The resource deadline is its session's timeout from now.
        _ = state.handle(.sessionOpening(SessionRecord(identifier: "t", uid: 1, configuration: SessionConfiguration(resourceTimeout: 60),
                                                       state: .active, createdAt: 0), reconfigure: false), now: 0)
        let timed = try #require(Self.admission(state.handle(.admitting(Self.new("t", start: true)), now: 10)))
        #expect(timed.resourceDeadline == 70 && timed.machine.resourceDeadline == 70)
    }

    @Test func theCapsCountTheBatchsEarlierCreatesUntilTheyAreCreated() throws {
        var state = Self.state(caps: DaemonState.Caps(maxTasksPerSession: 2, maxTasksPerUID: 3))
        _ = state.join([T.task(1, session: "a", owner: 1)], now: 0)
        let second = try #require(Self.admission(state.handle(.admitting(Self.new("a")), now: 0)))
        #expect(Self.refusal(state.handle(.admitting(Self.new("a")), now: 0)) == .sessionTasks("a", held: 2, max: 2))
        // uid 1's other session: the uid's cap counts the admitted one too.
        _ = try #require(Self.admission(state.handle(.admitting(Self.new("b")), now: 0)))
        #expect(Self.refusal(state.handle(.admitting(Self.new("b")), now: 0)) == .ownerTasks(1, held: 3, max: 3))
        #expect(Self.admission(state.handle(.admitting(Self.new("c")), now: 0)) != nil) // uid 2 holds nothing
        // Created: the tasks count them now, the batch no longer does (not twice).
        _ = state.handle(.created(Self.stored(state, ids: [2])), now: 0) // the batch's first: the only one journaled
        #expect(state.tasks[2]?.machine == second.machine && state.tasks[2]?.owner == 1)
        #expect(state.admitted.isEmpty && state.tasks.unfinished(session: "a") == 2)
        #expect(Self.refusal(state.handle(.admitting(Self.new("a")), now: 0)) == .sessionTasks("a", held: 2, max: 2))
        #expect(Self.admission(state.handle(.admitting(Self.new("b")), now: 0)) != nil)
    }

    /// The admitted row is the state's: the runner's row with its lifecycle, resource deadline and queue place
    /// written in; `created` (the rows as the journal stored them, with their ids) makes each its task: the
    /// admission's machine and owner, an upload's length, `inserting` until the insert's outcome.
    @Test func aCreatedRowBecomesTheTaskItsAdmissionMade() throws {
        var state = Self.state()
        let before = state.nextQueueOrder
        let queued = try #require(Self.admission(state.handle(.admitting(Self.new("a", "/d/q", start: true)), now: 5)))
        var upload = Self.new("c")
        upload.row.kind = "upload"
        upload.bytesExpectedToSend = 4_096
        _ = try #require(Self.admission(state.handle(.admitting(upload), now: 5)))
        let rows = state.admitted.rows.map(\.record)
        #expect(rows.map(\.state) == [.queued, .suspended] && rows.map(\.queueOrder) == [before, 0])
        #expect(rows.allSatisfy { $0.resourceDeadline == 5 + SessionConfiguration.defaultResourceTimeout })
        #expect(rows[0].destination == "/d/q" && rows[1].kind == "upload", "the rest is the runner's row")
        let actions = state.handle(.created(Self.stored(state, ids: [7, 8])), now: 6)
        let (q, u) = (try #require(state.tasks[7]), try #require(state.tasks[8]))
        #expect(q.machine == queued.machine && q.owner == 1 && q.inserting && q.record.queueOrder == before)
        #expect(u.owner == 2 && u.bytesExpectedToSend == 4_096 && u.inserting && u.machine.state == .suspended)
        #expect(T.started(actions).isEmpty, "nothing starts before its row is written")
        #expect(state.admitted.isEmpty && state.admitted.rows.isEmpty)
        #expect(T.started(state.handle(.createsJournaled([7, 8], failed: false), now: 7)) == [7])
    }

    @Test func withdrawnAdmissionsFreeTheirCountsAndNamesButNotTheirPlaces() throws {
        var state = Self.state(caps: DaemonState.Caps(maxTasksPerSession: 1))
        let first = try #require(Self.admission(state.handle(.admitting(Self.new("a", "/d/x", start: true)), now: 0)))
        #expect(state.isReserved("/d/x") && !state.tasks.isReserved("/d/x"))
        #expect(Self.refusal(state.handle(.admitting(Self.new("a")), now: 0)) == .sessionTasks("a", held: 1, max: 1))
        _ = state.handle(.admissionsWithdrawn, now: 0) // the journal write could not be submitted
        #expect(!state.isReserved("/d/x") && state.admitted.isEmpty)
        let again = try #require(Self.admission(state.handle(.admitting(Self.new("a", start: true)), now: 0)))
        #expect(again.queueOrder == first.queueOrder.map { $0 + 1 }) // a place is never handed out twice
    }

    @Test func theUnacknowledgedEventsCapCountsTheBatchsFirstEvents() throws {
        var state = Self.state(caps: DaemonState.Caps(maxPendingEventsPerSession: 4, maxPendingEventsPerUID: 6))
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 2, count: 2), now: 0)
        _ = try #require(Self.admission(state.handle(.admitting(Self.new("a", start: true)), now: 0))) // two events
        #expect(Self.refusal(state.handle(.admitting(Self.new("a")), now: 0)) == .sessionEvents("a", held: 4, max: 4))
        _ = try #require(Self.admission(state.handle(.admitting(Self.new("b")), now: 0))) // one event
        _ = try #require(Self.admission(state.handle(.admitting(Self.new("b")), now: 0)))
        #expect(Self.refusal(state.handle(.admitting(Self.new("b")), now: 0)) == .ownerEvents(1, held: 6, max: 6))
        #expect(Self.admission(state.handle(.admitting(Self.new("c")), now: 0)) != nil) // uid 2's own count
        _ = state.handle(.admissionsWithdrawn, now: 0)
        #expect(Self.admission(state.handle(.admitting(Self.new("b")), now: 0)) != nil)
    }

    /// A new download while its owner's partials hold all that `max-disk-per-uid` allows is refused, after the
    /// caps and the session's state (as task.create always answered them). An upload or a data task (no
    /// destination) writes no file: the same share admits it.
    @Test func aNewDownloadNeedsRoomInItsOwnersDiskShare() throws {
        var state = Self.state(caps: DaemonState.Caps(maxTasksPerSession: 1))
        var full = Self.new("a", "/d/full") // a download (it has a destination)
        full.disk = DaemonState.DiskShare(held: 4096, limit: 4096)
        #expect(Self.refusal(state.handle(.admitting(full), now: 0)) == .diskFull(1, held: 4096, limit: 4096))
        #expect(state.admitted.isEmpty)
        var exchange = Self.new("a")
        exchange.disk = full.disk
        var other = Self.state()
        #expect(Self.admission(other.handle(.admitting(exchange), now: 0)) != nil, "no file, no disk share needed")
        var room = full
        room.disk = DaemonState.DiskShare(held: 4095, limit: 4096)
        #expect(Self.admission(state.handle(.admitting(room), now: 0)) != nil)
        #expect(Self.refusal(state.handle(.admitting(full), now: 0)) == .sessionTasks("a", held: 1, max: 1))
        _ = state.handle(.sessionInvalidating("b", cancelTasks: false), now: 0)
        full.session = "b"
        #expect(Self.refusal(state.handle(.admitting(full), now: 0)) == .sessionInvalidated("b"))
    }

    @Test func nothingIsAdmittedWhileShuttingDownOrIntoASessionBeingInvalidated() throws {
        var state = Self.state(caps: DaemonState.Caps(maxTasksPerSession: 1))
        _ = state.join([T.task(1, session: "a", owner: 1)], now: 0)
        _ = state.handle(.task(1, .resume), now: 0) // running: an invalidation lets it finish
        _ = state.handle(.sessionInvalidating("a", cancelTasks: false), now: 0)
        #expect(state.tasks.unfinished(session: "a") == 1)
        // The caps are answered first, as task.create always did; then the session's state.
        #expect(Self.refusal(state.handle(.admitting(Self.new("a")), now: 0)) == .sessionTasks("a", held: 1, max: 1))
        _ = state.handle(.sessionInvalidating("b", cancelTasks: false), now: 0)
        #expect(Self.refusal(state.handle(.admitting(Self.new("b")), now: 0)) == .sessionInvalidated("b"))
        #expect(Self.refusal(state.handle(.admitting(Self.new("nobody")), now: 0)) == .sessionInvalidated("nobody"))
        let order = state.nextQueueOrder
        _ = state.handle(.shutdownBegan, now: 0)
        #expect(Self.refusal(state.handle(.admitting(Self.new("c", start: true)), now: 0)) == .shuttingDown)
        #expect(state.admitted.isEmpty && state.nextQueueOrder == order) // a refusal changes nothing
    }
}
