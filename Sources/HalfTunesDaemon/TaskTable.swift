import HalfTunesProtocol

/// The daemon's tasks by id, with the indexes the hot paths read kept up to date by every write, so that
/// creating, starting or finishing a task, `daemon.status` and the idle check cost the same with ten tasks
/// or 100,000: tasks per state and per session and state, unfinished tasks per session and per owner uid,
/// the running tasks (and how many per owner, session and host), the queue (`RunQueue`, in start order), the
/// destinations reserved by unfinished tasks, and the tasks that keep the daemon busy.
/// Every write goes through the subscript's setter (also `tasks[id]?.field = value`): it takes the old
/// value out of the indexes and puts the new one in.
struct TaskTable {
    /// Each task in a box of its own: the dictionary holds 16-byte entries at its load factor of up to 3/4
    /// instead of whole `ManagedTask` values (~800 bytes each), about 200 bytes less per task.
    private final class Slot {
        var task: ManagedTask
        init(_ task: ManagedTask) { self.task = task }
    }
    private var storage: [Int64: Slot] = [:]
    private var byState: [TaskState: Int] = [:]
    private var bySessionState: [String: [TaskState: Int]] = [:]
    private var unfinishedBySession: [String: Int] = [:]
    private var unfinishedByOwner: [UInt32: Int] = [:]
    private var reservedDestinations: [HashedPath: Int] = [:]
    /// The ids of the tasks in memory per session (unfinished ones, and finished ones still stopping a transfer,
    /// publishing, or having their resume data made): session operations read them instead of walking every task.
    private var idsBySession: [String: Set<Int64>] = [:]
    /// The finished tasks still in memory per session (a transfer stopping, a publish, resume data being made:
    /// `DaemonState.evict`). No state leads out of a
    /// finished one, so a task in memory has a finished row only if it is one of these: what a retention sweep
    /// must keep, without a copy of the session's every id.
    private var finishedInMemoryBySession: [String: Set<Int64>] = [:]
    /// Tasks per session whose transfer has not ended yet.
    private var stoppingBySession: [String: Int] = [:]
    private var busy: Set<Int64> = []
    /// The ids of the tasks in state `running` that hold a transfer slot (not those being verified or published).
    private(set) var running: Set<Int64> = []
    /// Those per owner uid, per session and per host (`HostKey`): the limits and fair share read them.
    private(set) var runningByOwner: [UInt32: Int] = [:]
    private(set) var runningBySession: [String: Int] = [:]
    private(set) var runningByHost: [String: Int] = [:]
    /// What the data tasks of each owner that run or still stop a transfer may keep in memory together (their
    /// body caps).
    private(set) var runningDataBytesByOwner: [UInt32: Int64] = [:]
    /// The queued tasks per host, those waiting for their begin date left out (`HostConnections` gives a host no
    /// extra connections while one is queued).
    private(set) var queuedByHost: [String: Int] = [:]
    /// Hosts whose running or queued tasks changed since `clearChangedHosts` (`DaemonState.handle` clears them
    /// before each input, so after it they are that input's: `allowancesChanged` gives each its allowance again).
    private(set) var changedHosts: Set<String> = []
    /// The tasks in state `queued`, in start order.
    private(set) var queue = RunQueue()
    /// Resource deadlines of pending tasks (lazily pruned; see `dueDeadlines`), and how many tasks they hold.
    private var deadlines = DeadlineIndex()
    /// When each waiting task retries (lazily pruned, like `deadlines`; see `dueRetries`).
    private var retries = DeadlineIndex()
    /// When each deferred queued task may join the queue (its `earliestBeginDate`; see `dueBegins`).
    private var begins = DeadlineIndex()
    private var deferredCount = 0
    private var pendingWithDeadline = 0
    /// Finished tasks live in the journal, not here: how many there are per state, and per session and state.
    private var finishedByState: [TaskState: Int] = [:]
    private var finishedBySessionState: [String: [TaskState: Int]] = [:]
    /// The unfinished tasks' ids in order, by state (`task.list --state`).
    private var stateIDs = StateIDIndex()

    subscript(id: Int64) -> ManagedTask? {
        get { storage[id]?.task }
        set {
            let old = storage[id]?.task
            if old == nil, let session = newValue?.record.session {
                idsBySession[session, default: []].insert(id)
            } else if newValue == nil, let session = old?.record.session {
                idsBySession[session]?.remove(id)
                if idsBySession[session]?.isEmpty == true { idsBySession[session] = nil }
            }
            // Most writes (progress of a running task, its durable length) change nothing an index reads.
            if old.map(IndexedFields.init) != newValue.map(IndexedFields.init) {
                if let old { index(old, id: id, by: -1) }
                if let new = newValue { index(new, id: id, by: 1) }
                let oldEntry = old.flatMap(Self.queueEntry), newEntry = newValue.flatMap(Self.queueEntry)
                if oldEntry != newEntry {
                    if let oldEntry { queue.remove(oldEntry.id) }
                    if let newEntry { queue.insert(newEntry) }
                }
                // A task that becomes pending (or gets another deadline) is pushed; its old entry goes stale.
                let newDeadline = newValue.flatMap(Self.pendingDeadline)
                if let newDeadline, newDeadline != old.flatMap(Self.pendingDeadline) { deadlines.insert(id, at: newDeadline) }
                let newRetry = newValue.flatMap(Self.retryAt)
                if let newRetry, newRetry != old.flatMap(Self.retryAt) { retries.insert(id, at: newRetry) }
                if let begin = newValue?.deferredUntil, begin != old?.deferredUntil { begins.insert(id, at: begin) }
            }
            store(newValue, at: id)
        }
    }

    /// Writes in place when this table alone holds the task's box (a copy of the table shares boxes, so then
    /// the task gets a new one: value semantics as before).
    private mutating func store(_ task: ManagedTask?, at id: Int64) {
        guard let task else {
            storage[id] = nil
            return
        }
        guard let index = storage.index(forKey: id) else {
            storage[id] = Slot(task)
            return
        }
        if isKnownUniquelyReferenced(&storage.values[index]) {
            storage.values[index].task = task
        } else {
            storage.values[index] = Slot(task)
        }
    }

    /// Every task (a copy; for the rare walks: shutdown, session invalidation).
    var values: [ManagedTask] { storage.values.map(\.task) }
    /// Every task id, in no order.
    var keys: [Int64] { Array(storage.keys) }
    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }

    /// Every host with a transfer running counts as changed (the per-host limit changed: each has another
    /// allowance). O(hosts running).
    mutating func markRunningHostsChanged() {
        changedHosts.formUnion(runningByHost.keys)
    }

    mutating func clearChangedHosts() {
        if !changedHosts.isEmpty { changedHosts.removeAll(keepingCapacity: true) }
    }

    /// Tasks of `session` that are not completed, failed or canceled.
    func unfinished(session: String) -> Int { unfinishedBySession[session] ?? 0 }
    /// Tasks of all the sessions of `owner` that are not completed, failed or canceled.
    func unfinished(owner: UInt32) -> Int { unfinishedByOwner[owner] ?? 0 }
    /// Tasks in `state` (finished ones included).
    func count(in state: TaskState) -> Int { (byState[state] ?? 0) + (finishedByState[state] ?? 0) }
    /// Up to `limit` ids above `after`, ascending, of the tasks of `scope` in `state`; none for a finished state
    /// (finished tasks are listed from the journal).
    func ids(in state: TaskState, of scope: StateIDIndex.Scope, after: Int64, limit: Int) -> [Int64] {
        stateIDs.ids(in: state, of: scope, after: after, limit: limit)
    }
    /// Tasks of `session` per state, finished ones included (states without tasks left out).
    func counts(session: String) -> [TaskState: Int] {
        (bySessionState[session] ?? [:]).merging(finishedBySessionState[session] ?? [:], uniquingKeysWith: +)
    }

    /// Takes a finished task out of memory (it stays in the journal) and counts it; false, and nothing done,
    /// for a task that is not finished, still has a transfer stopping, or is being published.
    @discardableResult
    mutating func evict(_ id: Int64) -> Bool {
        guard let t = storage[id]?.task, t.machine.state.isTerminal, !t.attemptInFlight, t.record.phase != .publishing else { return false }
        self[id] = nil
        countFinished(session: t.record.session, state: t.machine.state, by: 1)
        return true
    }

    /// The finished tasks of `session` that are in the journal only, per state.
    func finishedCounts(session: String) -> [TaskState: Int] { finishedBySessionState[session] ?? [:] }
    /// The sessions with finished tasks in the journal only (the retention sweep's; one entry per session).
    var sessionsWithFinishedTasks: Dictionary<String, [TaskState: Int]>.Keys { finishedBySessionState.keys }

    /// Counts finished tasks that are in the journal only (recovery, and `evict`).
    mutating func countFinished(session: String, state: TaskState, by n: Int) {
        Self.add(n, to: &finishedByState, state)
        var counts = finishedBySessionState[session] ?? [:]
        Self.add(n, to: &counts, state)
        finishedBySessionState[session] = counts.isEmpty ? nil : counts
    }

    /// Forgets a deleted session's finished tasks.
    mutating func forgetFinished(session: String) {
        for (state, n) in finishedBySessionState[session] ?? [:] { Self.add(-n, to: &finishedByState, state) }
        finishedBySessionState[session] = nil
    }
    /// The ids of the session's tasks in memory (unfinished, or finished and not evicted yet), in no order.
    func ids(session: String) -> Set<Int64> { idsBySession[session] ?? [] }
    /// The session's finished tasks still in memory (a transfer stopping, a publish, resume data being made), in no
    /// order.
    func finishedInMemory(session: String) -> Set<Int64> { finishedInMemoryBySession[session] ?? [] }
    /// How many of the session's tasks have a transfer that has not ended yet.
    func stopping(session: String) -> Int { stoppingBySession[session] ?? 0 }
    /// The tasks whose transfer has not ended yet (running, or stopping after a suspend or cancel), by id. Walks
    /// the busy tasks (every such task is one): for shutdown, never a hot path.
    var attemptsInFlight: [Int64] { busy.filter(isStopping).sorted() }
    /// Whether the task's (previous) transfer has not ended yet.
    func isStopping(_ id: Int64) -> Bool { storage[id]?.task.attemptInFlight == true }
    /// Whether an unfinished task may still write `path` (its destination).
    func isReserved(_ path: String) -> Bool { reservedDestinations[HashedPath(path)] != nil }
    /// Whether some task is queued, running or waiting to retry, still stopping a transfer, or publishing.
    var anyBusy: Bool { !busy.isEmpty }

    /// The pending tasks whose resource deadline is at or before `now`, earliest first; each is returned once
    /// for each time it became pending.
    /// (The closures here read `self.storage` only: a method reference such as `isLive` would take a copy of the
    /// whole table, whose share of the heap being taken from would make its first change copy all of it.)
    mutating func dueDeadlines(now: Double) -> [Int64] {
        let isLive = { (entry: DeadlineIndex.Entry) in self.storage[entry.id].flatMap { Self.pendingDeadline($0.task) } == entry.deadline }
        let due = deadlines.takeDue(now: now, isLive: isLive)
        if deadlines.count > 2 * pendingWithDeadline + 1024 { deadlines.compact(isLive: isLive) }
        return due
    }

    /// The waiting tasks whose retry time is at or before `now`, earliest first.
    mutating func dueRetries(now: Double) -> [Int64] {
        let isLive = { (entry: DeadlineIndex.Entry) in self.storage[entry.id].flatMap { Self.retryAt($0.task) } == entry.deadline }
        let due = retries.takeDue(now: now, isLive: isLive)
        if retries.count > 2 * (byState[.waiting] ?? 0) + 1024 { retries.compact(isLive: isLive) }
        return due
    }

    /// The deferred tasks whose `earliestBeginDate` is at or before `now`, earliest first (the caller lets them
    /// join the queue).
    mutating func dueBegins(now: Double) -> [Int64] {
        let isLive = { (entry: DeadlineIndex.Entry) in self.storage[entry.id]?.task.deferredUntil == entry.deadline }
        let due = begins.takeDue(now: now, isLive: isLive)
        if begins.count > 2 * deferredCount + 1024 { begins.compact(isLive: isLive) }
        return due
    }

    /// The earliest retry time held (it may be stale: the timer then finds nothing due and waits for the next).
    var earliestRetry: Double? { retries.earliest }
    /// Where the deadline, retry and begin heaps keep their entries (tests: taking what is due copies none).
    var dueIndexAddresses: [UnsafeRawPointer?] { [deadlines.storageAddress, retries.storageAddress, begins.storageAddress] }

    private mutating func index(_ task: ManagedTask, id: Int64, by delta: Int) {
        let state = task.machine.state
        if Self.pendingDeadline(task) != nil { pendingWithDeadline += delta }
        Self.add(delta, to: &byState, state)
        // In place (a copy taken out and written back would copy the inner dictionary every time).
        Self.add(delta, to: &bySessionState[task.record.session, default: [:]], state)
        if bySessionState[task.record.session]?.isEmpty == true { bySessionState[task.record.session] = nil }
        if state == .running && !task.completing {
            if delta > 0 { running.insert(id) } else { running.remove(id) }
            Self.add(delta, to: &runningByOwner, task.owner)
            Self.add(delta, to: &runningBySession, task.record.session)
            let host = task.hostKey
            Self.add(delta, to: &runningByHost, host)
            changedHosts.insert(host)
        } else if state == .queued, !task.outOfQueue { // a task waiting for its date (or its row) asks nothing yet
            let host = task.hostKey
            Self.add(delta, to: &queuedByHost, host)
            changedHosts.insert(host)
        }
        // A data task's body is in memory until its transfer has ended, also after a suspend or cancel.
        if task.isData, state == .running || task.attemptInFlight {
            Self.add(Int64(delta) * task.dataBytes, to: &runningDataBytesByOwner, task.owner)
        }
        if task.deferredUntil != nil { deferredCount += delta }
        if task.attemptInFlight { Self.add(delta, to: &stoppingBySession, task.record.session) }
        if state.isPending || task.attemptInFlight || task.record.phase == .publishing {
            if delta > 0 { busy.insert(id) } else { busy.remove(id) }
        }
        guard !state.isTerminal else {
            if delta > 0 {
                finishedInMemoryBySession[task.record.session, default: []].insert(id)
            } else {
                finishedInMemoryBySession[task.record.session]?.remove(id)
                if finishedInMemoryBySession[task.record.session]?.isEmpty == true { finishedInMemoryBySession[task.record.session] = nil }
            }
            return
        }
        if delta > 0 {
            stateIDs.insert(id, state: state, session: task.record.session, owner: task.owner)
        } else {
            stateIDs.remove(id, state: state, session: task.record.session, owner: task.owner)
        }
        Self.add(delta, to: &unfinishedBySession, task.record.session)
        Self.add(delta, to: &unfinishedByOwner, task.owner)
        Self.add(delta, to: &reservedDestinations, HashedPath(task.record.destination))
    }

    /// A path with its hash computed once. Destinations are long and alike (one directory, similar names): as
    /// a plain `String` key every probe of the index compared their bytes, and every growth hashed them all
    /// again; this key compares hashes first and rehashes an `Int`.
    private struct HashedPath: Hashable {
        let path: String
        let hash: Int
        init(_ path: String) {
            self.path = path
            hash = path.hashValue
        }
        static func == (a: HashedPath, b: HashedPath) -> Bool { a.hash == b.hash && a.path == b.path }
        func hash(into hasher: inout Hasher) { hasher.combine(hash) }
    }

    /// What the indexes read of a task: a write that changes none of it leaves them as they are.
    private struct IndexedFields: Equatable {
        var state: TaskState
        var session: String
        var owner: UInt32
        var destination: String
        var url: String
        var priority: TaskPriority
        var queueOrder: Int64
        var stopping: Bool
        var publishing: Bool
        var deadline: Double?
        var retryAt: Double?
        var completing: Bool
        var deferredUntil: Double?
        var inserting: Bool
        var proxy: ProxyRef?
        var dataBytes: Int64

        init(_ t: ManagedTask) {
            state = t.machine.state
            completing = t.completing
            session = t.record.session
            owner = t.owner
            destination = t.record.destination
            url = t.record.url
            priority = t.record.priority
            queueOrder = t.record.queueOrder
            stopping = t.attemptInFlight
            publishing = t.record.phase == .publishing
            deadline = t.record.resourceDeadline
            retryAt = TaskTable.retryAt(t)
            deferredUntil = t.deferredUntil
            inserting = t.inserting
            proxy = t.firstProxy
            dataBytes = t.dataBytes
        }
    }

    /// When a waiting task retries (at once if it has no time, which its state machine always sets).
    /// None for a task waiting for the network or power conditions: they, not a time, let it go on.
    fileprivate static func retryAt(_ task: ManagedTask) -> Double? {
        guard task.machine.state == .waiting, !task.machine.isWaitingForConditions else { return nil }
        return task.machine.nextAttemptAt ?? 0
    }

    /// A task's resource deadline while it is pending.
    private static func pendingDeadline(_ task: ManagedTask) -> Double? {
        task.machine.state.isPending ? task.record.resourceDeadline : nil
    }

    /// A task's place in the queue while it is queued.
    private static func queueEntry(_ task: ManagedTask) -> RunQueue.Entry? {
        guard task.machine.state == .queued, !task.outOfQueue, let id = task.record.id else { return nil }
        return RunQueue.Entry(key: RunQueue.Key(priority: task.record.priority, order: task.record.queueOrder, id: id),
                              owner: task.owner, session: task.record.session, host: task.hostKey,
                              proxy: task.firstProxy, data: task.isData)
    }

    private static func add<Key: Hashable, N: FixedWidthInteger>(_ delta: N, to counts: inout [Key: N], _ key: Key) {
        let value = (counts[key] ?? 0) + delta
        precondition(value >= 0, "a TaskTable count below zero")
        counts[key] = value == 0 ? nil : value
    }
}
