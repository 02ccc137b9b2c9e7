import Foundation
import HalfTunesEngine
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
        let config = try resolve(p.configuration, owner: owner, stored: state.sessions[id]?.record.configuration)
        if let unit = config.launchUnit, UnitName.resolve(unit, session: name).utf8.count > UnitName.maxLength {
            throw RPCError.invalidParams("configuration.launchUnit: '\(unit)' with this session's escaped identifier as its "
                + "instance is longer than \(UnitName.maxLength) bytes; use a shorter identifier or a unit that is not a template")
        }
        if var existing = state.sessions[id] {
            guard existing.record.state == .active else {
                throw RPCError(.sessionInvalidated,
                               "Session '\(id)' is being invalidated; its identifier can be reused once its tasks end")
            }
            if p.configuration != nil, config != existing.record.configuration {
                existing.record.configuration = config
                let record = existing.record
                try await journaling { try $0.upsertSession(record) }
                // Written in submission order: the state takes the configuration last written.
                if state.sessions[id]?.record.state == .active { feedAndRun(.sessionConfigured(id, config)) }
                existing = state.sessions[id] ?? existing // a new launch unit may have started at once
            }
            return SessionOpenResult(session: sessionInfo(existing), reattached: true)
        }
        try checkCapsForNewSession(owner: owner)
        let record = SessionRecord(identifier: id, uid: owner, configuration: config, state: .active, createdAt: clock())
        // A session not in the state has no row (the state holds every journaled session), nor events.
        let s = ManagedSession(record: record, lastEventSeq: 0, pendingEvents: 0)
        feedAndRun(.sessionOpened(s))
        do throws(RPCError) {
            try await journaling { try $0.upsertSession(record) }
        } catch {
            // Whatever was created in it meanwhile was submitted after the row and fails with it.
            if state.sessions[id]?.record.createdAt == record.createdAt { feedAndRun(.sessionRemoved(id)) }
            throw error
        }
        logger.info("session opened", metadata: ["session": "\(id)"])
        return SessionOpenResult(session: sessionInfo(state.sessions[id] ?? s), reattached: false)
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
    func resolve(_ c: SessionConfiguration?, owner: UInt32, stored: SessionConfiguration? = nil) throws(RPCError)
        -> SessionConfiguration
    {
        var config = c ?? SessionConfiguration()
        config.proxy = try SessionProxy.resolve(config.proxy, stored: stored?.proxy)
        config.proxyBypass = try SessionProxy.resolveBypass(config.proxyBypass)
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
        if let max = config.maxConcurrent, !Self.limitRange.contains(max) {
            throw RPCError.invalidParams("configuration.maxConcurrent must be from 1 to \(Self.limitRange.upperBound) (got \(max))")
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
        if let keep = config.finishedTaskRetention,
           !(keep.isFinite && keep >= 0 && keep <= SessionConfiguration.maxFinishedTaskRetention) {
            throw RPCError.invalidParams("configuration.finishedTaskRetention must be a number of seconds from 0 (delete "
                + "a finished task as soon as its events are acknowledged) to \(Int(SessionConfiguration.maxFinishedTaskRetention)) (got \(keep))")
        }
        config.finishedTaskRetention = config.finishedTaskRetention ?? SessionConfiguration.defaultFinishedTaskRetention
        if config.launchUnit?.isEmpty == true { config.launchUnit = nil }
        if let unit = config.launchUnit {
            if let problem = UnitName.problem(unit) { throw RPCError.invalidParams(problem) }
            // Only the daemon's own service manager is reached: another user's unit would run in it, as the
            // daemon's user (docs/security.md says why system mode has no route to the users' managers).
            guard owner == geteuid() else {
                throw RPCError(.permissionDenied, "configuration.launchUnit: this daemon runs as uid \(geteuid()) and can start "
                    + "units only in its own service manager, not in uid \(owner)'s; run a user daemon (systemctl --user "
                    + "enable --now halftunesd.socket) for sessions that relaunch their client (see docs/security.md)")
            }
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
        SessionListResult(sessions: state.sessions.values.filter { caller.mayAccess(owner: $0.record.uid) }
            .sorted { $0.record.identifier < $1.record.identifier }.map(sessionInfo))
    }

    func invalidateSession(_ p: SessionInvalidateParams, caller: Caller) async throws(RPCError) -> SessionInvalidateResult {
        _ = try session(p.identifier, for: caller)
        // finishTasksAndInvalidate (no cancelTasks): pending tasks finish; suspended ones would never end, so
        // they are canceled. The session's new state is journaled before anything may delete it.
        let actions = feed(.sessionInvalidating(p.identifier, cancelTasks: p.cancelTasks == true))
        // Submitted, not awaited: written before anything the actions submit (the deletion included).
        if let s = state.sessions[p.identifier] {
            let record = s.record
            journal.submitting { try $0.upsertSession(record) }
        }
        run(actions)
        let remaining = state.tasks.unfinished(session: p.identifier)
        return SessionInvalidateResult(invalidated: remaining == 0, remainingTasks: remaining)
    }

    /// Deletes an invalidated session the state says is done (`finishInvalidation`): its resume data, its journal
    /// rows, then the state forgets it and its subscribers are told. A journal that cannot be written leaves it
    /// invalidating (retried at the next start).
    func finishInvalidation(_ identifier: String) {
        guard state.sessions[identifier]?.record.state == .invalidating else { return } // already done
        // Unreadable tokens: the session stays (its tokens' partials and count with it) until the next start.
        guard let tokens = try? journal.resumeTokens(session: identifier) else { return }
        for token in tokens {
            discardPartial(token.partialPath)
        }
        guard (try? journaled({ try journal.deleteSession(identifier) })) != nil else { return }
        if let uid = state.sessions[identifier]?.record.uid, !tokens.isEmpty { // deleted with the session
            feedAndRun(.resumeDataChanged(uid: uid, kept: -tokens.count, inFlight: 0))
        }
        feedAndRun(.sessionRemoved(identifier)) // with its tasks and unacknowledged events
        let event = Event(seq: nil, session: identifier, task: nil, time: Timestamp.format(clock()), payload: .didBecomeInvalid)
        for outbox in (subscribers[identifier] ?? [:]).values { outbox.send(notification: event) }
        subscribers[identifier] = nil
        logger.info("session invalidated", metadata: ["session": "\(identifier)"])
    }

    /// Runs a journal write, turning its failure into an actionable RPC error.
    /// The journal's waited writes and reads in `operation`, run in their turn on the journal's thread: the core
    /// awaits them without blocking a thread, and serves other calls meanwhile (`Journal.writing`).
    func journaling<T: Sendable>(_ operation: @escaping @Sendable (Journal) throws -> T) async throws(RPCError) -> T {
        do {
            return try await journal.writing(operation)
        } catch {
            logger.error("journal write failed: \(error)")
            throw RPCError(.ioError, "The journal could not be written (\(error)); nothing was changed")
        }
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
