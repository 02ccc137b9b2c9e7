// Network and power conditions from the system bus: NetworkManager's Metered/Connectivity/State, UPower's OnBattery.
import CSystemBus
import Foundation
import HalfTunesProtocol
import Logging
import NIOConcurrencyHelpers

/// Watches NetworkManager and UPower over sd-bus on a thread of its own (`sd_bus_open_system`, so
/// `DBUS_SYSTEM_BUS_ADDRESS` gives tests a private bus). It reads their properties at start, after every
/// `PropertiesChanged` or `NameOwnerChanged` signal, and at least once a second, and reports each change of
/// `SystemConditions` (at once the first time). A service that is not on the bus counts as its assumption
/// (unmetered and online, on power); no system bus at all, the same, reported once.
final class SystemConditionsMonitor: Sendable {
    private let logger: Logger
    /// Each change with its serial number (1, 2, …): the receiver keeps the highest, whatever order the
    /// reports reach it in.
    private let onChange: @Sendable (SystemConditions, Int) -> Void
    private let stopped = NIOLockedValueBox(false)
    private let finished = DispatchSemaphore(value: 0)
    private let started = NIOLockedValueBox(false)
    /// The last report, and a signal at the first one (`firstReport`).
    private let latestReport = NIOLockedValueBox<(SystemConditions, Int)?>(nil)
    private let reported = DispatchSemaphore(value: 0)

    init(logger: Logger, onChange: @escaping @Sendable (SystemConditions, Int) -> Void) {
        self.logger = logger
        self.onChange = onChange
    }

    func start() {
        started.withLockedValue { $0 = true }
        let thread = Thread { [self] in
            self.run()
            self.finished.signal()
        }
        thread.name = "halftunesd.conditions"
        thread.start()
    }

    /// Stops watching; returns once the thread has ended (within about a second), without blocking a
    /// cooperative thread meanwhile.
    func stop() async {
        stopped.withLockedValue { $0 = true }
        guard started.withLockedValue({ $0 }) else { return }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.finished.wait()
                done.resume()
            }
        }
    }

    private var isStopped: Bool { stopped.withLockedValue { $0 } }

    /// The last report with its serial (nil before the first).
    var latest: (SystemConditions, Int)? { latestReport.withLockedValue { $0 } }

    /// Waits for the first report (at most `timeout` seconds: the bus answers within milliseconds, or the
    /// monitor reports that there is none), without blocking a cooperative thread; nil if none came in time.
    func firstReport(timeout: Double) async -> (SystemConditions, Int)? {
        guard started.withLockedValue({ $0 }) else { return nil }
        return await withCheckedContinuation { (done: CheckedContinuation<(SystemConditions, Int)?, Never>) in
            DispatchQueue.global().async {
                if self.reported.wait(timeout: .now() + timeout) == .success { self.reported.signal() }
                done.resume(returning: self.latest)
            }
        }
    }

    private func report(_ conditions: SystemConditions, serial: Int) {
        let first = latestReport.withLockedValue { value in
            defer { value = (conditions, serial) }
            return value == nil
        }
        if first { reported.signal() }
        onChange(conditions, serial)
    }

    private func run() {
        var error: Int32 = 0
        guard let bus = htd_bus_open_system(&error) else {
            logger.notice("no system bus: the network counts as unmetered and online, the machine as on power",
                          metadata: ["error": "\(String(cString: strerror(-error)))"])
            report(.assumed, serial: 1)
            return
        }
        defer { htd_bus_close(bus) }
        let watched = htd_bus_watch(bus)
        if watched < 0 {
            logger.warning("cannot watch the system bus for changes; reading it once a second",
                           metadata: ["error": "\(String(cString: strerror(-watched)))"])
        }
        var last: SystemConditions?
        var serial = 0
        while !isStopped {
            let now = Self.read(bus)
            if now != last {
                logger.notice("network and power conditions", metadata: [
                    "metered": "\(now.metered)", "online": "\(now.online)", "onBattery": "\(now.onBattery)",
                    "source": "\(now.source)",
                ])
                serial += 1
                report(now, serial: serial)
                last = now
            }
            if htd_bus_step(bus, 1_000_000) < 0 {
                Thread.sleep(forTimeInterval: 1) // the bus went away: keep the last conditions, try again
            }
        }
    }

    private static let nm = ("org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager",
                             "org.freedesktop.NetworkManager")
    private static let upower = ("org.freedesktop.UPower", "/org/freedesktop/UPower", "org.freedesktop.UPower")

    /// The conditions as the bus tells them now.
    static func read(_ bus: OpaquePointer) -> SystemConditions {
        func u32(_ member: String) -> UInt32? {
            var value: UInt32 = 0
            var missing: Int32 = 0
            return htd_bus_get_u32(bus, nm.0, nm.1, nm.2, member, &value, &missing) == 0 ? value : nil
        }
        var battery: Int32 = 0
        var missing: Int32 = 0
        let onBattery = htd_bus_get_bool(bus, upower.0, upower.1, upower.2, "OnBattery", &battery, &missing) == 0
            ? battery != 0 : nil
        return SystemConditions.from(metered: u32("Metered"), connectivity: u32("Connectivity"), state: u32("State"),
                                     onBattery: onBattery)
    }
}
