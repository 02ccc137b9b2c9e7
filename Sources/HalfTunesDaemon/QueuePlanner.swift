// Queue order and limit checks as pure functions: which queued tasks start now, and what holds the others.
import HalfTunesCore
import HalfTunesProtocol

/// The scheduler's decisions, without I/O. The queue is ordered by priority (high, normal, low), then by
/// queue order (FIFO, or the place `task.move` gave), and shared fairly between users (`RunQueue.next`, `RunQueue.position`). Tasks are considered in that order; a task whose
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
        /// A data task (`dataHold`).
        var data = false
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

    /// The queue order that puts a task before every other task of its class: below all of `orders` (the
    /// orders of the other tasks of the same priority) and below zero, so `enqueue` keeps it.
    static func frontOrder(among orders: [Int64]) -> Int64 {
        min(orders.min() ?? 0, 0) - 1
    }

    /// What holds a queued task apart from the daemon-wide count: the one rule both for starting tasks
    /// (`DaemonState.isHeld`, on the hot path: no text made) and for telling why one waits (`decide`).
    enum OwnHold: Equatable {
        /// Its previous transfer is still stopping.
        case stopping
        /// Its session runs its `maxConcurrent`.
        case session(running: Int, max: Int)
        /// Its host has `max-connections-per-host` in use.
        case host(running: Int, max: Int)
        /// Its owner's transfers go through `inUse` proxies, the most one uid may use at once, and it needs
        /// another one.
        case proxies(inUse: Int)
        /// It is a data task and its owner's running data tasks may keep `held` bytes of responses in memory:
        /// one more could take them past `maxDataBytesPerUID`.
        case dataMemory(held: Int64)
    }

    /// What the running data tasks of one uid may keep in memory together (each its body cap, at most 16 MiB):
    /// four at the largest cap, many more small ones. A data task that might take its owner past it waits
    /// queued (`uidDataMemory`) until one of them ends; without it one user's data tasks could take every
    /// daemon-wide slot (`max-concurrent` up to 1,000) with 16 MiB each.
    static let maxDataBytesPerUID: Int64 = 64 << 20

    /// A data task's hold when its owner's running data tasks may keep `held` bytes: room for one more of the
    /// largest cap is needed, whatever its own (so every data task of a lane is held alike, and never one of
    /// an owner that runs none).
    static func dataHold(data: Bool, held: Int64) -> OwnHold? {
        guard data, held + ResponseLimit.dataDefaultBytes > maxDataBytesPerUID else { return nil }
        return .dataMemory(held: held)
    }

    /// Its session runs its `maxConcurrent` (nil: the session sets none). Also the whole lane's hold
    /// (`DaemonState.isHeld(lane:owner:)`).
    static func sessionHold(running: Int, max: Int?) -> OwnHold? {
        guard let max, running >= max else { return nil }
        return .session(running: running, max: max)
    }

    /// Its host has `max-connections-per-host` in use. Also the hold of every task to the host
    /// (`DaemonState.isHeld(host:limits:)`).
    static func hostHold(running: Int, max: Int) -> OwnHold? {
        running >= max ? .host(running: running, max: max) : nil
    }

    /// `proxiesInUse`: set only when the task needs a proxy its owner's transfers do not use yet while they are
    /// at `ProxyRules.maxProxiesPerUID` (`ProxyUse.holds(owner:_:)`).
    static func ownHold(stopping: Bool, sessionRunning: Int, sessionMax: Int?, hostRunning: Int,
                        hostMax: Int, proxiesInUse: Int? = nil, data: Bool = false, dataHeld: Int64 = 0) -> OwnHold? {
        if stopping { return .stopping }
        if let held = sessionHold(running: sessionRunning, max: sessionMax) { return held }
        if let held = hostHold(running: hostRunning, max: hostMax) { return held }
        if let proxiesInUse { return .proxies(inUse: proxiesInUse) }
        return dataHold(data: data, held: dataHeld)
    }

    /// The decision for one queued task, given what runs now: `running` transfers in all, `sessionRunning` of
    /// its session, `hostRunning` to its host, with `ahead` tasks before it in the queue.
    static func decide(_ entry: Entry, ahead: Int, running total: Int, sessionRunning: Int, hostRunning: Int,
                       proxiesInUse: Int? = nil, dataHeld: Int64 = 0, limits: Limits) -> Decision {
        if !entry.stopping, total >= limits.maxConcurrent {
            return .hold(TaskHold(reason: "maxConcurrent",
                                  message: "\(total) of \(limits.maxConcurrent) daemon-wide transfer slots in use" + Self.ahead(ahead)))
        }
        guard let own = ownHold(stopping: entry.stopping, sessionRunning: sessionRunning,
                                sessionMax: limits.sessionMaxConcurrent[entry.session], hostRunning: hostRunning,
                                hostMax: limits.maxConnectionsPerHost, proxiesInUse: proxiesInUse,
                                data: entry.data, dataHeld: dataHeld) else { return .start }
        switch own {
        case .stopping:
            return .hold(TaskHold(reason: "previousTransferStopping", message: "Its previous transfer is still stopping"))
        case let .session(running, max):
            return .hold(TaskHold(reason: "sessionMaxConcurrent",
                                  message: "\(running) of \(max) transfers of session "
                                      + "'\(SessionNames.name(of: entry.session))' running (the session's maxConcurrent)"))
        case let .host(running, max):
            return .hold(TaskHold(reason: "hostMaxConnections",
                                  message: "\(running) of \(max) connections to \(entry.host) in use (max-connections-per-host)"))
        case let .proxies(inUse):
            return .hold(TaskHold(reason: "uidMaxProxies",
                                  message: "Its owner's transfers already go through \(inUse) different proxies, the most one "
                                      + "user may use at once; it starts when one of them is no longer used"))
        case let .dataMemory(held):
            return .hold(TaskHold(reason: "uidDataMemory",
                                  message: "Its owner's running data tasks may keep \(held >> 20) MiB of responses in memory, "
                                      + "near the \(maxDataBytesPerUID >> 20) MiB one user's may; it starts when one of them ends"))
        }
    }

    private static func ahead(_ index: Int) -> String {
        index == 0 ? "; it is next in the queue" : "; \(index) task\(index == 1 ? "" : "s") ahead in the queue"
    }
}

/// The host a transfer connects to, as the per-host limit counts it: "scheme://host:port", lowercased, with
/// the scheme's default port filled in and any user info dropped.
enum HostKey {
    /// Every task's key is taken again as it changes state (the per-host counts of `TaskTable`): an ASCII URL, as
    /// every validated one is, is read byte by byte (`ascii`), which gives what `general` gives, ~5× cheaper.
    static func of(_ url: String) -> String {
        var url = url
        let fast = url.withUTF8 { bytes -> String? in bytes.allSatisfy { $0 < 0x80 } ? ascii(bytes) : nil }
        return fast ?? general(url)
    }

    /// `general` on the bytes of an ASCII URL (in ASCII every character is one byte, but CR LF: neither is one of
    /// the bytes looked for, so the same places are found).
    static func ascii(_ url: UnsafeBufferPointer<UInt8>) -> String {
        let colon = UInt8(ascii: ":"), slash = UInt8(ascii: "/")
        var start = 0, end = url.count
        var scheme: [UInt8]? // lowercased; nil: no "://", "http"
        var i = 0
        while i + 2 < url.count {
            if url[i] == colon && url[i + 1] == slash && url[i + 2] == slash {
                scheme = url[0..<i].map(lowered)
                start = i + 3
                break
            }
            i += 1
        }
        if let stop = url[start...].firstIndex(where: { $0 == slash || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
            end = stop
        }
        if let at = url[start..<end].lastIndex(of: UInt8(ascii: "@")) { start = at + 1 }
        var host = start..<end
        var port: Range<Int>?
        if start < end && url[start] == UInt8(ascii: "[") {
            if let close = url[start..<end].firstIndex(of: UInt8(ascii: "]")) {
                host = start..<(close + 1)
                if close + 1 < end && url[close + 1] == colon { port = (close + 2)..<end }
            }
        } else if let c = url[start..<end].lastIndex(of: colon) {
            host = start..<c
            port = (c + 1)..<end
        }
        var key: [UInt8] = []
        key.reserveCapacity(url.count + 8)
        if let scheme { key += scheme } else { key.append(contentsOf: "http".utf8) }
        key.append(contentsOf: "://".utf8)
        key += url[host].lazy.map(lowered)
        key.append(colon)
        if let port, !port.isEmpty {
            key += url[port]
        } else {
            key.append(contentsOf: (scheme?.elementsEqual("https".utf8) == true ? "443" : "80").utf8)
        }
        return String(decoding: key, as: UTF8.self)
    }

    private static func lowered(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    /// The key of any URL, character by character.
    static func general(_ url: String) -> String {
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
