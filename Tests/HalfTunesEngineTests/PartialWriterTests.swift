// PartialWriter on real temporary files: space reserved ahead (fallocate, keeping the size) and its failures.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
@testable import HalfTunesEngine
import NIOCore
import Testing

@Suite struct PartialWriterTests {
    @Test func preallocationReservesTheRestAndKeepsTheSize() async throws {
        let dir = try TempDir()
        let path = dir.path("a.partial")
        try writeFile(path, [UInt8](repeating: 7, count: 4096))
        let writer = try await PartialWriter.open(path: path, durableOffset: 4096, label: "test")
        let total: Int64 = 8 << 20
        #expect(await begin(writer, preallocateTo: total))
        let reserved = try stat(path)
        #expect(reserved.st_size == 4096, "the size stays what was written")
        #expect(Int64(reserved.st_blocks) * 512 >= total, "blocks: \(reserved.st_blocks)")

        var buffer = ByteBufferAllocator().buffer(capacity: 1 << 20)
        buffer.writeRepeatingByte(9, count: 1 << 20)
        let snapshot = await finish(writer, [buffer])
        #expect(snapshot.error == nil)
        #expect(snapshot.written == 4096 + (1 << 20) && snapshot.durable == snapshot.written)
        let written = try stat(path)
        #expect(written.st_size == 4096 + (1 << 20))
        let bytes = try readFile(path)
        #expect(bytes.prefix(4096).allSatisfy { $0 == 7 } && bytes.dropFirst(4096).allSatisfy { $0 == 9 })
    }

    /// A length the filesystem cannot hold fails before any byte is written, with the file error, and the
    /// file keeps what it had.
    @Test func aLengthBeyondTheFilesystemIsTheFileError() async throws {
        let dir = try TempDir()
        let path = dir.path("b.partial")
        try writeFile(path, [UInt8](repeating: 1, count: 100))
        let writer = try await PartialWriter.open(path: path, durableOffset: 100, label: "test")
        #expect(await begin(writer, preallocateTo: 1 << 50) == false)
        let error = try #require(writer.snapshot.error)
        #expect(error.errno == EFBIG || error.errno == ENOSPC, "\(error)")
        #expect(error.description.hasPrefix("Cannot reserve "), "\(error)")
        let snapshot = await finish(writer, [])
        #expect(snapshot.written == 100 && snapshot.durable == 100)
        #expect(try readFile(path) == [UInt8](repeating: 1, count: 100))
    }

    /// Nothing to reserve (the total is already written, or smaller): begin succeeds and changes nothing.
    @Test func nothingLeftToReserveIsFine() async throws {
        let dir = try TempDir()
        let path = dir.path("c.partial")
        try writeFile(path, [UInt8](repeating: 1, count: 100))
        let writer = try await PartialWriter.open(path: path, durableOffset: 100, label: "test")
        #expect(await begin(writer, preallocateTo: 50))
        #expect(await begin(writer, preallocateTo: 100))
        _ = await finish(writer, [])
        #expect(try stat(path).st_size == 100)
    }

    private func begin(_ writer: PartialWriter, preallocateTo total: Int64) async -> Bool {
        await withCheckedContinuation { continuation in
            writer.begin(truncate: false, preallocateTo: total) { continuation.resume(returning: $0) }
        }
    }

    private func finish(_ writer: PartialWriter, _ buffers: [ByteBuffer]) async -> PartialWriter.Snapshot {
        await withCheckedContinuation { continuation in
            writer.finish(buffers) { continuation.resume(returning: $0) }
        }
    }

    private func stat(_ path: String) throws -> Glibc.stat {
        var st = Glibc.stat()
        guard lstat(path, &st) == 0 else { throw FileIOError(operation: "stat", path: path, errno: errno) }
        return st
    }
}
