// NetworkManager's and UPower's values as the conditions the daemon reports.
import HalfTunesProtocol
import Testing

@Suite struct SystemConditionsMappingTests {
    @Test func networkManagerAndUPowerValues() {
        typealias C = SystemConditions
        #expect(C.from(metered: nil, connectivity: nil, state: nil, onBattery: nil) == .assumed)
        // NMMetered: 0 unknown, 1 yes, 2 no, 3 guess-yes, 4 guess-no.
        for (value, metered) in [(0, false), (1, true), (2, false), (3, true), (4, false)] as [(UInt32, Bool)] {
            #expect(C.from(metered: value, connectivity: 4, state: 70, onBattery: nil).metered == metered, "Metered \(value)")
        }
        // NMConnectivityState: 0 unknown (online), 1 none, 2 portal (offline), 3 limited (online: a network without
        // the internet still reaches local servers), 4 full.
        for (value, online) in [(0, true), (1, false), (2, false), (3, true), (4, true)] as [(UInt32, Bool)] {
            #expect(C.from(metered: 2, connectivity: value, state: 70, onBattery: nil).online == online, "Connectivity \(value)")
        }
        // NMState: 0 unknown, 10 asleep, 20 disconnected, 30 disconnecting, 40 connecting (offline); 50+ connected.
        for (value, online) in [(0, true), (10, false), (20, false), (30, false), (40, false), (50, true), (70, true)]
            as [(UInt32, Bool)] {
            #expect(C.from(metered: 2, connectivity: nil, state: value, onBattery: nil).online == online, "State \(value)")
        }
        #expect(C.from(metered: 2, connectivity: 4, state: 70, onBattery: true)
            == C(metered: false, online: true, onBattery: true, source: "networkmanager+upower"))
        #expect(C.from(metered: nil, connectivity: nil, state: nil, onBattery: false).source == "upower")
    }
}
