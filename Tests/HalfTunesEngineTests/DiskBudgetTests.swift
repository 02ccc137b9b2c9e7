// max-disk-per-uid: the ledger's counts per uid and file, the setting's words, and a writer that stops at the budget.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
@testable import HalfTunesEngine
import NIOCore
import HalfTunesProtocol
import Testing

@Suite struct DiskBudgetTests {
    @Test func limitWords() {
        #expect(DiskLimit.parse("unlimited") == .unlimited)
        #expect(DiskLimit.parse(" 50G ") == .bytes(50 << 30))
        #expect(DiskLimit.parse("20%") == .percent(20))
        #expect(DiskLimit.parse("100%") == .percent(100))
        for bad in ["", "0%", "101%", "-1", "lots", "5X", "nan%"] { #expect(DiskLimit.parse(bad) == nil, "\(bad)") }
        #expect(DiskLimit.standard.bytes(ofFileSystemSize: 1000) == 200)
        #expect(DiskLimit.unlimited.bytes(ofFileSystemSize: 1000) == nil)
        for limit in [DiskLimit.unlimited, .bytes(123), .percent(12.5)] { #expect(DiskLimit.parse(limit.description) == limit) }
    }

    /// Each uid's files count against its own limit only; an exempt uid is not counted at all.
    @Test func eachUIDHasItsOwnBudget() {
        let ledger = DiskLedger(limit: 100, exempt: [0])
        #expect(ledger.grow("/b/1", uid: 1001, to: 60, partly: false) == 60)
        #expect(ledger.grow("/b/2", uid: 1001, to: 60, partly: false) == 0, "all or nothing")
        #expect(ledger.grow("/b/2", uid: 1001, to: 60, partly: true) == 40, "what is left")
        #expect(ledger.charged(1001) == 100)
        #expect(ledger.grow("/c/1", uid: 1002, to: 90, partly: false) == 90, "another uid's budget")
        #expect(ledger.grow("/r/1", uid: 0, to: 1 << 40, partly: false) == 1 << 40)
        #expect(ledger.charged(0) == 0 && ledger.account(uid: 0, path: "/r/1") == nil)

        ledger.remove("/b/1")
        #expect(ledger.charged(1001) == 40)
        ledger.set("/b/2", uid: 1001, bytes: 10) // what the file holds once stopped
        #expect(ledger.charged(1001) == 10)
        ledger.move(from: "/b/2", to: "/b/3", uid: 1001)
        #expect(ledger.charged(1001) == 10)
        ledger.remove("/b/2")
        #expect(ledger.charged(1001) == 10, "the old name holds nothing any more")
        ledger.set("/b/4", uid: 1001, bytes: 500) // bytes already there count, whatever the limit
        #expect(ledger.charged(1001) == 510)
        #expect(ledger.grow("/b/3", uid: 1001, to: 11, partly: true) == 10, "over the limit: nothing more")
        ledger.remove("/b/4")
        ledger.remove("/b/3")
        #expect(ledger.charged(1001) == 0)
    }

    /// A writer writes what its uid's budget leaves and stops there with `limitExceeded`; stopped, it holds what
    /// it wrote and gives back the rest; another file of the same uid gets nothing until bytes are freed.
    @Test func aWriterStopsAtTheBudget() async throws {
        let dir = try TempDir()
        let ledger = DiskLedger(limit: 3 << 20, exempt: [])
        let first = dir.path("a.partial"), second = dir.path("b.partial")
        let a = try await PartialWriter.open(path: first, durable: ByteRanges(), label: "test", floor: .bytes(0),
                                             account: ledger.account(uid: 1001, path: first))
        // The claimed length would reserve 64 MiB: beyond the budget, so nothing is reserved.
        #expect(await begin(a, limit: 100 << 20))
        #expect(ledger.charged(1001) <= 3 << 20)
        #expect(await write(a, count: 2 << 20, at: 0))
        #expect(await write(a, count: 2 << 20, at: 2 << 20) == false)
        let error = try #require(a.snapshot.error)
        #expect(error.taskError.code == TaskErrorCode.limitExceeded && error.isTransient, "\(error)")
        #expect(error.description.contains("max-disk-per-uid"), "\(error)")
        let stopped = await finish(a)
        #expect(stopped.written == 3 << 20, "it wrote up to the budget: \(stopped.written)")
        #expect(ledger.charged(1001) == 3 << 20)

        let b = try await PartialWriter.open(path: second, durable: ByteRanges(), label: "test", floor: .bytes(0),
                                             account: ledger.account(uid: 1001, path: second))
        #expect(await write(b, count: 1, at: 0) == false)
        #expect(b.snapshot.error?.taskError.code == TaskErrorCode.limitExceeded)
        _ = await finish(b)
        ledger.remove(first)
        let again = try await PartialWriter.open(path: second, durable: ByteRanges(), label: "test", floor: .bytes(0),
                                                 account: ledger.account(uid: 1001, path: second))
        #expect(await write(again, count: 1 << 20, at: 0))
        #expect(await finish(again).written == 1 << 20)
        #expect(ledger.charged(1001) == 1 << 20)
    }

    /// A reservation within the budget is counted, and given back (to what was written) when the writer stops.
    @Test func aReservationWithinTheBudgetCountsUntilGivenBack() async throws {
        let dir = try TempDir()
        let ledger = DiskLedger(limit: 1 << 30, exempt: [])
        let path = dir.path("c.partial")
        let w = try await PartialWriter.open(path: path, durable: ByteRanges(), label: "test", floor: .bytes(0),
                                             account: ledger.account(uid: 7, path: path))
        #expect(await begin(w, limit: 10 << 20))
        #expect(ledger.charged(7) >= 10 << 20, "\(ledger.charged(7))")
        #expect(await write(w, count: 4096, at: 0))
        _ = await finish(w)
        #expect(ledger.charged(7) == 4096)
    }

    private func begin(_ writer: PartialWriter, limit: Int64) async -> Bool {
        await withCheckedContinuation { c in writer.begin(truncate: false, reserveFrom: 0, limit: limit) { c.resume(returning: $0) } }
    }

    private func write(_ writer: PartialWriter, count: Int, at offset: Int64) async -> Bool {
        var buffer = ByteBufferAllocator().buffer(capacity: count)
        buffer.writeRepeatingByte(3, count: count)
        return await withCheckedContinuation { c in writer.write([buffer], at: offset) { c.resume(returning: $0) } }
    }

    private func finish(_ writer: PartialWriter) async -> PartialWriter.Snapshot {
        await withCheckedContinuation { c in writer.finish([], at: 0) { c.resume(returning: $0) } }
    }
}
