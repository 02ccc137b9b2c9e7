import Foundation
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Journals this row of a task with its events in one transaction (submitted to the journal's writer), then
    /// delivers the events live (each connection's `Outbox` holds them until that write is durable).
    func commit(_ record: TaskRecord, _ payloads: [EventPayload]) {
        guard let id = record.id else { return }
        let time = Timestamp.format(clock())
        let events = payloads.map { Event(seq: nil, session: record.session, task: id, time: time, payload: $0) }
        do {
            let stored = try writeRow(record, events: events.filter(\.payload.isJournaled))
            broadcast(stored + events.filter { !$0.payload.isJournaled })
        } catch {
            // The in-memory state moved on; the journal will catch up with the next write of this task.
            logger.error("journal write failed for task \(id): \(error)", metadata: ["task": "\(id)"])
            broadcast(events)
        }
    }

    /// Submits a task's row (with these events) to the journal's writer, which writes it after everything
    /// submitted before; the events come back numbered, and whoever sends them or answers after this waits for
    /// its durability (`Outbox`). While the task's attempt is in flight and the task unfinished, the row carries
    /// the attempt's durable ranges, held still while it is submitted, so a concurrent checkpoint is never
    /// overwritten by an older value.
    func writeRow(_ record: TaskRecord, events: [Event]) throws -> [Event] {
        guard let id = record.id, let runtime = attempts[id]?.runtime, !record.state.isTerminal else {
            return try journal.submitTaskUpdate(record, events: events)
        }
        return try runtime.withDurableRanges { durable in
            var row = record
            row.durableRanges = durable
            return try journal.submitTaskUpdate(row, events: events)
        }
    }

    /// Sends events to the live subscribers of their sessions. Every journaled event passes here (the ones
    /// with a seq), which is where the unacknowledged ones are counted: one input per run of journaled events
    /// of one session (a call's events are usually one task's), not one per event.
    func broadcast(_ events: [Event]) {
        var counted: (session: String, lastSeq: Int64, count: Int)?
        for event in events {
            guard let seq = event.seq else { continue }
            if let r = counted, r.session == event.session {
                counted = (r.session, max(r.lastSeq, seq), r.count + 1)
            } else {
                if let r = counted {
                    feedAndRun(.eventsJournaled(session: r.session, lastSeq: r.lastSeq, count: r.count))
                }
                counted = (event.session, seq, 1)
            }
        }
        if let r = counted {
            feedAndRun(.eventsJournaled(session: r.session, lastSeq: r.lastSeq, count: r.count))
        }
        for event in events {
            guard let subs = subscribers[event.session] else { continue }
            for outbox in subs.values { outbox.send(notification: event) }
        }
    }

    /// Events read from the journal at a time while replaying.
    static let replayPage = 512

    /// Registers for live events, replays journaled events after `after`, then sends `didFinishEvents` and the
    /// live events from then on. The replay is paced by the client's reading (it never overflows the outbox of
    /// a client that reads), and its pages are read off the core (`Journal.reading`). No event slips between
    /// replay and live delivery: the registration comes first, in the turn that queues the first read, and holds
    /// the live events (`Outbox.holdEvents`) until the replay ends; then the ones the replay did not send go out,
    /// in order, before `didFinishEvents`.
    func subscribe(_ p: EventsSubscribeParams, caller: Caller, requestID: RPCID?, outbox: Outbox) async throws(RPCError) {
        let s = try session(p.session, for: caller)
        let held = subscribers.reduce(0) { $0 + ($1.key != p.session && $1.value[outbox.connectionID] != nil ? 1 : 0) }
        guard held < configuration.maxSubscriptionsPerConnection else {
            throw RPCError(.limitExceeded, "This connection already holds \(held) subscriptions (at most \(configuration.maxSubscriptionsPerConnection)); subscribe on another connection")
        }
        let after = max(0, p.after ?? 0)
        let result = EventsSubscribeResult(session: p.session, after: after, prunedThrough: s.record.ackedThrough)
        outbox.send(response: RPCResponse(id: requestID, result: (try? JSONValue(encoding: result)) ?? .null))
        let session = p.session
        outbox.holdEvents(of: session)
        subscribers[session, default: [:]][outbox.connectionID] = outbox
        subscribersChanged(session)
        var cursor = after
        do throws(RPCError) {
            while state.sessions[session] != nil, !outbox.isClosed {
                let from = cursor
                let page = try await nonblocking { try $0.events(session: session, after: from, limit: Self.replayPage) }
                for event in page {
                    if outbox.pendingBytes > outbox.limit / 2 {
                        guard await outbox.drained(below: outbox.limit / 4) else { break }
                    }
                    outbox.send(replayed: event)
                    cursor = event.seq ?? cursor
                }
                if page.count < Self.replayPage { break } // every event journaled before the hold is sent
            }
        } catch {
            outbox.releaseEvents(of: session, after: cursor)
            if subscribers[session]?.removeValue(forKey: outbox.connectionID) != nil {
                if subscribers[session]?.isEmpty == true { subscribers[session] = nil }
                subscribersChanged(session)
            }
            throw error
        }
        // The live events held meanwhile (those the replay did not send; `didBecomeInvalid` if the session ended).
        outbox.releaseEvents(of: session, after: cursor)
        guard let current = state.sessions[session], subscribers[session]?[outbox.connectionID] === outbox else { return }
        outbox.send(replayed: Event(seq: nil, session: session, task: nil, time: Timestamp.format(clock()),
                                    payload: .didFinishEvents(through: max(current.lastEventSeq, cursor))))
    }

    /// The acknowledgement is written in its turn on the journal's thread; the core serves other calls meanwhile.
    func ack(_ p: EventsAckParams, caller: Caller) async throws(RPCError) -> EventsAckResult {
        let s = try session(p.session, for: caller)
        guard p.through >= 0 else { throw RPCError.invalidParams("through must be ≥ 0") }
        guard p.through <= s.lastEventSeq else {
            throw RPCError.invalidParams("through (\(p.through)) is beyond the session's last event (\(s.lastEventSeq))")
        }
        let (session, through) = (p.session, p.through)
        let (pruned, droppedBodies) = try await journaling { try $0.ack(session: session, through: through) }
        feedAndRun(.eventsAcknowledged(session: p.session, through: p.through, pruned: pruned,
                                          droppedBodies: droppedBodies))
        // (A session that keeps nothing once acknowledged lost its finished tasks in those actions.) A large
        // acknowledgement frees many pages (given back to the file system).
        if pruned >= Self.largeAcknowledgement { journal.submitting { try $0.releaseFreePages() } }
        let acked = state.sessions[p.session]?.record.ackedThrough ?? s.record.ackedThrough
        return EventsAckResult(ackedThrough: max(acked, p.through), pruned: pruned)
    }

    func connectionClosed(_ connectionID: UInt64) {
        for key in Array(subscribers.keys) {
            guard subscribers[key]?.removeValue(forKey: connectionID) != nil else { continue }
            if subscribers[key]?.isEmpty == true { subscribers[key] = nil }
            subscribersChanged(key) // the last one leaving may start the session's unit
        }
    }
}
