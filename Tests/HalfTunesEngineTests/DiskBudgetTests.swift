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
        for bad in ["", "0", "0k", "0%", "101%", "-1", "lots", "5X", "nan%"] { #expect(DiskLimit.parse(bad) == nil, "\(bad)") }
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

    /// A download of a known length takes all it may still need from the budget when it begins, or nothing: a
    /// second one that does not fit in what is left writes nothing and says why (`limitExceeded`), and one
    /// larger than the whole budget says so; when the first is gone, the second fits.
    @Test func aKnownLengthIsCommittedWholeOrNotAtAll() async throws {
        let dir = try TempDir()
        let ledger = DiskLedger(limit: 3 << 20, exempt: [])
        let first = dir.path("a.partial"), second = dir.path("b.partial"), third = dir.path("c.partial")
        let a = try await open(first, ledger)
        #expect(await begin(a, limit: 2 << 20))
        #expect(ledger.charged(1001) == 2 << 20)
        let b = try await open(second, ledger)
        #expect(await begin(b, limit: 2 << 20) == false)
        let error = try #require(b.snapshot.error)
        #expect(error.taskError.code == TaskErrorCode.limitExceeded && error.isTransient, "\(error)")
        #expect(error.description.contains("max-disk-per-uid") && error.description.contains("already hold"), "\(error)")
        #expect(ledger.charged(1001) == 2 << 20, "the refused download took nothing")
        _ = await finish(b)
        let c = try await open(third, ledger)
        #expect(await begin(c, limit: 4 << 20) == false)
        #expect(c.snapshot.error?.description.contains("more than max-disk-per-uid allows") == true, "\(String(describing: c.snapshot.error))")
        _ = await finish(c)

        #expect(await write(a, count: 2 << 20, at: 0))
        #expect(await finish(a).written == 2 << 20)
        ledger.remove(first) // published
        let again = try await open(second, ledger)
        #expect(await begin(again, limit: 2 << 20))
        #expect(await write(again, count: 2 << 20, at: 0))
        #expect(await finish(again).written == 2 << 20)
        #expect(ledger.charged(1001) == 2 << 20)
    }

    /// A length nobody announced: the writer writes what the budget leaves, stops there with `limitExceeded` and
    /// holds what it wrote; another file of the same uid gets nothing until bytes are freed.
    @Test func anUnknownLengthIsWrittenUpToTheBudget() async throws {
        let dir = try TempDir()
        let ledger = DiskLedger(limit: 3 << 20, exempt: [])
        let first = dir.path("a.partial"), second = dir.path("b.partial")
        let a = try await open(first, ledger)
        #expect(await write(a, count: 2 << 20, at: 0))
        #expect(await write(a, count: 2 << 20, at: 2 << 20) == false)
        #expect(a.snapshot.error?.taskError.code == TaskErrorCode.limitExceeded)
        #expect(await finish(a).written == 3 << 20, "it wrote up to the budget")
        #expect(ledger.charged(1001) == 3 << 20)
        let b = try await open(second, ledger)
        #expect(await write(b, count: 1, at: 0) == false)
        _ = await finish(b)
        ledger.remove(first)
        let again = try await open(second, ledger)
        #expect(await write(again, count: 1 << 20, at: 0))
        #expect(await finish(again).written == 1 << 20 && ledger.charged(1001) == 1 << 20)
    }

    /// A write whose end the file already holds: only its new bytes count, so the part that fits ends where
    /// they use up the budget (not where a count from the end would put it).
    @Test func onlyNewBytesOfAWriteCount() async throws {
        let dir = try TempDir()
        let path = dir.path("d.partial")
        try writeFile(path, [UInt8](repeating: 5, count: 2 << 20))
        let ledger = DiskLedger(limit: 3 << 19, exempt: []) // 1.5 MiB
        let w = try await PartialWriter.open(path: path, durable: ByteRanges([(1 << 20)..<(2 << 20)]), label: "test",
                                             floor: .bytes(0), account: ledger.account(uid: 1001, path: path))
        #expect(ledger.charged(1001) == 1 << 20)
        #expect(await write(w, count: 2 << 20, at: 0) == false)
        let done = await finish(w)
        #expect(done.writtenRanges == ByteRanges([0..<(1 << 19), (1 << 20)..<(2 << 20)]), "\(done.writtenRanges)")
        #expect(ledger.charged(1001) == 3 << 19)
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

    private func open(_ path: String, _ ledger: DiskLedger) async throws -> PartialWriter {
        try await PartialWriter.open(path: path, durable: ByteRanges(), label: "test", floor: .bytes(0),
                                     account: ledger.account(uid: 1001, path: path))
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
