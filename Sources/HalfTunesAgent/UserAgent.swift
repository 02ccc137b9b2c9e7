// The user's agent (`halftunesctl agent`): starts the system daemon's launch units in the user's own service manager.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import HalfTunesSystemd
import Synchronization

/// Connects to the system daemon's socket as its user, registers as that uid's agent (`agent.register`), and
/// carries out `agent.launch` requests with `UnitLauncher` in the user's own manager, reporting `agent.started`
/// and `agent.ended` on the same connection. Decides nothing itself (`AgentLaunches` keeps which report answers
/// which request). Reconnects when the daemon goes away, after 1 s doubling to 30 s; the daemon asks again for
/// what is still due when the agent registers again.
///
/// One thread runs the loop: it waits for the next notification at most `UnitLauncher.pollInterval`, then
/// hands the launcher's answers (which arrive on the launcher's queue) to the machine and carries out its actions.
public final class UserAgent: @unchecked Sendable {
    /// Why `run()` returned (it returns only for good).
    public enum Stop: Equatable, Sendable {
        /// Another agent of this user registered (`agent.replaced`).
        case replaced
        /// The daemon will not have this user's agent (its own uid, which it starts units for itself): trying
        /// again would not help.
        case refused(String)
    }

    public let socketPath: String
    private let launcher: UnitLauncher
    private let log: @Sendable (String) -> Void
    private let firstDelay: Double
    private let maxDelay: Double
    /// What the launcher answered, waiting for the loop.
    private let answers = Mutex<[AgentLaunches.Event]>([])
    private var launches = AgentLaunches()
    private let notifications: NotificationPoster

    public init(socketPath: String, launcher: UnitLauncher = UnitLauncher(), firstDelay: Double = 1, maxDelay: Double = 30,
                log: @escaping @Sendable (String) -> Void) {
        self.socketPath = socketPath
        self.launcher = launcher
        self.notifications = NotificationPoster(log: log)
        self.firstDelay = firstDelay
        self.maxDelay = maxDelay
        self.log = log
    }

    /// Runs until replaced or refused.
    public func run() -> Stop {
        var delay = firstDelay
        var reported = false
        while true {
            let connection: HalfTunesConnection
            do {
                connection = try HalfTunesConnection(socketPath: socketPath, callTimeout: 30)
                let registered = try connection.call(.agentRegister, as: AgentRegisterResult.self)
                log("registered with halftunesd (\(socketPath)) as the agent of uid \(registered.uid)"
                    + (registered.replaced ? ", replacing an earlier agent" : ""))
                reported = false
                _ = launches.handle(.connected)
                let since = Date()
                if serve(connection) == .replaced {
                    connection.close()
                    return .replaced
                }
                connection.close()
                log("halftunesd closed the connection; connecting again")
                // A daemon that keeps dropping the agent at once is not asked again every second.
                if Date().timeIntervalSince(since) >= maxDelay { delay = firstDelay }
            } catch let error as HalfTunesClientError {
                if let refusal = Self.refusal(error) { return .refused(refusal) }
                if !reported { log("cannot reach halftunesd at \(socketPath); trying again, at most every \(Int(maxDelay)) s: \(error)") }
                reported = true
            } catch {
                if !reported { log("cannot reach halftunesd at \(socketPath): \(error)") }
                reported = true
            }
            waitServingUnits(delay)
            delay = min(delay * 2, maxDelay)
        }
    }

    /// Errors that trying again would not change. (A socket this user may not open is tried again: a daemon
    /// started by hand may set its socket's mode after creating it; the unit starts only for the socket's group.)
    static func refusal(_ error: HalfTunesClientError) -> String? {
        if case .rpc(let rpc) = error, rpc.knownCode == .permissionDenied { return rpc.message }
        return nil
    }

    private enum Served: Equatable { case closed, replaced }

    private func serve(_ connection: HalfTunesConnection) -> Served {
        do {
            while true {
                try takeAnswers(connection)
                switch try connection.nextNotification(timeout: UnitLauncher.pollInterval) {
                case .timedOut:
                    continue
                case .closed:
                    return .closed
                case .notification(let note) where note.method == AgentLaunch.replacedMethod:
                    log("another agent of this user registered with halftunesd; this one stops")
                    return .replaced
                case .notification(let note) where note.method == AgentLaunch.method:
                    guard let launch = try? note.params.decode(AgentLaunch.self) else {
                        log("ignoring a malformed \(AgentLaunch.method): \(String(decoding: (try? JSONWriter.write(note.params)) ?? [], as: UTF8.self))")
                        continue
                    }
                    log("starting \(launch.unit) for session \(launch.session)")
                    try takeAnswers(connection) // a unit that ended meanwhile is not joined
                    try carryOut(launches.handle(.asked(session: launch.session, unit: launch.unit)), on: connection)
                case .notification(let note) where note.method == AgentNotice.method:
                    guard let notice = try? note.params.decode(AgentNotice.self) else {
                        log("ignoring a malformed \(AgentNotice.method)")
                        continue
                    }
                    notifications.received(notice)
                case .notification:
                    continue
                }
            }
        } catch let error as HalfTunesClientError where error == .connectionClosed {
            return .closed
        } catch {
            log("the connection to halftunesd failed: \(error)")
            return .closed
        }
    }

    /// Hands what the launcher answered to the machine and carries out its actions (reports only when connected).
    /// Every answer reaches the machine first, so a report that fails loses no answer.
    private func takeAnswers(_ connection: HalfTunesConnection?) throws {
        let events = answers.withLock { q in defer { q.removeAll() }; return q }
        try carryOut(events.flatMap { launches.handle($0) }, on: connection)
    }

    /// Carries out every action; once a report fails, the later reports are not sent (the connection is gone) but
    /// starts and watches still happen, and the failure is thrown at the end.
    private func carryOut(_ actions: [AgentLaunches.Action], on connection: HalfTunesConnection?) throws {
        var connection = connection
        var failure: Error?
        for action in actions {
            do {
                try carryOut(action, on: connection)
            } catch {
                failure = failure ?? error
                connection = nil
            }
        }
        if let failure { throw failure }
    }

    private func carryOut(_ action: AgentLaunches.Action, on connection: HalfTunesConnection?) throws {
        switch action {
        case .start(let unit):
            launcher.start(unit) { error in
                self.answers.withLock { $0.append(.startAnswered(unit: unit, error: error)) }
            }
        case .watch(let unit):
            launcher.watch(unit) { result, status in
                self.answers.withLock { $0.append(.ended(unit: unit, result: result, exitStatus: status)) }
            }
        case let .reportStarted(session, unit, error):
            if let error { log("\(unit) did not start: \(error)") }
            try report(.agentStarted, AgentStartedParams(session: session, unit: unit, error: error), on: connection)
        case let .reportEnded(session, unit, result, exitStatus):
            log("\(unit) ended: \(result), exit status \(exitStatus)")
            try report(.agentEnded, AgentEndedParams(session: session, unit: unit, result: result, exitStatus: exitStatus),
                       on: connection)
        }
    }

    /// A report the daemon refuses (a stale one, say) is logged; a broken connection ends `serve`.
    private func report<P: Encodable>(_ method: RPCMethod, _ params: P, on connection: HalfTunesConnection?) throws {
        guard let connection else { return }
        do {
            _ = try connection.call(method, params, as: AgentReportResult.self)
        } catch HalfTunesClientError.rpc(let rpc) {
            log("halftunesd refused \(method.rawValue): \(rpc.message)")
        }
    }

    /// Sleeps `seconds` between connection attempts while still taking the launcher's answers (a unit that ends
    /// meanwhile leaves the machine, so a later request starts it again).
    private func waitServingUnits(_ seconds: Double) {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            Thread.sleep(forTimeInterval: min(UnitLauncher.pollInterval, max(0, deadline.timeIntervalSinceNow)))
            try? takeAnswers(nil) // the connection that asked is gone: starts and watches go on, reports are not sent
        }
    }
}
