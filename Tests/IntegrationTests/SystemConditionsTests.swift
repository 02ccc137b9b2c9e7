// The network and power conditions the daemon reads over sd-bus, from a fake NetworkManager and UPower on a
// private D-Bus (Tests/Fixtures/fake-system-bus.py).
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import Testing

/// A private `dbus-daemon` and, optionally, the fake services on it; stopped and removed by `stop()`.
final class PrivateSystemBus {
    let dir: TempDir
    let address: String
    let control: String
    private let bus: Process
    private var fake: Process?

    init() throws {
        dir = try TempDir()
        control = dir.path + "/control"
        bus = Process()
        bus.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        bus.arguments = ["--session", "--nofork", "--nopidfile", "--print-address=1",
                         "--address=unix:path=\(dir.path)/bus"]
        let out = Pipe()
        bus.standardOutput = out
        try bus.run()
        let line = try Self.readLine(out.fileHandleForReading)
        guard line.hasPrefix("unix:") else { throw TestFailure("dbus-daemon printed '\(line)'") }
        address = line
    }

    /// Starts the fake NetworkManager (and UPower unless `upower` is false) and waits until they are on the bus.
    func startFake(upower: Bool = true) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/fake-system-bus.py").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = [script, address, control] + (upower ? [] : ["--no-upower"])
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        fake = p
        let line = try Self.readLine(out.fileHandleForReading)
        guard line == "ready" else { throw TestFailure("the fake services printed '\(line)'") }
    }

    /// Sets the fake services' properties ("Metered=1", "OnBattery=true", …; "quit" ends them).
    func set(_ lines: String...) throws {
        try lines.joined(separator: "\n").write(toFile: control, atomically: true, encoding: .utf8)
    }

    /// Stops the fake services (they leave the bus, as a crashed NetworkManager would). SIGKILL: processes
    /// started by the test runner inherit its blocked signals, SIGTERM among them.
    func stopFake() {
        guard let p = fake else { return }
        fake = nil
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }

    func stop() {
        stopFake()
        kill(bus.processIdentifier, SIGKILL)
        bus.waitUntilExit()
        dir.remove()
    }

    private static func readLine(_ handle: FileHandle) throws -> String {
        var bytes: [UInt8] = []
        while true {
            let chunk = handle.readData(ofLength: 1)
            guard let byte = chunk.first else { break }
            if byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

@Suite("Network and power conditions", .serialized)
struct SystemConditionsTests {
    /// `daemon.status` follows NetworkManager's `Metered`, `Connectivity` and `State` and UPower's `OnBattery`
    /// as they change (their `PropertiesChanged` signals), and falls back to the assumptions when the services
    /// leave the bus.
    @Test func statusFollowsNetworkManagerAndUPower() async throws {
        let bus = try PrivateSystemBus()
        defer { bus.stop() }
        try bus.startFake()
        let daemon = try DaemonProcess(start: false)
        defer { daemon.kill9(); daemon.dir.remove() }
        daemon.environment = ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]
        try daemon.start()
        let client = try daemon.client()
        func conditions(_ expected: SystemConditions, _ what: String) throws {
            try eventually(what, timeout: 10) { try client.status().conditions == expected ? true : nil }
        }
        try conditions(SystemConditions(metered: false, online: true, onBattery: false, source: "networkmanager+upower"),
                       "the conditions at start")
        try bus.set("Metered=1")
        try conditions(SystemConditions(metered: true, online: true, onBattery: false, source: "networkmanager+upower"),
                       "metered")
        try bus.set("Metered=3", "Connectivity=1")
        try conditions(SystemConditions(metered: true, online: false, onBattery: false, source: "networkmanager+upower"),
                       "offline")
        try bus.set("Metered=2", "Connectivity=4", "State=20", "OnBattery=true")
        try conditions(SystemConditions(metered: false, online: false, onBattery: true, source: "networkmanager+upower"),
                       "disconnected, on battery")
        try bus.set("State=70", "OnBattery=false")
        try conditions(SystemConditions(metered: false, online: true, onBattery: false, source: "networkmanager+upower"),
                       "connected, on power")
        bus.stopFake()
        try conditions(.assumed, "the services gone")
        let status = try ctl(["--json", "status"], socket: daemon.socketPath)
        #expect(status.stdout.contains(#""conditions":{"metered":false,"onBattery":false,"online":true,"source":"none"}"#),
                "\(status.stdout)")
    }

    /// A system bus without NetworkManager or UPower (a server with systemd-networkd): unmetered, online, on
    /// power; UPower alone is read on its own.
    @Test func withoutTheServicesEverythingIsAssumed() async throws {
        let bus = try PrivateSystemBus()
        defer { bus.stop() }
        let daemon = try DaemonProcess(start: false)
        defer { daemon.kill9(); daemon.dir.remove() }
        daemon.environment = ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]
        try daemon.start()
        let client = try daemon.client()
        try eventually("the assumed conditions", timeout: 10) { try client.status().conditions == .assumed ? true : nil }
        try bus.startFake(upower: false)
        try bus.set("Metered=1")
        try eventually("NetworkManager alone", timeout: 10) {
            try client.status().conditions == SystemConditions(metered: true, online: true, onBattery: false,
                                                               source: "networkmanager") ? true : nil
        }
    }
}
