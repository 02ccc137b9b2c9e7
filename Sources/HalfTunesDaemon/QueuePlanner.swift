// Queue order and limit checks as pure functions: which queued tasks start now, and what holds the others.
import HalfTunesProtocol

/// The scheduler's decisions, without I/O. The queue is ordered by priority (high, normal, low), then by
/// queue order (FIFO, or the place `task.move` gave), and shared fairly between users (`fairOrder`). Tasks are considered in that order; a task whose
/// session or host is at its limit is held and the next one may start (it does not block the whole queue),
/// while the daemon-wide limit holds everything behind it.
enum QueuePlanner {
    struct Limits: Sendable, Equatable {
        var maxConcurrent: Int
        var maxConnectionsPerHost: Int
        /// Per session identifier; absent: no per-session limit.
        var sessionMaxConcurrent: [String: Int] = [:]
    }

    struct Entry: Sendable, Equatable {
        var id: Int64
        var session: String
        /// `HostKey.of(url)`.
        var host: String
        /// Its previous transfer is still stopping: it cannot start yet.
        var stopping = false
    }

    /// A transfer holding a slot.
    struct Running: Sendable, Equatable {
        var session: String
        var host: String
    }

    enum Decision: Sendable, Equatable {
        case start
        case hold(TaskHold)
    }

    /// The sort key of a queued task: priority class first, then queue order, then id.
    static func precedes(_ a: (priority: TaskPriority, order: Int64, id: Int64),
                         _ b: (priority: TaskPriority, order: Int64, id: Int64)) -> Bool {
        (a.priority.rank, a.order, a.id) < (b.priority.rank, b.order, b.id)
    }

    /// Shares the queue fairly between users: `ordered` (by priority and queue order) is interleaved by owner,
    /// each next place going to the owner with the fewest transfers running or placed before it; between
    /// equals, to the one served longest ago (`lastServed`: serial numbers of their last slot; never served
    /// first), then to the one whose next task came first. One user's order, priorities included, is kept
    /// among their own tasks, but a user with many `high` tasks cannot keep another user's tasks from their
    /// share of the slots. With one user the order is unchanged.
    static func fairOrder(_ ordered: [(id: Int64, owner: UInt32)], running: [UInt32: Int],
                          lastServed: [UInt32: Int64] = [:]) -> [Int64] {
        var queues: [UInt32: [Int64]] = [:]
        var firstSeen: [UInt32] = []
        var rank: [Int64: Int] = [:]
        for (index, entry) in ordered.enumerated() {
            if queues[entry.owner] == nil { firstSeen.append(entry.owner) }
            queues[entry.owner, default: []].append(entry.id)
            rank[entry.id] = index
        }
        guard firstSeen.count > 1 else { return ordered.map(\.id) }
        var heads: [UInt32: Int] = [:]
        var load = running
        var served = lastServed
        var serial = (lastServed.values.max() ?? 0) + 1
        var result: [Int64] = []
        result.reserveCapacity(ordered.count)
        while result.count < ordered.count {
            var best: (owner: UInt32, key: (Int, Int64, Int))?
            for owner in firstSeen {
                let queue = queues[owner]!, head = heads[owner, default: 0]
                guard head < queue.count else { continue }
                let key = (load[owner, default: 0], served[owner, default: 0], rank[queue[head]]!)
                if best.map({ key < $0.key }) ?? true { best = (owner, key) }
            }
            guard let pick = best else { break }
            result.append(queues[pick.owner]![heads[pick.owner, default: 0]])
            heads[pick.owner, default: 0] += 1
            load[pick.owner, default: 0] += 1
            served[pick.owner] = serial
            serial += 1
        }
        return result
    }

    /// The queue order that puts a task before every other task of its class: below all of `orders` (the
    /// orders of the other tasks of the same priority) and below zero, so `enqueue` keeps it.
    static func frontOrder(among orders: [Int64]) -> Int64 {
        min(orders.min() ?? 0, 0) - 1
    }

    /// Decides every entry of `queue` (already in order) up to and including `until` (all when nil). With
    /// `stopWhenFull` it stops once the daemon-wide limit is reached (the rest would all be held by it).
    static func plan(queue: [Entry], running: [Running], limits: Limits, until: Int64? = nil,
                     stopWhenFull: Bool = false) -> [(Int64, Decision)] {
        var total = running.count
        var perSession: [String: Int] = [:]
        var perHost: [String: Int] = [:]
        for r in running {
            perSession[r.session, default: 0] += 1
            perHost[r.host, default: 0] += 1
        }
        var decisions: [(Int64, Decision)] = []
        for (index, entry) in queue.enumerated() {
            if stopWhenFull, total >= limits.maxConcurrent { break }
            let decision = decide(entry, ahead: index, running: total, sessionRunning: perSession[entry.session, default: 0],
                                  hostRunning: perHost[entry.host, default: 0], limits: limits)
            if decision == .start {
                total += 1
                perSession[entry.session, default: 0] += 1
                perHost[entry.host, default: 0] += 1
            }
            decisions.append((entry.id, decision))
            if entry.id == until { break }
        }
        return decisions
    }

    /// The decision for one queued task, given what runs now: `running` transfers in all, `sessionRunning` of
    /// its session, `hostRunning` to its host, with `ahead` tasks before it in the queue.
    static func decide(_ entry: Entry, ahead: Int, running total: Int, sessionRunning: Int, hostRunning: Int,
                       limits: Limits) -> Decision {
        if entry.stopping {
            return .hold(TaskHold(reason: "previousTransferStopping", message: "Its previous transfer is still stopping"))
        }
        if total >= limits.maxConcurrent {
            return .hold(TaskHold(reason: "maxConcurrent",
                                  message: "\(total) of \(limits.maxConcurrent) daemon-wide transfer slots in use" + Self.ahead(ahead)))
        }
        if let max = limits.sessionMaxConcurrent[entry.session], sessionRunning >= max {
            return .hold(TaskHold(reason: "sessionMaxConcurrent",
                                  message: "\(sessionRunning) of \(max) transfers of session "
                                      + "'\(SessionNames.name(of: entry.session))' running (the session's maxConcurrent)"))
        }
        if hostRunning >= limits.maxConnectionsPerHost {
            return .hold(TaskHold(reason: "hostMaxConnections",
                                  message: "\(hostRunning) of \(limits.maxConnectionsPerHost) "
                                      + "connections to \(entry.host) in use (max-connections-per-host)"))
        }
        return .start
    }

    private static func ahead(_ index: Int) -> String {
        index == 0 ? "; it is next in the queue" : "; \(index) task\(index == 1 ? "" : "s") ahead in the queue"
    }
}

/// The host a transfer connects to, as the per-host limit counts it: "scheme://host:port", lowercased, with
/// the scheme's default port filled in and any user info dropped.
enum HostKey {
    static func of(_ url: String) -> String {
        var rest = Substring(url)
        var scheme = "http"
        if let range = rest.range(of: "://") {
            scheme = rest[..<range.lowerBound].lowercased()
            rest = rest[range.upperBound...]
        }
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        var host = rest
        var port: Substring?
        if rest.hasPrefix("[") {
            if let close = rest.firstIndex(of: "]") {
                host = rest[...close]
                let after = rest[rest.index(after: close)...]
                if after.hasPrefix(":") { port = after.dropFirst() }
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            port = rest[rest.index(after: colon)...]
        }
        let defaultPort = scheme == "https" ? "443" : "80"
        let p = port.flatMap { $0.isEmpty ? nil : String($0) } ?? defaultPort
        return "\(scheme)://\(host.lowercased()):\(p)"
    }
}
