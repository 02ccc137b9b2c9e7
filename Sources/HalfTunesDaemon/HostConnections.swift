// The connections a host may still get beyond one per running task, granted to split downloads one at a time.
import Dispatch
import NIOConcurrencyHelpers

/// The per-host budget of extra connections (those a download opens beyond its first, to fetch segments).
/// The state gives each host its `allowance` (the action `hostAllowance`) after an input that changes it:
/// `max-connections-per-host` minus the tasks running there, and none at all while a task for the host is
/// queued (a queued task never waits behind another task's extra connections). Attempts ask for one
/// connection at a time from their event loops (`tryAcquire`) and give it back when its request ends
/// (`release`); when an allowance falls below what is held, the budget asks the holders to shed the excess
/// (`Attempt.shedConnections`), newest grants first. A lock, not the core's actor: attempts ask while they
/// plan, and must get an answer at once.
///
/// A server that refuses a further connection (429, 503) caps its host's extras at what is left without that
/// connection, for its `Retry-After` or a minute (`refused`): other tasks to that host do not ask it again
/// meanwhile.
///
/// Every change of a host's extras is reported through `onChange` (off the lock), which the core turns into
/// the state's `connectionsChanged` input: the per-host limit counts extras, so a task waiting for its host
/// starts once enough have been shed. Cost per call: O(tasks holding extras on that host), never all tasks.
/// `@unchecked`: every mutable property is read and written only while `lock` is held.
final class HostConnections: @unchecked Sendable {
    typealias Shed = @Sendable (Int) -> Void

    private struct Holder {
        var count: Int
        /// The order of the holder's latest grant (the newest holders shed first).
        var serial: Int64
        let shed: Shed
    }

    private struct Host {
        var allowance = 0
        var extras = 0
        var holders: [Int64: Holder] = [:]
        /// Extras asked back and not released yet (so one shortfall is not asked for twice).
        var shedding = 0
    }

    private let lock = NIOLock()
    private var hosts: [String: Host] = [:]
    /// Extras in use to every host (kept, so `daemon.status` never walks the hosts).
    private var total = 0
    private var serial: Int64 = 0
    private var changeHandler: (@Sendable (String) -> Void)?
    /// Hosts that refused a further connection: at most `cap` extras until `until` (seconds on `clock`).
    private var refusals: [String: (cap: Int, until: Double)] = [:]
    private let clock: @Sendable () -> Double
    /// How long a refusal without `Retry-After` holds, and the longest any holds.
    static let refusalHold = 60.0
    static let longestRefusalHold = 3600.0

    init(clock: @escaping @Sendable () -> Double = { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }) {
        self.clock = clock
    }

    /// Sets what is told of every change of a host's extras (called off the lock).
    func onChange(_ handler: @escaping @Sendable (String) -> Void) {
        lock.withLock { changeHandler = handler }
    }

    private func changed(_ host: String) {
        lock.withLock { changeHandler }?(host)
    }

    /// How many extra connections are in use to `host`.
    func extras(_ host: String) -> Int {
        lock.withLock { hosts[host]?.extras ?? 0 }
    }

    /// Extra connections in use to every host.
    var totalExtras: Int {
        lock.withLock { total }
    }

    /// The extra connections `task` holds to `host`.
    func extras(_ host: String, task: Int64) -> Int {
        lock.withLock { hosts[host]?.holders[task]?.count ?? 0 }
    }

    /// Sets how many extras `host` may have in all; holders shed the excess.
    func setAllowance(_ allowance: Int, host: String) {
        var sheds: [(Shed, Int)] = []
        lock.withLock {
            var h = hosts[host] ?? Host()
            h.allowance = max(0, allowance)
            var excess = h.extras - h.shedding - h.allowance
            if excess > 0 {
                for (_, holder) in h.holders.sorted(by: { $0.value.serial > $1.value.serial }) where excess > 0 {
                    let n = min(excess, holder.count)
                    sheds.append((holder.shed, n))
                    h.shedding += n
                    excess -= n
                }
            }
            store(h, host)
        }
        for (shed, n) in sheds { shed(n) }
    }

    /// One more extra connection for `task` to `host`, if the allowance has room; `shed` is how the budget
    /// takes connections back from this task.
    func tryAcquire(_ host: String, task: Int64, shed: @escaping Shed) -> Bool {
        let granted = lock.withLock { () -> Bool in
            guard var h = hosts[host], h.extras < min(h.allowance, refusalCap(host)) else { return false }
            serial += 1
            total += 1
            h.extras += 1
            h.holders[task] = Holder(count: (h.holders[task]?.count ?? 0) + 1, serial: serial, shed: shed)
            hosts[host] = h
            return true
        }
        if granted { changed(host) }
        return granted
    }

    /// The host's server refused a further connection: until `retryAfter` (or `refusalHold`) passes, the host
    /// gets no more extras than it has without that one.
    func refused(_ host: String, retryAfter: Double?) {
        lock.withLock {
            let hold = min(max(retryAfter ?? Self.refusalHold, 1), Self.longestRefusalHold)
            let cap = max(0, (hosts[host]?.extras ?? 0) - 1)
            let now = clock()
            let previous = refusals[host].flatMap { $0.until > now ? $0.cap : nil } ?? .max
            refusals[host] = (min(cap, previous), max(now + hold, refusals[host]?.until ?? 0))
        }
    }

    /// The most extras a refusal lets the host have now (forgets a refusal that has passed). Under the lock.
    private func refusalCap(_ host: String) -> Int {
        guard let refusal = refusals[host] else { return .max }
        guard refusal.until > clock() else {
            refusals[host] = nil
            return .max
        }
        return refusal.cap
    }

    /// `task` gives back `count` extra connections to `host` (all it holds when nil).
    func release(_ host: String, task: Int64, count: Int? = nil) {
        let changed = lock.withLock { () -> Bool in
            guard var h = hosts[host], let holder = h.holders[task] else { return false }
            let n = min(count ?? holder.count, holder.count)
            guard n > 0 else { return false }
            h.extras -= n
            total -= n
            h.shedding = max(0, h.shedding - n)
            if holder.count == n { h.holders[task] = nil } else { h.holders[task]!.count -= n }
            store(h, host)
            return true
        }
        if changed { self.changed(host) }
    }

    /// Keeps a host's entry only while it says something (an allowance or extras in use).
    private func store(_ h: Host, _ host: String) {
        var h = h
        h.shedding = min(h.shedding, h.extras)
        hosts[host] = h.allowance == 0 && h.extras == 0 ? nil : h
    }
}
