import DequeModule
import HalfTunesJournal
import HalfTunesProtocol
import NIOConcurrencyHelpers
import NIOCore

/// The ordered, bounded output of one client connection. Lines are written in the order `send` is
/// called; a client that stops reading and lets more than `limit` bytes pile up is disconnected (it
/// can re-subscribe from its last `seq`), so it never stalls the daemon or grows its memory. Bulk
/// output (an event replay) paces itself with `drained(below:)` instead of overflowing.
///
/// Nothing leaves before the journal commits made until it was sent are durable: each line is tagged with
/// the journal's latest commit number and held back (in order) until the group commit that covers it, so an
/// answer or an event never reports a state change that a crash could still undo. When nothing is waiting
/// for an fsync, lines go out at once.
final class Outbox: Sendable {
    let connectionID: UInt64
    let limit: Int
    private let channel: Channel
    /// How long a paced sender waits for the client to read before giving up on it.
    private let stallTimeout: TimeAmount
    private let state = NIOLockedValueBox(State())
    /// Lines held until their commit is durable, in order; its lock also orders every write to the channel.
    private let held = NIOLockedValueBox(Held())
    private let durability: JournalDurability?

    private enum Item {
        /// `seq`: the event's on an event line. An event whose write failed is dropped when its commit is
        /// durable (`JournalDurability.isWithdrawn`): subscribers never see what the journal never held.
        case line([UInt8], seq: Int64?)
        case close
    }

    private struct Held {
        var items: Deque<(ticket: UInt64, item: Item)> = []
        /// Whether a `whenDurable` callback is registered for the first held item.
        var registered = false
    }

    private struct Waiter {
        var threshold: Int
        var continuation: CheckedContinuation<Bool, Never>
    }

    /// Lines longer than this (a data task's body in `didComplete` or `task.get`, up to ~22 MB) are counted
    /// apart from `limit`, against `largeLineBudget`: so one such line never disconnects a reading client.
    static let largeLine = HalfTunes.maxLineBytes
    static let largeLineBudget = 48 << 20

    private struct State {
        var pending = 0
        /// The part of `pending` counted against the uid's budget (`UIDOutput`), given back as it is written.
        var charged = 0
        /// The part of `pending` in lines longer than `largeLine`.
        var pendingLarge = 0
        var closed = false
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0

        /// Removes and returns the waiters the current state answers (all of them once closed).
        mutating func answered() -> [(Waiter, Bool)] {
            let ready = waiters.filter { closed || pending <= $0.value.threshold }
            for key in ready.keys { waiters[key] = nil }
            return ready.values.map { ($0, !closed) }
        }
    }

    init(connectionID: UInt64, channel: Channel, limit: Int, stallTimeout: TimeAmount = .seconds(60),
         durability: JournalDurability? = nil) {
        self.connectionID = connectionID
        self.channel = channel
        self.limit = limit
        self.stallTimeout = stallTimeout
        self.durability = durability
    }

    deinit {
        // Lines never written (held for a commit when the connection went) give their share back all the same.
        let charged = state.withLockedValue { $0.charged }
        if charged > 0, let uid = viewer.withLockedValue({ $0 }), let shared = uidOutput.withLockedValue({ $0 }) {
            shared.release(uid, charged)
        }
    }

    var pendingBytes: Int { state.withLockedValue { $0.pending } }
    var isClosed: Bool { state.withLockedValue { $0.closed } }

    /// The peer's uid once known: session names in everything sent are shown as that uid sees them.
    private let viewer = NIOLockedValueBox<UInt32?>(nil)
    /// Where the uid's unsent output is counted with its other connections' (set with the viewer).
    private let uidOutput = NIOLockedValueBox<UIDOutput?>(nil)

    func setViewer(_ uid: UInt32, output: UIDOutput? = nil) {
        viewer.withLockedValue { $0 = uid }
        uidOutput.withLockedValue { $0 = output }
    }

    /// Live events of sessions whose journaled events are being replayed to this connection, held until the
    /// replay ends (`holdEvents`, `releaseEvents`), under the number of the hold that holds them (a new
    /// subscription of the same session takes the hold over).
    private struct Holds {
        var next: UInt64 = 0
        var bySession: [String: (hold: UInt64, events: [Event])] = [:]
    }
    private let holds = NIOLockedValueBox(Holds())
    /// The most live events held for one replay: a replay that falls this far behind closes the connection (the
    /// client subscribes again from the last `seq` it saw).
    static let maxHeldEvents = 100_000

    /// From now on the session's live events are held, not sent, until `releaseEvents` with the number returned.
    /// A second hold of the same session (a new subscription replacing the first) keeps what is held and takes
    /// over: the first one's release then does nothing.
    func holdEvents(of session: String) -> UInt64 {
        holds.withLockedValue { h in
            h.next += 1
            h.bySession[session] = (h.next, h.bySession[session]?.events ?? [])
            return h.next
        }
    }

    /// Sends the session's live events held since `holdEvents`, in order, leaving out the journaled ones at or
    /// below `cursor` (the replay sent those), and sends its live events at once again. Returns whether `hold`
    /// was still the session's (if a later one replaced it, nothing is done).
    @discardableResult
    func releaseEvents(of session: String, after cursor: Int64, hold: UInt64) -> Bool {
        let held = holds.withLockedValue { h -> [Event]? in
            guard h.bySession[session]?.hold == hold else { return nil }
            return h.bySession.removeValue(forKey: session)?.events
        }
        guard let held else { return false }
        for event in held where (event.seq ?? .max) > cursor { send(replayed: event) }
        return true
    }

    func send(response: RPCResponse) {
        var response = response
        let uid = viewer.withLockedValue { $0 }
        if let uid {
            response.result = response.result.map { SessionNames.present($0, to: uid) }
            response.error = response.error.map { SessionNames.present($0, to: uid) }
        }
        // A result written straight to text shows the names as it is written.
        guard let line = try? response.line(unqualifying: uid.map(SessionNames.prefix(of:))) else { return }
        send(line: line)
    }

    func send(notification event: Event) {
        let held: Bool? = holds.withLockedValue { h in
            guard !h.bySession.isEmpty, h.bySession[event.session] != nil else { return false }
            guard h.bySession[event.session]!.events.count < Self.maxHeldEvents else { return nil }
            h.bySession[event.session]!.events.append(event)
            return true
        }
        guard held == false else {
            if held == nil { close() } // the replay fell too far behind
            return
        }
        send(replayed: event)
    }

    /// Sends an event whatever is held (the replay's own, and the held ones it releases).
    func send(replayed event: Event) {
        let prefix = viewer.withLockedValue { $0 }.map(SessionNames.prefix(of:))
        send(line: RPCNotification.eventLine(event, unqualifying: prefix), seq: event.seq)
    }

    func send(line: [UInt8], seq: Int64? = nil) {
        let size = line.count
        let uid = viewer.withLockedValue { $0 }
        let shared = uidOutput.withLockedValue { $0 }
        let overflow: Bool = state.withLockedValue { s in
            if s.closed { return false }
            s.pending += size
            if size > Self.largeLine { s.pendingLarge += size }
            if s.pending - s.pendingLarge > limit || s.pendingLarge > Self.largeLineBudget { s.closed = true; return true }
            if let uid, let shared {
                // The line that would take the uid's connections past their budget closes this one.
                guard shared.charge(uid, size, holding: s.charged) else {
                    s.charged = 0
                    s.closed = true
                    return true
                }
                s.charged += size
            }
            return false
        }
        if overflow {
            close()
            return
        }
        if isClosed { return }
        enqueue(.line(line, seq: seq))
    }

    /// Writes `item` now if nothing is held and the journal is durable up to its latest commit, else holds
    /// it behind the others until the commit it was sent after is durable.
    private func enqueue(_ item: Item) {
        let ticket = durability?.lastCommit ?? 0
        let register: Bool = held.withLockedValue { h in
            if h.items.isEmpty, durability?.isDurable(ticket) ?? true {
                perform(item)
                return false
            }
            h.items.append((ticket, item))
            if h.registered { return false }
            h.registered = true
            return true
        }
        if register { waitForDurability(ticket) }
    }

    private func waitForDurability(_ ticket: UInt64) {
        durability?.whenDurable(ticket) { [weak self] in self?.releaseHeld() }
    }

    /// Writes the held items whose commits are durable, in order; waits again for the next one, if any.
    private func releaseHeld() {
        let next: UInt64? = held.withLockedValue { h in
            var ready: [Item] = []
            while let first = h.items.first, durability?.isDurable(first.ticket) ?? true {
                h.items.removeFirst()
                ready.append(first.item)
            }
            perform(ready)
            guard let first = h.items.first else {
                h.registered = false
                return nil
            }
            return first.ticket
        }
        if let next { waitForDurability(next) }
    }

    /// Hands an item to the channel's event loop (called with `held` locked, which keeps the order).
    private func perform(_ item: Item) { perform([item]) }

    /// Hands items to the channel's event loop in one hop, flushed once (a group commit releases many
    /// answers at a time).
    private func perform(_ items: [Item]) {
        guard !items.isEmpty else { return }
        let channel = self.channel
        let durability = self.durability
        channel.eventLoop.execute {
            for item in items {
                switch item {
                case let .line(line, seq):
                    let size = line.count
                    if let seq, durability?.isWithdrawn(seq) == true {
                        self.written(size) // its write failed: never sent, no longer pending
                        continue
                    }
                    channel.write(channel.allocator.buffer(bytes: line)).whenComplete { [weak self] _ in
                        self?.written(size)
                    }
                case .close:
                    channel.flush()
                    channel.close(promise: nil)
                    return
                }
            }
            channel.flush()
        }
    }

    /// Waits until no more than `threshold` bytes are unsent. Returns false if the connection closed,
    /// or if the client read nothing for the stall timeout (the connection is then closed).
    func drained(below threshold: Int) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let (key, immediate): (UInt64?, Bool?) = state.withLockedValue { s in
                if s.closed { return (nil, false) }
                if s.pending <= threshold { return (nil, true) }
                let key = s.nextWaiter
                s.nextWaiter += 1
                s.waiters[key] = Waiter(threshold: threshold, continuation: continuation)
                return (key, nil)
            }
            if let immediate {
                continuation.resume(returning: immediate)
                return
            }
            guard let key else { return }
            channel.eventLoop.scheduleTask(in: stallTimeout) { [weak self] in
                guard let self else { return }
                let stalled = self.state.withLockedValue { $0.waiters[key] != nil }
                if stalled { self.close() }
            }
        }
    }

    /// Closes the connection once everything sent so far has been written (a last error message).
    func closeWhenFlushed() {
        enqueue(.close)
    }

    func close() {
        let (waiters, charged) = state.withLockedValue { s in
            s.closed = true
            defer { s.charged = 0 }
            return (s.answered(), s.charged)
        }
        // What will not be read no longer counts against the uid's budget.
        if charged > 0, let uid = viewer.withLockedValue({ $0 }), let shared = uidOutput.withLockedValue({ $0 }) {
            shared.release(uid, charged)
        }
        for (waiter, result) in waiters { waiter.continuation.resume(returning: result) }
        channel.close(promise: nil)
    }

    private func written(_ size: Int) {
        let (waiters, uncharged) = state.withLockedValue { s in
            s.pending -= size
            if size > Self.largeLine { s.pendingLarge -= size }
            let given = min(size, s.charged)
            s.charged -= given
            return (s.answered(), given)
        }
        if uncharged > 0, let uid = viewer.withLockedValue({ $0 }), let shared = uidOutput.withLockedValue({ $0 }) {
            shared.release(uid, uncharged)
        }
        for (waiter, result) in waiters { waiter.continuation.resume(returning: result) }
    }
}
