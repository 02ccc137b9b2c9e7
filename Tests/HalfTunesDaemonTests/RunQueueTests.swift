import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The incremental queue: start order, fair share between users, limits, and agreement with the reference
/// planner (`QueuePlanner`), with no I/O.
@Suite("RunQueue")
struct RunQueueTests {
    static func entry(_ id: Int64, owner: UInt32 = 1, priority: TaskPriority = .normal, order: Int64? = nil,
                      session: String = "s", host: String = "http://a:80") -> RunQueue.Entry {
        RunQueue.Entry(key: RunQueue.Key(priority: priority, order: order ?? id, id: id), owner: owner,
                       session: session, host: host)
    }

    /// Takes tasks from the queue as the core's pump does: each start counts as running and served.
    static func drain(_ queue: inout RunQueue, running: inout [UInt32: Int], lastServed: inout [UInt32: Int64],
                      isHeld: (RunQueue.Entry) -> Bool = { _ in false }, max: Int = .max) -> [Int64] {
        var started: [Int64] = []
        var serial = (lastServed.values.max() ?? 0)
        while started.count < max, let next = queue.next(running: { running[$0] ?? 0 }, lastServed: { lastServed[$0] ?? 0 },
                                                           isHeld: isHeld) {
            serial += 1
            lastServed[next.owner] = serial
            running[next.owner, default: 0] += 1
            queue.remove(next.id)
            started.append(next.id)
        }
        return started
    }

    /// The queued tasks (ids 1…1,000) in the order of their places (`position(of:)`).
    static func order(_ q: RunQueue, running: [UInt32: Int], lastServed: [UInt32: Int64]) -> [Int64] {
        (1...1_000).compactMap { id in q.position(of: id, running: running, lastServed: lastServed).map { (id, $0) } }
            .sorted { $0.1 < $1.1 }.map(\.0)
    }

    @Test func startOrderIsPriorityThenQueueOrderThenId() {
        var q = RunQueue()
        q.insert(Self.entry(1, priority: .low))
        q.insert(Self.entry(2))
        q.insert(Self.entry(3, priority: .high))
        q.insert(Self.entry(4))
        q.insert(Self.entry(5, order: -1)) // moved to the front of its class
        #expect(q.count == 5 && q.contains(3) && !q.contains(9))
        #expect([3, 5, 2, 4, 1].map { q.position(of: $0, running: [:], lastServed: [:]) } == [1, 2, 3, 4, 5])
        #expect(q.position(of: 5, running: [:], lastServed: [:]) == 2 && q.position(of: 9, running: [:], lastServed: [:]) == nil)
        #expect(q.lowestOrder(priority: .normal, excluding: 0) == -1 && q.lowestOrder(priority: .normal, excluding: 5) == 2)
        #expect(q.lowestOrder(priority: .high, excluding: 3) == nil)
        // Reinserting with another key moves it; removing from the middle keeps the rest in order.
        q.insert(Self.entry(1, priority: .high, order: 0))
        q.remove(2)
        q.remove(42)
        #expect(Self.order(q, running: [:], lastServed: [:]) == [1, 3, 5, 4] && q.count == 4)
        #expect(q.entry(4)?.key.order == 4 && q.entry(2) == nil)
        var running: [UInt32: Int] = [:], served: [UInt32: Int64] = [:]
        #expect(Self.drain(&q, running: &running, lastServed: &served) == [1, 3, 5, 4] && q.isEmpty)
    }

    /// The same cases as QueuePlannerTests.usersShareTheQueue, through the incremental queue.
    @Test func usersShareTheQueueAsTheReferenceOrderDoes() {
        func queue(_ entries: [(id: Int64, owner: UInt32)]) -> RunQueue {
            var q = RunQueue()
            for (id, owner) in entries { q.insert(Self.entry(id, owner: owner)) }
            return q
        }
        let ordered: [(id: Int64, owner: UInt32)] = [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 2), (7, 2)]
        let q = queue(ordered)
        #expect(Self.order(q, running: [:], lastServed: [:]) == [1, 6, 2, 7, 3, 4, 5])
        #expect(Self.order(q, running: [1: 2], lastServed: [:]) == [6, 7, 1, 2, 3, 4, 5])
        #expect(Self.order(q, running: [:], lastServed: [1: 7]) == [6, 1, 7, 2, 3, 4, 5])
        #expect(q.position(of: 7, running: [1: 2], lastServed: [:]) == 2)
        #expect(q.position(of: 1, running: [1: 2], lastServed: [:]) == 3)
        // Starting them one by one gives the same turns.
        var drained = q, running: [UInt32: Int] = [:], served: [UInt32: Int64] = [:]
        #expect(Self.drain(&drained, running: &running, lastServed: &served) == [1, 6, 2, 7, 3, 4, 5])
    }

    /// A held task does not block the tasks behind it, of its owner or another.
    @Test func heldTasksAreSkippedNotBlocking() {
        var q = RunQueue()
        q.insert(Self.entry(1, host: "http://full:80"))
        q.insert(Self.entry(2, host: "http://full:80"))
        q.insert(Self.entry(3, host: "http://free:80"))
        q.insert(Self.entry(4, owner: 2, session: "limited"))
        var running: [UInt32: Int] = [:], served: [UInt32: Int64] = [:]
        let started = Self.drain(&q, running: &running, lastServed: &served,
                                 isHeld: { $0.host == "http://full:80" || $0.session == "limited" })
        #expect(started == [3] && q.count == 3)
        // Limits lifted: user 2 runs nothing while user 1 runs task 3, so user 2's task goes first.
        #expect(Self.drain(&q, running: &running, lastServed: &served, max: 2) == [4, 1])
    }

    /// The incremental queue starts what the reference planner (`QueuePlanner.plan` over the sorted queue)
    /// starts, for one user, over random queues, limits and running transfers.
    @Test func oneUserStartsWhatTheReferencePlannerStarts() {
        var rng = SplitMix(seed: 11)
        for _ in 0..<300 {
            let sessions = ["a", "b", "c"], hosts = ["http://x:80", "http://y:80", "http://z:80"]
            var limits = QueuePlanner.Limits(maxConcurrent: Int(rng.next() % 6) + 1,
                                             maxConnectionsPerHost: Int(rng.next() % 4) + 1)
            if rng.next() % 2 == 0 { limits.sessionMaxConcurrent["b"] = Int(rng.next() % 3) + 1 }
            var q = RunQueue()
            var entries: [RunQueue.Entry] = []
            for id in 1...Int64(rng.next() % 20 + 1) {
                let priority = [TaskPriority.low, .normal, .high][Int(rng.next() % 3)]
                let e = Self.entry(id, priority: priority, order: Int64(rng.next() % 50) - 5,
                                   session: sessions[Int(rng.next() % 3)], host: hosts[Int(rng.next() % 3)])
                entries.append(e)
                q.insert(e)
            }
            let stopping = Set(entries.map(\.id).filter { _ in rng.next() % 7 == 0 })
            let runningNow = (0..<Int(rng.next() % 4)).map { _ in
                QueuePlanner.Running(session: sessions[Int(rng.next() % 3)], host: hosts[Int(rng.next() % 3)])
            }
            let sorted = entries.sorted { $0.key < $1.key }
            let expected = QueuePlanner.plan(
                queue: sorted.map { QueuePlanner.Entry(id: $0.id, session: $0.session, host: $0.host, stopping: stopping.contains($0.id)) },
                running: runningNow, limits: limits, stopWhenFull: true)
                .filter { $0.1 == .start }.map(\.0)

            var total = runningNow.count
            var perSession = Dictionary(runningNow.map { ($0.session, 1) }, uniquingKeysWith: +)
            var perHost = Dictionary(runningNow.map { ($0.host, 1) }, uniquingKeysWith: +)
            var started: [Int64] = []
            while total < limits.maxConcurrent, let next = q.next(running: { _ in total }, lastServed: { _ in 0 }, isHeld: { e in
                stopping.contains(e.id) || (limits.sessionMaxConcurrent[e.session].map { perSession[e.session, default: 0] >= $0 } ?? false)
                    || perHost[e.host, default: 0] >= limits.maxConnectionsPerHost
            }) {
                q.remove(next.id)
                started.append(next.id)
                total += 1
                perSession[next.session, default: 0] += 1
                perHost[next.host, default: 0] += 1
            }
            #expect(started == expected, "limits \(limits), stopping \(stopping)")
        }
    }

    /// Positions agree with the reference fair order for several users, whatever was served or runs.
    @Test func positionsFollowTheReferenceFairOrder() {
        var rng = SplitMix(seed: 5)
        for round in 0..<400 {
            var q = RunQueue()
            var entries: [RunQueue.Entry] = []
            let owners = UInt32(rng.next() % 5 + 1)
            for id in 1...Int64(rng.next() % 40 + 1) {
                let e = Self.entry(id, owner: UInt32(rng.next() % UInt64(owners)),
                                   priority: [TaskPriority.low, .normal, .high][Int(rng.next() % 3)],
                                   order: Int64(rng.next() % 40))
                entries.append(e)
                q.insert(e)
            }
            // Some owners with transfers running, some served before (ties included), some neither.
            var running: [UInt32: Int] = [:], served: [UInt32: Int64] = [:]
            for owner in 0..<owners {
                if rng.next() % 2 == 0 { running[owner] = Int(rng.next() % 4) }
                if rng.next() % 2 == 0 { served[owner] = Int64(rng.next() % 3) }
            }
            let reference = QueuePlanner.fairOrder(entries.sorted { $0.key < $1.key }.map { ($0.id, $0.owner) },
                                                   running: running, lastServed: served)
            for (index, id) in reference.enumerated() {
                #expect(q.position(of: id, running: running, lastServed: served) == index + 1, "round \(round), task \(id)")
            }
            #expect(q.position(of: 999, running: running, lastServed: served) == nil)
        }
    }

    /// Long runs (several `SortedRun` chunks per owner) with tasks taken out and put back in the middle: places
    /// still follow the reference order.
    @Test func positionsInLongRunsFollowTheReferenceFairOrder() {
        var rng = SplitMix(seed: 51)
        var q = RunQueue()
        var entries: [Int64: RunQueue.Entry] = [:]
        for id in Int64(1)...3_000 {
            let e = Self.entry(id, owner: UInt32(rng.next() % 3), priority: [TaskPriority.low, .normal, .high][Int(rng.next() % 3)],
                               order: Int64(rng.next() % 5_000))
            entries[id] = e
            q.insert(e)
        }
        for id in Int64(1)...3_000 where rng.next() % 3 == 0 {
            if rng.next() % 2 == 0 {
                q.remove(id)
                entries[id] = nil
            } else { // moved to another place in the middle
                entries[id]!.key.order = Int64(rng.next() % 5_000)
                q.insert(entries[id]!)
            }
        }
        let running: [UInt32: Int] = [0: 2, 2: 1], served: [UInt32: Int64] = [1: 4, 2: 3]
        let reference = QueuePlanner.fairOrder(entries.values.sorted { $0.key < $1.key }.map { ($0.id, $0.owner) },
                                               running: running, lastServed: served)
        #expect(q.count == reference.count)
        for (index, id) in reference.enumerated() where index % 7 == 0 || index > reference.count - 5 {
            #expect(q.position(of: id, running: running, lastServed: served) == index + 1, "task \(id)")
            #expect(q.entry(id) == entries[id])
        }
        #expect(q.next(running: { running[$0, default: 0] }, lastServed: { served[$0, default: 0] }, isHeld: { _ in false })?.id == reference.first)
    }

    /// TaskTable keeps the queue and the running counts in step with task states, whatever the write.
    @Test func taskTableKeepsQueueAndRunningCountsInStep() {
        func task(_ id: Int64, owner: UInt32, state: TaskState, priority: TaskPriority = .normal, order: Int64 = 0) -> ManagedTask {
            var record = TaskRecord(id: id, session: "s\(owner)", url: "http://host\(id % 2):8080/\(id)", state: state,
                                    destination: "d\(id)", partialPath: "/nonexistent/\(id).partial", createdAt: 0, updatedAt: 0)
            record.priority = priority
            record.queueOrder = order
            return ManagedTask(record: record, owner: owner, machine: TaskStateMachine(state: state), bytesReceived: 0)
        }
        var table = TaskTable()
        table[1] = task(1, owner: 1, state: .queued, order: 1)
        table[2] = task(2, owner: 1, state: .queued, order: 2)
        table[3] = task(3, owner: 2, state: .running)
        table[4] = task(4, owner: 2, state: .suspended)
        #expect(table.queue.count == 2 && table.queue.contains(1) && table.queue.contains(2))
        #expect(table.runningByOwner == [2: 1] && table.runningBySession == ["s2": 1] && table.runningByHost == ["http://host1:8080": 1])
        // Priority raised in place: the queue order follows.
        table[2]?.record.priority = .high
        #expect(Self.order(table.queue, running: [:], lastServed: [:]) == [2, 1])
        // Started, finished, suspended, re-queued.
        table[1]?.machine = TaskStateMachine(state: .running)
        table[3]?.machine = TaskStateMachine(state: .completed)
        table[4]?.machine = TaskStateMachine(state: .queued)
        #expect(table.runningByOwner == [1: 1] && table.runningByHost == ["http://host1:8080": 1])
        #expect(Self.order(table.queue, running: [:], lastServed: [:]) == [2, 4] && !table.queue.contains(1))
        table[2] = nil
        table[4]?.machine = TaskStateMachine(state: .canceled)
        table[1] = nil
        #expect(table.queue.isEmpty && table.runningByOwner.isEmpty && table.runningBySession.isEmpty && table.runningByHost.isEmpty)
    }
}

/// A small deterministic generator for the property-style tests.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
