// Sessions and their events in the core: open, invalidate, subscribe, acknowledge.
import Foundation
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    static let maxIdentifierLength = 255

    /// The session's row is written in its turn on the journal's thread while the core serves other calls; a new
    /// session is in the state from the start (its identifier and the caps are taken), and leaves it again if the
    /// row cannot be written.
    func openSession(_ p: SessionOpenParams, uid: UInt32) async throws(RPCError) -> SessionOpenResult {
        let id = p.identifier
        // The router qualified the identifier with the owner's uid ("1000/com.example.app").
        let owner = SessionNames.owner(of: id) ?? uid
        let name = SessionNames.name(of: id)
        if let problem = Self.identifierProblem(name) { throw RPCError.invalidParams(problem) }
        // Re-attaching writes nothing; creating or reconfiguring writes the session's row.
        if state.sessions[id] == nil || p.configuration != nil {
            try checkStateSpace("session.open")
            // The share as last read (task.create reads it): a session's row waits for no read of its own.
            try await checkJournalShare(uid: owner, method: "session.open", reading: false)
        }
        let config = try resolve(p.configuration, owner: owner, session: name, stored: state.sessions[id]?.record.configuration)
        if let unit = config.launchUnit, UnitName.resolve(unit, session: name).utf8.count > UnitName.maxLength {
            throw RPCError.invalidParams("configuration.launchUnit: '\(unit)' with this session's escaped identifier as its "
                + "instance is longer than \(UnitName.maxLength) bytes; use a shorter identifier or a unit that is not a template")
        }
        let record = SessionRecord(identifier: id, uid: owner, configuration: config, state: .active, createdAt: clock())
        let actions = feed(.sessionOpening(record, reconfigure: p.configuration != nil))
        let written = run(actions)
        let before = state.sessions[id]
        guard case .sessionOpen(let answer)? = actions.first else {
            throw RPCError(.internalError, "session.open was neither answered nor refused")
        }
        let failure = await written?.failure
        let reattached: Bool
        switch answer {
        case .refused(let refusal):
            throw RPCError(refusal)
        case .reattached:
            reattached = true
        case .reconfiguring(let ticket):
            if let failure { throw Self.journalWriteError(failure) }
            // Written in ticket order: the state takes the configuration written last, whatever order the calls
            // resume in.
            feedAndRun(.sessionConfigured(id, config, ticket: ticket))
            reattached = true
        case .opened:
            if let failure {
                // Whatever was created in it meanwhile was submitted after the row and fails with it.
                feedAndRun(.sessionRemoved(id, createdAt: record.createdAt))
                throw Self.journalWriteError(failure)
            }
            logger.info("session opened", metadata: ["session": "\(id)"])
            reattached = false
        }
        // A new launch unit may have started at once; a session invalidated and gone meanwhile is shown as it was.
        guard let s = state.sessions[id] ?? before else { throw RPCError.unknownSession(id) }
        return SessionOpenResult(session: sessionInfo(s), reattached: reattached)
    }

    /// Why `name` cannot be a session identifier, or nil: 1–255 bytes of letters, digits and
    /// `. _ - @ + :`, starting with a letter or digit (reverse-DNS names like com.example.app fit).
    static func identifierProblem(_ name: String) -> String? {
        let allowed = Set(".-_@+:")
        guard let first = name.unicodeScalars.first, name.utf8.count <= maxIdentifierLength,
              first.properties.isASCIIHexDigit || ("a"..."z").contains(first) || ("A"..."Z").contains(first),
              name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || allowed.contains($0)) })
        else {
            return "session identifier must be 1–\(maxIdentifierLength) ASCII letters, digits and . _ - @ + :, starting with a letter or digit (got '\(name.prefix(64))')"
        }
        return nil
    }

    /// Fills in defaults and validates a configuration.
    func resolve(_ c: SessionConfiguration?, owner: UInt32, session name: String, stored: SessionConfiguration? = nil)
        throws(RPCError) -> SessionConfiguration
    {
        var config = c ?? SessionConfiguration()
        config.notifications = config.notifications ?? SessionNotifications.defaultValue(forSession: name)
        config.proxy = try SessionProxy.resolve(config.proxy, stored: stored?.proxy)
        config.proxyBypass = try SessionProxy.resolveBypass(config.proxyBypass)
        config.credentials = try SessionCredentials.resolve(config.credentials, stored: stored?.credentials)
        if let given = config.destinationDirectory {
            try Destination.checkClientPath(given, field: "configuration.destinationDirectory")
        }
        let dir = config.destinationDirectory ?? downloadRoots.defaultDirectory(for: owner)
        guard dir.hasPrefix("/") else {
            throw RPCError.invalidParams("configuration.destinationDirectory must be an absolute path")
        }
        config.destinationDirectory = Destination.normalize(dir)
        try downloadRoots.confine(config.destinationDirectory!, uid: owner)
        try validateHeaders(config.headers ?? [:])
        config.headers = config.headers ?? [:]
        let request = config.requestTimeout ?? SessionConfiguration.defaultRequestTimeout
        let resource = config.resourceTimeout ?? SessionConfiguration.defaultResourceTimeout
        guard request > 0, request <= 86_400 else {
            throw RPCError.invalidParams("configuration.requestTimeout must be between 0 and 86400 seconds")
        }
        guard resource > 0, resource <= 365 * 86_400 else {
            throw RPCError.invalidParams("configuration.resourceTimeout must be between 0 and 31536000 seconds")
        }
        config.requestTimeout = request
        config.resourceTimeout = resource
        if let max = config.maxConcurrent, !DaemonState.Limit.countRange.contains(max) {
            throw RPCError.invalidParams("configuration.maxConcurrent must be from 1 to \(DaemonState.Limit.countRange.upperBound) (got \(max))")
        }
        if let retry = config.retry, let problem = Backoff.problem(with: retry) {
            throw RPCError.invalidParams(problem)
        }
        config.retry = Backoff(config.retry).policy
        config.allowInsecureRedirects = config.allowInsecureRedirects ?? false
        let connections = SessionConfiguration.maxConnectionsRange
        if let n = config.maxConnectionsPerTask, !connections.contains(n) {
            throw RPCError.invalidParams("configuration.maxConnectionsPerTask must be from \(connections.lowerBound) to "
                                         + "\(connections.upperBound) (got \(n))")
        }
        config.maxConnectionsPerTask = config.maxConnectionsPerTask ?? SessionConfiguration.defaultMaxConnectionsPerTask
        config.allowsExpensiveNetworkAccess = config.allowsExpensiveNetworkAccess ?? true
        config.waitsForConnectivity = config.waitsForConnectivity ?? true
        config.isDiscretionary = config.isDiscretionary ?? false
        config.preserveModificationTime = config.preserveModificationTime ?? true
        config.proxyTunnel = config.proxyTunnel ?? false
        if let keep = config.finishedTaskRetention,
           !(keep.isFinite && keep >= 0 && keep <= SessionConfiguration.maxFinishedTaskRetention) {
            throw RPCError.invalidParams("configuration.finishedTaskRetention must be a number of seconds from 0 (delete "
                + "a finished task as soon as its events are acknowledged) to \(Int(SessionConfiguration.maxFinishedTaskRetention)) (got \(keep))")
        }
        config.finishedTaskRetention = config.finishedTaskRetention ?? SessionConfiguration.defaultFinishedTaskRetention
        if config.launchUnit?.isEmpty == true { config.launchUnit = nil }
        if let unit = config.launchUnit {
            if let problem = UnitName.problem(unit) { throw RPCError.invalidParams(problem) }
        }
        return config
    }

    func validateHeaders(_ headers: [String: String]) throws(RPCError) {
        let reserved: Set<String> = ["range", "if-range", "accept-encoding", "host", "content-length",
                                     "transfer-encoding", "connection"]
        for (name, value) in headers {
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) else {
                throw RPCError.invalidParams("header name '\(name)' is not a valid HTTP token")
            }
            // Scalars, not Characters: "\r\n" is one Character and would slip past a Character test.
            guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw RPCError.invalidParams("header '\(name)' contains CR, LF or NUL")
            }
            // Other control characters (except tab) are not allowed in a field value either (RFC 9110 5.5).
            guard !value.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }) else {
                throw RPCError.invalidParams("header '\(name)' contains a control character")
            }
            guard !reserved.contains(name.lowercased()) else {
                throw RPCError.invalidParams("header '\(name)' is managed by the daemon and cannot be set")
            }
        }
    }

    func listSessions(caller: Caller) -> SessionListResult {
        // Root sees every session; anyone else, its own (from the index by uid, not a walk over every user's).
        let visible = caller.uid == 0 ? Array(state.sessions.values)
            : state.sessions.identifiers(of: caller.uid).compactMap { state.sessions[$0] }
        return SessionListResult(sessions: visible.sorted { $0.record.identifier < $1.record.identifier }.map(sessionInfo))
    }

    func invalidateSession(_ p: SessionInvalidateParams, caller: Caller) async throws(RPCError) -> SessionInvalidateResult {
        _ = try session(p.identifier, for: caller)
        // finishTasksAndInvalidate (no cancelTasks): pending tasks finish; suspended ones would never end, so
        // they are canceled. The session's new state is journaled before anything may delete it.
        // Its row is submitted before anything the other actions submit (the deletion included), awaited after them.
        let written = run(feed(.sessionInvalidating(p.identifier, cancelTasks: p.cancelTasks == true)))
        await settled() // the invalidation's end, if it ended at once
        if let failure = await written?.failure {
            throw RPCError(.ioError, "The journal could not be written (\(failure)); the session is invalidated until the "
                + "daemon restarts, when it is active again")
        }
        let remaining = state.tasks.unfinished(session: p.identifier)
        return SessionInvalidateResult(invalidated: remaining == 0, remainingTasks: remaining)
    }

    /// `finishInvalidation`: deletes an invalidated session, in the background: its resume data's partials, its
    /// journal rows (only while the journal still has it invalidating: a session of the same identifier may be
    /// opened once the first is gone), then feeds the outcome (`invalidationFinished`).
    func finishInvalidation(_ identifier: String) {
        inBackground { core in
            let deleted = await core.deletingInvalidatedSession(identifier)
            core.feedAndRun(.invalidationFinished(identifier, deletedTokens: deleted))
            if deleted != nil { core.logger.info("session invalidated", metadata: ["session": "\(identifier)"]) }
        }
    }

    /// How many resume data tokens went with the session's rows; nil: they could not be deleted.
    private func deletingInvalidatedSession(_ identifier: String) async -> Int? {
        do {
            let tokens = try await journal.reading { try $0.resumeTokens(session: identifier) }
            for token in tokens { discardPartial(token.partialPath) }
            guard let deleted = try await journal.writing({ try $0.deleteInvalidatedSession(identifier) }) else {
                // Not invalidating in the journal: its `invalidating` row could not be written, and the journal
                // has it active, as it will be after a restart.
                logger.notice("an invalidated session is active in the journal; it stays until the next start",
                              metadata: ["session": "\(identifier)"])
                return nil
            }
            let known = Set(tokens.map(\.token))
            for token in deleted where !known.contains(token.token) { discardPartial(token.partialPath) } // kept meanwhile
            return deleted.count
        } catch {
            logger.error("an invalidated session could not be deleted; it stays until the next start",
                         metadata: ["session": "\(identifier)", "error": "\(error)"])
            return nil
        }
    }

    /// `releaseSubscribers`: the session left the state (invalidated, or its row was never written): its
    /// subscribers are told (`didBecomeInvalid`) and let go, so none of them is left registered for an identifier
    /// opened again later.
    func letSubscribersGo(_ identifier: String) {
        let event = Event(seq: nil, session: identifier, task: nil, time: Timestamp.format(clock()), payload: .didBecomeInvalid)
        for outbox in subscribers.removeSession(identifier) { outbox.send(notification: event) }
    }

    /// Runs journal reads off the actor (`Journal.reading`): the actor serves other calls meanwhile. State read
    /// before the `await` may have changed after it.
    func nonblocking<T: Sendable>(_ query: @escaping @Sendable (Journal) throws -> T) async throws(RPCError) -> T {
        do {
            return try await journal.reading(query)
        } catch {
            logger.error("journal read failed: \(error)")
            throw RPCError(.ioError, "The journal could not be read (\(error))")
        }
    }

    /// Runs a journal write, turning its failure into an actionable RPC error.
    /// The journal's waited writes and reads in `operation`, run in their turn on the journal's thread: the core
    /// awaits them without blocking a thread, and serves other calls meanwhile (`Journal.writing`).
    func journaling<T: Sendable>(_ operation: @escaping @Sendable (Journal) throws -> T) async throws(RPCError) -> T {
        do {
            return try await journal.writing(operation)
        } catch {
            throw journalWriteFailed("\(error)")
        }
    }

    /// A journal write failed: logged, and answered `ioError`.
    func journalWriteFailed(_ error: String) -> RPCError {
        logger.error("journal write failed: \(error)")
        return Self.journalWriteError(error)
    }

    /// The answer to a failed journal write (a submitted write's failure is logged by the journal's handler).
    static func journalWriteError(_ error: String) -> RPCError {
        RPCError(.ioError, "The journal could not be written (\(error)); nothing was changed")
    }

    func journaled<T>(_ body: () throws -> T) throws(RPCError) -> T {
        do {
            return try body()
        } catch {
            logger.error("journal write failed: \(error)")
            throw RPCError(.ioError, "The journal could not be written (\(error)); nothing was changed")
        }
    }
}

// MARK: - Events

extension DaemonCore {
    /// Journals this row of a task with its events in one transaction (submitted to the journal's writer), then
    /// delivers the events live (each connection's `Outbox` holds them until that write is durable). Returns
    /// whether the row was submitted, and its `didComplete`'s sequence number (for a `notify` after it).
    @discardableResult
    func commit(_ record: TaskRecord, _ payloads: [EventPayload]) -> (submitted: Bool, completionSeq: Int64?) {
        guard let id = record.id else { return (false, nil) }
        let time = Timestamp.format(clock())
        let events = payloads.map { Event(seq: nil, session: record.session, task: id, time: time, payload: $0) }
        do {
            let stored = try writeRow(record, events: events.filter(\.payload.isJournaled), payloads: payloads)
            broadcast(stored + events.filter { !$0.payload.isJournaled })
            return (true, stored.last(where: \.payload.isDidComplete)?.seq)
        } catch {
            // Not even submitted: the state decides which events go out live and whether the row is written again.
            rowWriteFailed(.init(id: id, session: record.session, row: record, payloads: payloads, unsent: true),
                           error: error)
            return (false, nil)
        }
    }

    /// Submits a task's row (with these events) to the journal's writer, which writes it after everything
    /// submitted before; the events come back numbered, and whoever sends them or answers after this waits for
    /// its durability (`Outbox`). The row's durable ranges are the state's: checkpoints pass through it
    /// (`checkpointed`), so a row never carries older ranges than a checkpoint written before it. A write that
    /// fails is reported to the state (`rowWriteFailed`, with a finished task's row and `payloads`), which has it
    /// written again.
    func writeRow(_ record: TaskRecord, events: [Event], payloads: [EventPayload]) throws -> [Event] {
        guard let id = record.id else { throw JournalError.taskHasNoID }
        let submitted = DaemonState.RowWriteFailure(id: id, session: record.session, row: record, payloads: payloads,
                                                     lostEvents: events.count)
        return try journal.submitTaskUpdate(record, events: events) { [weak self] error in
            guard let error else { return }
            var failure = submitted
            failure.rowMissing = if case .unknownTask? = error as? JournalError { true } else { false }
            Task { [failure] in await self?.rowWriteFailed(failure, error: error) }
        }
    }

    /// A task's row or checkpoint the journal did not take, logged and fed to the state with whether the journal
    /// still takes writes.
    func rowWriteFailed(_ failure: DaemonState.RowWriteFailure, error: Error, what: String = "write") {
        logger.error("journal \(what) failed for task \(failure.id): \(error)", metadata: ["task": "\(failure.id)"])
        var failure = failure
        failure.journalTakesWrites = journal.takesWrites
        feedAndRun(.rowWriteFailed(failure))
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
        let held = subscribers.subscriptions(of: outbox.connectionID, besides: p.session)
        guard held < configuration.maxSubscriptionsPerConnection else {
            throw RPCError(.limitExceeded, "This connection already holds \(held) subscriptions (at most \(configuration.maxSubscriptionsPerConnection)); subscribe on another connection")
        }
        let after = max(0, p.after ?? 0)
        let result = EventsSubscribeResult(session: p.session, after: after, prunedThrough: s.record.ackedThrough)
        outbox.send(response: RPCResponse(id: requestID, result: (try? JSONValue(encoding: result)) ?? .null))
        let session = p.session
        let hold = outbox.holdEvents(of: session)
        subscribers.add(outbox, to: session)
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
            // Unregistered, unless a later subscription of this connection took over.
            if outbox.releaseEvents(of: session, after: cursor, hold: hold),
               subscribers.remove(outbox.connectionID, from: session) {
                subscribersChanged(session)
            }
            throw error
        }
        // The live events held meanwhile (those the replay did not send; `didBecomeInvalid` if the session ended).
        // (Replaced by a later subscription of this connection: that one finishes the replay.)
        guard outbox.releaseEvents(of: session, after: cursor, hold: hold) else { return }
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
        await settled() // a session that keeps nothing once acknowledged loses its finished tasks now
        let acked = state.sessions[p.session]?.record.ackedThrough ?? s.record.ackedThrough
        return EventsAckResult(ackedThrough: max(acked, p.through), pruned: pruned)
    }

    // MARK: - The users' agents

    /// `agent.register`: the caller's connection becomes its uid's agent (replacing another one, which is told
    /// `agent.replaced`); the answer goes first, then the launches that waited for an agent are sent.
    func registerAgent(caller: Caller, requestID: RPCID?, outbox: Outbox) {
        guard !outbox.isClosed else { return } // the connection closed before its request was served
        guard caller.uid != state.daemonUID else {
            let error = RPCError(.permissionDenied, "This daemon runs as uid \(caller.uid) and starts that user's launch "
                + "units in its own service manager itself: no agent is needed")
            outbox.send(response: RPCResponse(id: requestID, error: error))
            return
        }
        let replaced = services.agents.register(outbox, uid: caller.uid)
        let result = AgentRegisterResult(uid: caller.uid, replaced: replaced != nil)
        outbox.send(response: RPCResponse(id: requestID, result: (try? JSONValue(encoding: result)) ?? .null))
        logger.info("the user's agent registered", metadata: ["uid": "\(caller.uid)", "replaced": "\(replaced != nil)"])
        if let replaced {
            if let line = try? RPCNotification(method: AgentLaunch.replacedMethod, params: .object([:])).line() {
                replaced.send(line: line)
            }
            feedAndRun(.agentLeft(caller.uid)) // what the old one was starting or watching is asked of the new one
        }
        feedAndRun(.agentRegistered(caller.uid))
        for kept in services.agents.takePending(uid: caller.uid, now: clock()) { outbox.send(line: kept.line, seq: kept.seq) }
    }

    /// `notify`: the desktop notification of a task just journaled as finished (the state decided it and to whom),
    /// once: posted by the daemon itself for its own user (who has no agent) on its session bus, or `agent.notify`
    /// to the agent of the session's user. `seq`: the row's `didComplete`.
    func notify(_ notice: AgentNotice, to recipient: DaemonState.NoticeRecipient, seq: Int64?) {
        switch recipient {
        case .daemonsOwnUser:
            // Posted once the row is durable, as an event is sent (`Outbox`), and never for a write that failed.
            let poster = services.notifications, durability = journal.durability
            durability.whenDurable(durability.lastCommit) {
                if let seq, durability.isWithdrawn(seq) { return }
                poster.received(notice)
            }
        case .agent(let uid):
            guard let line = try? RPCNotification(method: AgentNotice.method, params: JSONValue(encoding: notice)).line() else { return }
            services.agents.notify(uid: uid, line: line, seq: seq, now: clock())
        }
    }

    /// `agent.started` / `agent.ended`: a report of the caller's agent about one of its user's sessions.
    func agentReport(session identifier: String, caller: Caller, connectionID: UInt64,
                     _ input: DaemonState.Input) throws(RPCError) -> AgentReportResult {
        guard services.agents.isAgent(connectionID: connectionID, uid: caller.uid) else {
            throw RPCError(.permissionDenied, "Only the registered agent of uid \(caller.uid) reports its launches "
                + "(call agent.register on this connection first)")
        }
        guard let s = state.sessions[identifier], s.record.uid == caller.uid else {
            throw RPCError(.unknownSession, "No session '\(SessionNames.presented(identifier, to: caller.uid))'")
        }
        guard state.launchUnit(of: s.record.identifier) != nil else {
            throw RPCError.invalidParams("The session has no launch unit")
        }
        feedAndRun(input)
        return AgentReportResult()
    }

    /// Whether a connection whose client has sent its last request (it shut its write side) stays open once every
    /// request is answered: it is subscribed to a session's events, or it is a user's agent, so it still reads.
    func keepsOpenAfterLastRequest(_ connectionID: UInt64) -> Bool {
        subscribers.subscriptions(of: connectionID, besides: "") > 0 || services.agents.isAgent(connectionID: connectionID)
    }

    func connectionClosed(_ connectionID: UInt64) {
        if let uid = services.agents.remove(connectionID: connectionID) {
            logger.info("the user's agent left", metadata: ["uid": "\(uid)"])
            feedAndRun(.agentLeft(uid))
        }
        for session in subscribers.removeConnection(connectionID) {
            subscribersChanged(session) // the last one leaving may start the session's unit
        }
    }
}
