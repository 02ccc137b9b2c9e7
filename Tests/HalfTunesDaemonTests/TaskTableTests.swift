import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The unfinished-task counts the caps read follow every write to the table, in whatever form it comes.
@Suite("TaskTable's counts")
struct TaskTableTests {
    func task(_ id: Int64, session: String, owner: UInt32, state: TaskState) -> ManagedTask {
        let record = TaskRecord(id: id, session: session, url: "http://127.0.0.1:9/\(id)", state: state,
                                destination: "d\(id)", partialPath: "/nonexistent/\(id).partial",
                                createdAt: 0, updatedAt: 0)
        return ManagedTask(record: record, owner: owner, machine: TaskStateMachine(state: state), bytesReceived: 0)
    }

    @Test func countsFollowInsertsStateChangesAndRemovals() {
        var table = TaskTable()
        table[1] = task(1, session: "a", owner: 10, state: .suspended)
        table[2] = task(2, session: "a", owner: 10, state: .queued)
        table[3] = task(3, session: "b", owner: 10, state: .running)
        table[4] = task(4, session: "c", owner: 20, state: .completed)   // finished: never counted
        #expect(table.unfinished(session: "a") == 2 && table.unfinished(session: "b") == 1)
        #expect(table.unfinished(session: "c") == 0 && table.unfinished(owner: 10) == 3 && table.unfinished(owner: 20) == 0)

        // In place through optional chaining, as the core writes: a task that finishes stops counting.
        table[2]?.machine = TaskStateMachine(state: .canceled)
        #expect(table.unfinished(session: "a") == 1 && table.unfinished(owner: 10) == 2)
        // Copy, modify, write back; and a finished task made unfinished again (a retried publish) counts again.
        var t = table[4]!
        t.machine = TaskStateMachine(state: .queued)
        table[4] = t
        #expect(table.unfinished(session: "c") == 1 && table.unfinished(owner: 20) == 1)
        // Rewriting the same state does not count twice; removing stops counting.
        table[1] = table[1]
        #expect(table.unfinished(session: "a") == 1)
        table[1] = nil
        table[3] = nil
        #expect(table.unfinished(session: "a") == 0 && table.unfinished(session: "b") == 0 && table.unfinished(owner: 10) == 0)
        #expect(table.count == 2 && Set(table.keys) == [2, 4] && table.values.count == 2)
    }

    /// The other indexes: tasks per state and per session and state, the running ones, the destinations
    /// unfinished tasks reserve, and whether anything keeps the daemon busy.
    @Test func statesRunningReservedAndBusyFollowWrites() {
        var table = TaskTable()
        #expect(!table.anyBusy && table.running.isEmpty && !table.isReserved("d1"))
        table[1] = task(1, session: "a", owner: 1, state: .suspended)
        table[2] = task(2, session: "a", owner: 1, state: .running)
        table[3] = task(3, session: "b", owner: 1, state: .failed)
        #expect(table.count(in: .suspended) == 1 && table.count(in: .running) == 1 && table.count(in: .failed) == 1)
        #expect(table.counts(session: "a") == [.suspended: 1, .running: 1] && table.counts(session: "b") == [.failed: 1])
        #expect(table.running == [2] && table.anyBusy)
        #expect(table.isReserved("d1") && table.isReserved("d2") && !table.isReserved("d3"))   // failed: free

        // The running task finishes but is still publishing: busy, no longer running, destination still held.
        table[2]?.machine = TaskStateMachine(state: .waiting)
        #expect(table.running.isEmpty && table.anyBusy && table.count(in: .waiting) == 1)
        table[2]?.machine = TaskStateMachine(state: .completed)
        table[2]?.record.phase = .publishing
        #expect(table.anyBusy && !table.isReserved("d2"))
        table[2]?.record.phase = .transfer
        #expect(!table.anyBusy && table.count(in: .completed) == 1 && table.count(in: .running) == 0)
        // A queued task keeps the daemon busy; removing it leaves nothing pending.
        table[1]?.machine = TaskStateMachine(state: .queued)
        #expect(table.anyBusy)
        table[1] = nil
        #expect(!table.anyBusy && table.counts(session: "a") == [.completed: 1] && !table.isReserved("d1"))
    }

    /// A finished task leaves memory but stays counted; one still stopping or publishing, or unfinished, stays.
    @Test func finishedTasksAreEvictedButStillCounted() {
        var table = TaskTable()
        table[1] = task(1, session: "a", owner: 1, state: .completed)
        table[2] = task(2, session: "a", owner: 1, state: .queued)
        table[3] = task(3, session: "a", owner: 1, state: .canceled)
        table[3]?.record.phase = .publishing
        let evicted = table.evict(1)
        #expect(evicted && table[1] == nil && table.count == 2)
        let kept = [table.evict(2), table.evict(3), table.evict(42)]
        #expect(kept == [false, false, false])
        table[3]?.record.phase = .transfer
        let canceled = table.evict(3)
        #expect(canceled)
        table.countFinished(session: "b", state: .failed, by: 5)     // recovery counts what stays in the journal
        #expect(table.count(in: .completed) == 1 && table.count(in: .canceled) == 1 && table.count(in: .failed) == 5)
        #expect(table.counts(session: "a") == [.completed: 1, .canceled: 1, .queued: 1] && table.counts(session: "b") == [.failed: 5])
        #expect(table.unfinished(session: "a") == 1 && !table.isReserved("d1") && table.isReserved("d2"))
        table.forgetFinished(session: "a")
        #expect(table.counts(session: "a") == [.queued: 1] && table.count(in: .completed) == 0 && table.count(in: .failed) == 5)
    }

    /// The deadline index returns exactly the pending tasks whose resource deadline has passed, once per time
    /// they became pending (or got another deadline), whatever the writes in between: checked against a model
    /// on random writes.
    /// `due` holds exactly the model's entries at or before `now`, each once; they leave the model.
    static func expectDue(_ due: [Int64], armed: inout [Int64: Double], now: Double, step: Int) {
        let expected = armed.filter { $0.value <= now }
        #expect(Set(due) == Set(expected.keys), "step \(step)")
        #expect(due.count == Set(due).count, "step \(step): a task reported twice")
        for id in expected.keys { armed[id] = nil }
    }

    @Test func dueDeadlinesMatchAModelOnRandomWrites() {
        var rng = SplitMix(seed: 0xDEAD11)
        var table = TaskTable()
        var armed: [Int64: Double] = [:]   // the model: pending tasks not yet reported, with their deadline
        let states: [TaskState] = [.suspended, .queued, .running, .waiting, .completed, .failed]
        var now = 0.0
        for step in 0..<20_000 {
            let id = Int64(rng.next() % 300) + 1
            let old = table[id]
            let oldDeadline = old.flatMap { $0.machine.state.isPending ? $0.record.resourceDeadline : nil }
            switch rng.next() % 10 {
            case 0:
                table[id] = nil
            case 1, 2:
                var t = table[id] ?? task(id, session: "s", owner: 1, state: .suspended)
                t.record.resourceDeadline = rng.next() % 4 == 0 ? nil : now + Double(rng.next() % 50)
                table[id] = t
            default:
                var t = table[id] ?? task(id, session: "s", owner: 1, state: .suspended)
                if old == nil { t.record.resourceDeadline = now + Double(rng.next() % 50) }
                t.machine = TaskStateMachine(state: states[Int(rng.next() % UInt64(states.count))])
                table[id] = t
            }
            let new = table[id].flatMap { $0.machine.state.isPending ? $0.record.resourceDeadline : nil }
            if new == nil { armed[id] = nil } else if new != oldDeadline { armed[id] = new }
            if step % 7 == 0 {
                now += Double(rng.next() % 3)
                Self.expectDue(table.dueDeadlines(now: now), armed: &armed, now: now, step: step)
            }
        }
    }

    /// The retry index returns exactly the waiting tasks whose retry time has come, once per time they started
    /// waiting (or got another time), whatever the writes in between; `earliestRetry` is never later than the
    /// earliest of them (so the one retry timer never sleeps past one). Checked against a model on random writes.
    @Test func dueRetriesMatchAModelOnRandomWrites() {
        var rng = SplitMix(seed: 0x2E7251)
        var table = TaskTable()
        var armed: [Int64: Double] = [:]   // the model: waiting tasks not yet reported, with their retry time
        let states: [TaskState] = [.suspended, .queued, .running, .waiting, .waiting, .completed]
        var now = 0.0
        func retryAt(_ t: ManagedTask?) -> Double? {
            t.flatMap { $0.machine.state == .waiting ? ($0.machine.nextAttemptAt ?? 0) : nil }
        }
        for step in 0..<20_000 {
            let id = Int64(rng.next() % 300) + 1
            let old = retryAt(table[id])
            if rng.next() % 10 == 0 {
                table[id] = nil
            } else {
                var t = table[id] ?? task(id, session: "s", owner: 1, state: .suspended)
                let state = states[Int(rng.next() % UInt64(states.count))]
                let at = state == .waiting ? now + Double(rng.next() % 40) : nil
                t.machine = TaskStateMachine(state: state, nextAttemptAt: at)
                table[id] = t
            }
            let new = retryAt(table[id])
            if new == nil { armed[id] = nil } else if new != old { armed[id] = new }
            if let earliest = armed.values.min() {
                #expect((table.earliestRetry ?? .infinity) <= earliest, "step \(step)")
            }
            if step % 5 == 0 {
                now += Double(rng.next() % 3)
                Self.expectDue(table.dueRetries(now: now), armed: &armed, now: now, step: step)
            }
        }
    }

    /// Tasks are boxed inside the table, but a copy of the table is still a value: writes to one never show
    /// in the other, whether they change an index or not.
    @Test func aCopyOfTheTableIsIndependent() {
        var table = TaskTable()
        table[1] = task(1, session: "a", owner: 1, state: .running)
        table[2] = task(2, session: "a", owner: 1, state: .suspended)
        let snapshot = table
        table[1]?.bytesReceived = 99                                  // no index changes
        table[2]?.machine = TaskStateMachine(state: .queued)           // indexes change
        table[3] = task(3, session: "b", owner: 1, state: .suspended)
        #expect(snapshot[1]?.bytesReceived == 0 && table[1]?.bytesReceived == 99)
        #expect(snapshot[2]?.machine.state == .suspended && table[2]?.machine.state == .queued)
        #expect(snapshot[3] == nil && snapshot.count == 2 && table.count == 3)
        var copy = snapshot
        copy[1] = nil
        #expect(snapshot[1] != nil && copy[1] == nil)
        // Written again and again in place, the table's own boxes stay its own.
        for n in 0..<10 { table[1]?.bytesReceived = Int64(n) }
        #expect(table[1]?.bytesReceived == 9 && snapshot[1]?.bytesReceived == 0)
    }

    /// The session index session operations read (invalidate) follows inserts, evictions and removals, and
    /// counts the tasks whose transfer is still stopping.
    @Test func tasksPerSessionAndTheirStoppingTransfersFollowWrites() throws {
        var table = TaskTable()
        table[1] = task(1, session: "a", owner: 1, state: .running)
        table[2] = task(2, session: "a", owner: 1, state: .queued)
        table[3] = task(3, session: "b", owner: 1, state: .suspended)
        #expect(table.ids(session: "a") == [1, 2] && table.ids(session: "b") == [3] && table.ids(session: "c").isEmpty)
        table[1]?.attemptInFlight = true
        #expect(table.stopping(session: "a") == 1 && table.stopping(session: "b") == 0)
        // Canceled while its transfer stops: finished, but still in memory and stopping.
        table[1]?.machine = TaskStateMachine(state: .canceled)
        #expect(!table.evict(1) && table.ids(session: "a") == [1, 2] && table.stopping(session: "a") == 1)
        table[1]?.attemptInFlight = false
        #expect(table.stopping(session: "a") == 0 && table.evict(1) && table.ids(session: "a") == [2])
        table[2] = nil
        table[3]?.machine = TaskStateMachine(state: .queued) // a state change keeps it where it is
        #expect(table.ids(session: "a").isEmpty && table.ids(session: "b") == [3])
    }

    /// A running download being verified or published holds no transfer slot: it leaves the running index (and
    /// its per-owner, session and host counts) but is still counted as `running`.
    @Test func aCompletingTaskHoldsNoTransferSlot() {
        var table = TaskTable()
        table[1] = task(1, session: "a", owner: 7, state: .running)
        table[2] = task(2, session: "a", owner: 7, state: .running)
        table[1]?.completing = true
        #expect(table.running == [2] && table.runningByOwner[7] == 1 && table.runningBySession["a"] == 1)
        #expect(table.runningByHost["http://127.0.0.1:9"] == 1 && table.count(in: .running) == 2)
        table[1]?.completing = false
        #expect(table.running == [1, 2] && table.runningByOwner[7] == 2)
    }

    /// Taking what is due from the retry, deadline and begin heaps changes them in place: none is copied (a copy
    /// of the table taken for the liveness check made each timer firing copy the whole heap, O(waiting tasks)).
    @Test func takingWhatIsDueCopiesNoHeap() {
        var table = TaskTable()
        for id in Int64(1)...3_000 {
            var t = task(id, session: "a", owner: 1, state: .waiting)
            t.record.resourceDeadline = Double(id)
            t.machine = TaskStateMachine(state: .waiting, nextAttemptAt: Double(id), resourceDeadline: Double(id))
            if id % 2 == 0 {
                t.machine = TaskStateMachine(state: .queued, resourceDeadline: Double(id))
                t.deferredUntil = Double(id)
            }
            table[id] = t
        }
        let before = table.dueIndexAddresses
        #expect(before.allSatisfy { $0 != nil })
        var taken = (deadlines: 0, retries: 0, begins: 0)
        for now in stride(from: 1.0, through: 100, by: 1) {
            taken.deadlines += table.dueDeadlines(now: now).count
            taken.retries += table.dueRetries(now: now).count
            taken.begins += table.dueBegins(now: now).count
            #expect(table.dueIndexAddresses == before, "at \(now)")
        }
        #expect(taken == (100, 50, 50))
    }

    /// `task.list --state` of an unfinished state is paged from memory: after random inserts, state changes
    /// (finishing included), session moves and removals, every page of every scope is what filtering every task
    /// gives, in id order.
    @Test func unfinishedIDsByStatePageAsFilteringEveryTaskGives() {
        var table = TaskTable()
        var rng = SplitMix(seed: 55)
        let sessions = ["a", "b", "c", "d"], owners: [String: UInt32] = ["a": 1, "b": 1, "c": 2, "d": 3]
        let states = TaskState.allCases
        for step in 0..<3_000 {
            let id = Int64(rng.next() % 700) + 1
            switch rng.next() % 5 {
            case 0: table[id] = nil
            case 1, 2:
                let session = table[id]?.record.session ?? sessions[Int(rng.next() % 4)]
                table[id] = task(id, session: session, owner: owners[session]!, state: states[Int(rng.next() % 7)])
            default:
                table[id]?.machine = TaskStateMachine(state: states[Int(rng.next() % 7)])
            }
            guard step % 500 == 499 else { continue }
            let all = table.values.sorted { $0.record.id! < $1.record.id! }
            let scopes: [(StateIDIndex.Scope, (ManagedTask) -> Bool)] = [
                (.all, { _ in true }), (.session("a"), { $0.record.session == "a" }),
                (.owner(1), { $0.owner == 1 }), (.owner(9), { _ in false }), (.session("z"), { _ in false }),
            ]
            for state in states where !state.isTerminal {
                for (scope, belongs) in scopes {
                    let expected = all.filter { belongs($0) && $0.machine.state == state }.map { $0.record.id! }
                    var got: [Int64] = [], after = Int64.min
                    while true { // pages of 13, each after the last id of the one before
                        let page = table.ids(in: state, of: scope, after: after, limit: 13)
                        got += page
                        guard page.count == 13, let last = page.last else { break }
                        after = last
                    }
                    #expect(got == expected, "step \(step), \(state), \(scope)")
                }
            }
        }
        #expect(table.ids(in: .queued, of: .all, after: .max, limit: 10).isEmpty)
        #expect(table.ids(in: .completed, of: .all, after: .min, limit: 10).isEmpty, "finished tasks are listed from the journal")
    }
}
