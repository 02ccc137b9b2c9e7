import HalfTunesEngine
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

    static func new(_ session: String = "a", _ destination: String? = nil, start: Bool = false) -> DaemonState.NewTask {
        DaemonState.NewTask(session: session, destination: destination, start: start)
    }

    static func admission(_ actions: [DaemonState.Action]) -> DaemonState.Admission? {
        guard actions.count == 1, case .admitted(let admission) = actions[0] else { return nil }
        return admission
    }

    static func refusal(_ actions: [DaemonState.Action]) -> DaemonState.CreateRefusal? {
        guard actions.count == 1, case .createRefused(let refusal) = actions[0] else { return nil }
        return refusal
    }

    /// The admitted task as `task.create` hands it to `created` (the journal gave it `id`).
    static func created(_ id: Int64, _ admission: DaemonState.Admission, session: String = "a", owner: UInt32 = 1) -> ManagedTask {
        var t = T.task(id, session: session, owner: owner)
        t.machine = admission.machine
        t.record.state = admission.machine.state
        if let place = admission.queueOrder { t.record.queueOrder = place }
        t.inserting = true
        return t
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
        _ = state.handle(.created([T.task(1, session: "a", owner: 1)]), now: 0)
        let second = try #require(Self.admission(state.handle(.admitting(Self.new("a")), now: 0)))
        #expect(Self.refusal(state.handle(.admitting(Self.new("a")), now: 0)) == .sessionTasks("a", held: 2, max: 2))
        // uid 1's other session: the uid's cap counts the admitted one too.
        _ = try #require(Self.admission(state.handle(.admitting(Self.new("b")), now: 0)))
        #expect(Self.refusal(state.handle(.admitting(Self.new("b")), now: 0)) == .ownerTasks(1, held: 3, max: 3))
        #expect(Self.admission(state.handle(.admitting(Self.new("c")), now: 0)) != nil) // uid 2 holds nothing
        // Created: the tasks count them now, the batch no longer does (not twice).
        _ = state.handle(.created([Self.created(2, second)]), now: 0)
        #expect(state.admitted.isEmpty && state.tasks.unfinished(session: "a") == 2)
        #expect(Self.refusal(state.handle(.admitting(Self.new("a")), now: 0)) == .sessionTasks("a", held: 2, max: 2))
        #expect(Self.admission(state.handle(.admitting(Self.new("b")), now: 0)) != nil)
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
        _ = state.handle(.created([T.task(1, session: "a", owner: 1)]), now: 0)
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
