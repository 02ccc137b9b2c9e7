// PartialWriter on real temporary files: space reserved ahead (fallocate, keeping the size) and its failures.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
@testable import HalfTunesEngine
import NIOConcurrencyHelpers
import NIOCore
import HalfTunesProtocol
import Testing

@Suite struct PartialWriterTests {
    @Test func preallocationReservesTheRestAndKeepsTheSize() async throws {
        let dir = try TempDir()
        let path = dir.path("a.partial")
        try writeFile(path, [UInt8](repeating: 7, count: 4096))
        let writer = try await PartialWriter.open(path: path, durable: ByteRanges(prefix: 4096), label: "test")
        let total: Int64 = 8 << 20
        #expect(await begin(writer, preallocateTo: total))
        let reserved = try stat(path)
        #expect(reserved.st_size == 4096, "the size stays what was written")
        #expect(Int64(reserved.st_blocks) * 512 >= total, "blocks: \(reserved.st_blocks)")

        var buffer = ByteBufferAllocator().buffer(capacity: 1 << 20)
        buffer.writeRepeatingByte(9, count: 1 << 20)
        let snapshot = await finish(writer, [buffer], at: 4096)
        #expect(snapshot.error == nil)
        #expect(snapshot.written == 4096 + (1 << 20) && snapshot.durable == snapshot.written)
        let written = try stat(path)
        #expect(written.st_size == 4096 + (1 << 20))
        let bytes = try readFile(path)
        #expect(bytes.prefix(4096).allSatisfy { $0 == 7 } && bytes.dropFirst(4096).allSatisfy { $0 == 9 })
    }

    /// A claimed length the filesystem could never hold reserves one window, not the claim; what was reserved
    /// and not written is given back when the writer finishes.
    @Test func aClaimReservesOneWindowAndFinishingGivesItBack() async throws {
        let dir = try TempDir()
        let path = dir.path("b.partial")
        try writeFile(path, [UInt8](repeating: 1, count: 100))
        let writer = try await PartialWriter.open(path: path, durable: ByteRanges(prefix: 100), label: "test",
                                                  floor: .bytes(0))
        #expect(await begin(writer, preallocateTo: 1 << 50))
        #expect(writer.snapshot.error == nil)
        let reserved = try stat(path).st_blocks * 512
        #expect(reserved >= ReservationPlan.window && reserved <= ReservationPlan.window + (1 << 20), "\(reserved)")
        let snapshot = await finish(writer, [], at: 100)
        #expect(snapshot.written == 100 && snapshot.durable == 100)
        #expect(try stat(path).st_blocks * 512 < 64 << 10, "the window was not given back")
        #expect(try readFile(path) == [UInt8](repeating: 1, count: 100))
    }

    /// A reservation that would leave less than the floor free fails before any byte is written, with a
    /// `diskFull` error that names min-free-space.
    @Test func theFreeSpaceFloorIsNeverCrossed() async throws {
        let dir = try TempDir()
        let path = dir.path("f.partial")
        let writer = try await PartialWriter.open(path: path, durable: ByteRanges(), label: "test",
                                                  floor: .bytes(1 << 60))
        #expect(await begin(writer, preallocateTo: 10 << 20) == false)
        let error = try #require(writer.snapshot.error)
        #expect(error.errno == ENOSPC && error.taskError.code == TaskErrorCode.diskFull, "\(error)")
        #expect(error.description.contains("min-free-space"), "\(error)")
        _ = await finish(writer, [], at: 0)
        #expect(try stat(path).st_size == 0)
    }

    /// Nothing to reserve (the total is already written, or smaller), or less than a MiB left: begin succeeds
    /// and changes nothing.
    @Test func nothingOrLittleLeftToReserveIsNotReserved() async throws {
        let dir = try TempDir()
        let path = dir.path("c.partial")
        try writeFile(path, [UInt8](repeating: 1, count: 100))
        let writer = try await PartialWriter.open(path: path, durable: ByteRanges(prefix: 100), label: "test")
        #expect(await begin(writer, preallocateTo: 50))
        #expect(await begin(writer, preallocateTo: 100))
        #expect(await begin(writer, preallocateTo: 100 + ReservationPlan.minimum - 1))
        let blocks = try stat(path).st_blocks
        #expect(blocks * 512 < 64 << 10, "blocks: \(blocks)")
        _ = await finish(writer, [], at: 100)
        #expect(try stat(path).st_size == 100)
    }

    /// Segments write at their own offsets, in any order: the file holds each at its place, one fsync makes
    /// every written range durable, and the checkpoints' ranges only grow.
    @Test func writesAtOffsetsAndSyncsEveryRange() async throws {
        let dir = try TempDir()
        let path = dir.path("d.partial")
        let writer = try await PartialWriter.open(path: path, durable: ByteRanges(prefix: 0), label: "test")
        let total = 64 << 10
        let content = (0..<total).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        #expect(await begin(writer, preallocateTo: Int64(total)))
        // Four segments of 16 KiB, written 4 KiB at a time, interleaved, with a sync after every other write.
        let checkpoints = NIOLockedValueBox<[ByteRanges]>([])
        var order: [(segment: Int, piece: Int)] = []
        for piece in 0..<4 { for segment in [2, 0, 3, 1] { order.append((segment, piece)) } }
        for (n, step) in order.enumerated() {
            let offset = step.segment * (16 << 10) + step.piece * (4 << 10)
            var buffer = ByteBufferAllocator().buffer(capacity: 4 << 10)
            buffer.writeBytes(content[offset..<offset + (4 << 10)])
            let ok: Bool = await withCheckedContinuation { continuation in
                writer.write([buffer], at: Int64(offset)) { _ in }
                if n % 2 == 1 {
                    writer.sync(checkpoint: { ranges in checkpoints.withLockedValue { $0.append(ranges) } },
                                synced: { continuation.resume(returning: true) })
                } else {
                    writer.callback { continuation.resume(returning: true) }
                }
            }
            #expect(ok)
            if n == 3 {
                let middle = writer.snapshot
                #expect(middle.writtenRanges == ByteRanges([0..<4096, 16384..<20480, 32768..<36864, 49152..<53248]),
                        "\(middle.writtenRanges)")
                #expect(!middle.writtenRanges.isPrefix)
            }
        }
        let snapshot = await finish(writer, [], at: 0)
        #expect(snapshot.error == nil)
        #expect(snapshot.durableRanges.covers(total: Int64(total)) && snapshot.writtenRanges == snapshot.durableRanges)
        #expect(try readFile(path) == content)
        let seen = checkpoints.withLockedValue { $0 }
        #expect(seen.count == 8)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.intersection($1) == $0 && $0.count < $1.count },
                "each checkpoint holds the one before: \(seen)")
    }

    /// Opening keeps the durable ranges the file still holds and cuts what lies past the last of them (torn
    /// writes), but not what lies between them.
    @Test func openingKeepsTheRangesTheFileHolds() async throws {
        let dir = try TempDir()
        let path = dir.path("e.partial")
        try writeFile(path, [UInt8](repeating: 3, count: 40))
        let durable = ByteRanges([0..<10, 20..<30, 35..<50])
        let writer = try await PartialWriter.open(path: path, durable: durable, label: "test")
        #expect(writer.keptRanges == ByteRanges([0..<10, 20..<30, 35..<40]))
        #expect(writer.kept == 10, "a single request in order resumes at the end of the first range")
        _ = await finish(writer, [], at: 0)
        #expect(try stat(path).st_size == 40)

        let second = try await PartialWriter.open(path: path, durable: ByteRanges([0..<10, 20..<30]), label: "test")
        #expect(second.keptRanges == ByteRanges([0..<10, 20..<30]))
        let snapshot = await finish(second, [], at: 0)
        #expect(snapshot.durableRanges == ByteRanges([0..<10, 20..<30]))
        #expect(try stat(path).st_size == 30, "cut after the last range")
    }

    private func begin(_ writer: PartialWriter, preallocateTo total: Int64) async -> Bool {
        await withCheckedContinuation { continuation in
            writer.begin(truncate: false, reserveFrom: writer.snapshot.writtenRanges.upperBound, limit: total) {
                continuation.resume(returning: $0)
            }
        }
    }

    private func finish(_ writer: PartialWriter, _ buffers: [ByteBuffer], at offset: Int64) async -> PartialWriter.Snapshot {
        await withCheckedContinuation { continuation in
            writer.finish(buffers, at: offset) { continuation.resume(returning: $0) }
        }
    }

    private func stat(_ path: String) throws -> Glibc.stat {
        var st = Glibc.stat()
        guard lstat(path, &st) == 0 else { throw FileIOError(operation: "stat", path: path, errno: errno) }
        return st
    }
}
