// Starts and watches systemd units over sd-bus (a session's launchUnit): the daemon's for its own user, the agent's for
// the users of the system daemon.
import CSystemBus
import Foundation
import Synchronization

/// Talks to the daemon's own service manager: the user manager through `$XDG_RUNTIME_DIR/systemd/private`
/// (as systemctl does; no user bus needed), else the user bus; root without a runtime directory, the system
/// manager's `/run/systemd/private`. Every call runs on one serial queue (sd-bus connections are not
/// thread-safe); the connection is opened when first needed and again after it broke.
/// `@unchecked`: its one mutable property, `bus`, is read and written only on `queue`.
public final class UnitLauncher: @unchecked Sendable {
    private let queue = DispatchQueue(label: "halftunesd.launcher")
    private var bus: OpaquePointer?
    private let privateSocket: String?
    private let closed = Mutex(false)
    /// How often a started unit is looked at until it ends.
    public static let pollInterval = 0.25

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            privateSocket = runtime + "/systemd/private"
        } else if geteuid() == 0 {
            privateSocket = "/run/systemd/private"
        } else {
            privateSocket = nil
        }
    }

    /// Asks for `unit` to start (`StartUnit`, mode `replace`); `done` gets nil, or why not.
    public func start(_ unit: String, done: @escaping @Sendable (String?) -> Void) {
        queue.async {
            guard !self.isClosed else { return }
            guard let bus = self.connect() else {
                return done("cannot reach the service manager (\(self.privateSocket ?? "no XDG_RUNTIME_DIR") or the user bus)")
            }
            var message = [CChar](repeating: 0, count: 512)
            let r = htd_bus_start_unit(bus, unit, &message, message.count)
            if r < 0 {
                if r == -ENOTCONN || r == -ECONNRESET || r == -EPIPE { self.disconnect() }
                return done(String(nulTerminated: message))
            }
            done(nil)
        }
    }

    /// Looks at `unit` every `pollInterval` until it is inactive or failed with no job pending, then gives its
    /// service `Result` and main exit status ("unreachable" when the manager stayed out of reach for 10 s).
    public func watch(_ unit: String, ended: @escaping @Sendable (_ result: String, _ exitStatus: Int32) -> Void) {
        poll(unit, errors: 0, ended: ended)
    }

    private func poll(_ unit: String, errors: Int, ended: @escaping @Sendable (String, Int32) -> Void) {
        queue.asyncAfter(deadline: .now() + Self.pollInterval) {
            guard !self.isClosed else { return }
            guard let status = self.status(unit) else {
                if errors >= Int(10 / Self.pollInterval) { return ended("unreachable", -1) }
                return self.poll(unit, errors: errors + 1, ended: ended)
            }
            if status.job == 0, status.activeState == "inactive" || status.activeState == "failed" {
                return ended(status.result, status.exitStatus)
            }
            self.poll(unit, errors: 0, ended: ended)
        }
    }

    /// Stops every watch and closes the connection (at shutdown).
    public func close() {
        closed.withLock { $0 = true }
        queue.sync { disconnect() }
    }

    private var isClosed: Bool { closed.withLock { $0 } }

    private func status(_ unit: String) -> (activeState: String, result: String, job: UInt32, exitStatus: Int32)? {
        guard let bus = connect() else { return nil }
        var active = [CChar](repeating: 0, count: 64), result = [CChar](repeating: 0, count: 64)
        var message = [CChar](repeating: 0, count: 256)
        var job: UInt32 = 0
        var exitStatus: Int32 = 0
        let r = htd_bus_unit_status(bus, unit, &active, &result, 64, &job, &exitStatus, &message, message.count)
        guard r >= 0 else {
            disconnect()
            return nil
        }
        return (String(nulTerminated: active), String(nulTerminated: result), job, exitStatus)
    }

    private func connect() -> OpaquePointer? {
        if let bus { return bus }
        var error: Int32 = 0
        bus = htd_bus_open_manager(privateSocket, &error)
        return bus
    }

    private func disconnect() {
        if let bus { htd_bus_close(bus) }
        bus = nil
    }
}

extension String {
    /// The text of a C buffer up to its first NUL (all of it without one).
    init(nulTerminated chars: [CChar]) {
        self.init(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
