// Carries out `AgentNotifications` on a queue of its own: posts over the session bus, polls the invoked actions.
import Foundation
import HalfTunesProtocol

/// Takes notices from any thread; the machine and the bus connection live on `queue`. A timer runs while something
/// waits to be posted (every 0.25 s) and, once something was posted, polls the actions the user invokes (every
/// 0.5 s). A notification that cannot be posted is dropped and logged (once until one succeeds): posting it later
/// would tell of a download long after the fact.
/// `@unchecked`: its mutable state is touched only on `queue`.
public final class NotificationPoster: @unchecked Sendable {
    private let queue = DispatchQueue(label: "halftunes.notifications")
    private var machine: AgentNotifications
    private var notifier: DesktopNotifier?
    private var timer: DispatchSourceTimer?
    private var timerInterval = 0.0
    private var hasPosted = false
    private var failureLogged = false
    private let log: @Sendable (String) -> Void
    private let opener: @Sendable (String) -> Void

    /// `opener` opens a file for the "Open" action (default: `xdg-open` on PATH).
    public init(appName: String = "halftunesd", window: Double = 2, log: @escaping @Sendable (String) -> Void,
                opener: @escaping @Sendable (String) -> Void = NotificationPoster.xdgOpen) {
        machine = AgentNotifications(window: window)
        notifier = DesktopNotifier(appName: appName)
        self.log = log
        self.opener = opener
    }

    public func received(_ notice: AgentNotice) {
        queue.async {
            guard self.notifier != nil else { return } // closed
            self.carryOut(self.machine.received(notice, now: Self.now()))
            self.schedule()
        }
    }

    /// Stops the timer and closes the bus connection (what waits is not posted).
    public func close() {
        queue.sync {
            timer?.cancel()
            timer = nil
            notifier = nil
        }
    }

    private func schedule() {
        guard notifier != nil else { return }
        let interval = machine.isWaiting ? 0.25 : (hasPosted ? 0.5 : 0)
        guard interval != timerInterval else { return }
        timer?.cancel()
        timer = nil
        timerInterval = interval
        guard interval > 0 else { return }
        let t = DispatchSource.makeTimerSource(queue: queue)
        t.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(50))
        t.setEventHandler { [weak self] in self?.fired() }
        t.resume()
        timer = t
    }

    private func fired() {
        carryOut(machine.tick(now: Self.now()))
        for (id, key) in notifier?.invokedActions() ?? [] { carryOut(machine.invoked(id: id, key: key)) }
        schedule()
    }

    private func carryOut(_ effects: [AgentNotifications.Effect]) {
        guard let notifier else { return }
        for effect in effects {
            switch effect {
            case .post(let post):
                switch notifier.post(summary: post.summary, body: post.body, actions: post.actions.map { ($0.key, $0.label) },
                                     category: post.category) {
                case .success(let id):
                    machine.posted(post, id: id)
                    hasPosted = true
                    failureLogged = false
                case .failure(let error):
                    if !failureLogged { log("cannot post a desktop notification (\(post.summary)): \(error)") }
                    failureLogged = true
                }
            case .open(let path):
                opener(path)
            case .showInFolder(let path):
                if let error = notifier.showInFolder(path) { log("the file manager cannot show \(path): \(error)") }
            }
        }
    }

    /// Runs `xdg-open path` (found on PATH) without waiting for it.
    public static let xdgOpen: @Sendable (String) -> Void = { path in
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["xdg-open", path]
        p.standardInput = FileHandle.nullDevice
        try? p.run()
    }

    private static func now() -> Double { ProcessInfo.processInfo.systemUptime }
}
