// ReservationPlan and FreeSpaceFloor: what a download reserves and the free space it leaves (no I/O).
import HalfTunesCore
import HalfTunesEngine
import HalfTunesProtocol
import Testing

@Suite struct DiskSpaceTests {
    let MiB: Int64 = 1 << 20

    @Test func aClaimNeverSizesTheReservation() {
        var plan = ReservationPlan(limit: 20 << 30)
        #expect(plan.wrote(upTo: 0) == 0..<(64 * MiB))
        // Nothing more until less than the refill is left ahead of the written end.
        #expect(plan.wrote(upTo: 1024) == nil)
        #expect(plan.wrote(upTo: 32 * MiB) == nil)
        #expect(plan.wrote(upTo: 33 * MiB) == (33 * MiB)..<(97 * MiB))
        #expect(plan.reserved == ByteRanges([0..<(97 * MiB)]))
        // Segments elsewhere get their own window.
        #expect(plan.wrote(upTo: 500 * MiB) == (500 * MiB)..<(564 * MiB))
    }

    @Test func theClaimedEndAndSmallRemaindersBoundIt() {
        var plan = ReservationPlan(limit: 10 * MiB)
        #expect(plan.wrote(upTo: 0) == 0..<(10 * MiB))
        #expect(plan.wrote(upTo: 10 * MiB) == nil)
        var small = ReservationPlan(limit: 512 << 10)
        #expect(small.wrote(upTo: 0) == nil, "less than a MiB is not worth reserving")
        var unknown = ReservationPlan(limit: nil)
        #expect(unknown.wrote(upTo: 0) == nil, "an unknown length reserves nothing")
    }

    @Test func whatWasReservedAndNotWrittenIsGivenBack() {
        var plan = ReservationPlan(limit: 1 << 40)
        _ = plan.wrote(upTo: 0)
        _ = plan.wrote(upTo: 200 * MiB)
        let written = ByteRanges([0..<(5 * MiB), (200 * MiB)..<(201 * MiB)])
        #expect(plan.unwritten(written) == [(5 * MiB)..<(64 * MiB), (201 * MiB)..<(264 * MiB)])
        #expect(ReservationPlan(limit: 100).unwritten(written).isEmpty)
    }

    @Test func theFreeSpaceFloor() {
        #expect(FreeSpaceFloor.automatic.bytes(ofFileSystemSize: 1 << 40) == 1 << 30)
        #expect(FreeSpaceFloor.automatic.bytes(ofFileSystemSize: 4 << 30) == (4 << 30) / 20)
        #expect(FreeSpaceFloor.parse("auto") == .automatic)
        #expect(FreeSpaceFloor.parse("0") == .bytes(0))
        #expect(FreeSpaceFloor.parse("2G") == .bytes(2 << 30))
        #expect(FreeSpaceFloor.parse("512k") == .bytes(512 << 10))
        #expect(FreeSpaceFloor.parse("10%") == .percent(10))
        #expect(FreeSpaceFloor.parse("10%")?.bytes(ofFileSystemSize: 1000) == 100)
        for bad in ["", "-1", "1.5G", "60%", "G", "1X", "%", "9999999999999T"] {
            #expect(FreeSpaceFloor.parse(bad) == nil, "\(bad)")
        }
        #expect(FreeSpaceFloor.parse("10%")?.description == "10%")
        #expect(FreeSpaceFloor.parse("2G")?.description == "2147483648")
    }
}
