import Foundation
import HalfTunesEngine
import HalfTunesProtocol
import Testing

@Suite("Upload sources")
struct UploadSourceTests {
    @Test func inspectRefusesWhatCannotBeSentWithAReason() throws {
        let dir = try TempDir()
        func message(_ path: String) -> String? {
            do {
                _ = try UploadSource.inspect(path: path)
                return nil
            } catch {
                #expect(error.taskError.code == TaskErrorCode.sourceUnreadable)
                return error.message
            }
        }
        #expect(message(dir.path("missing"))?.contains("does not exist") == true)
        #expect(message(dir.path("missing/below"))?.contains("does not exist") == true)
        #expect(message(dir.root)?.contains("is a directory") == true)
        #expect(message("relative.bin")?.contains("absolute path") == true)
        #expect(mkfifo(dir.path("fifo"), 0o600) == 0)
        #expect(message(dir.path("fifo"))?.contains("is a FIFO") == true)
        #expect(message("/dev/null")?.contains("is a device") == true)
        try writeFile(dir.path("ok"), [1, 2, 3])
        #expect(try UploadSource.inspect(path: dir.path("ok")) == 3)
        #expect(symlink(dir.path("ok"), dir.path("link")) == 0)
        #expect(try UploadSource.inspect(path: dir.path("link")) == 3)
    }

    @Test func readsChunksAndNoticesChanges() throws {
        let dir = try TempDir()
        let bytes = (0..<1000).map { UInt8($0 % 251) }
        try writeFile(dir.path("f"), bytes)
        let source = try UploadSource.open(path: dir.path("f"))
        defer { source.close() }
        #expect(source.size == 1000)
        #expect(source.openedAsUID == UInt32(geteuid()))
        var chunk = try source.read(at: 0, count: 600)
        #expect(chunk.readBytes(length: chunk.readableBytes) == Array(bytes[0..<600]))
        chunk = try source.read(at: 600, count: 600)
        #expect(chunk.readBytes(length: chunk.readableBytes) == Array(bytes[600...]))
        #expect(try source.read(at: 1000, count: 10).readableBytes == 0)
        try source.verifyUnchanged()

        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: dir.path("f")))
        handle.seekToEndOfFile()
        handle.write(Data([9]))
        try handle.close()
        #expect {
            try source.verifyUnchanged()
        } throws: { error in
            (error as? UploadSourceError)?.message.contains("its length went from 1000 to 1001 bytes") == true
        }
    }

    @Test func aFileThatShrinksIsReportedWhenRead() throws {
        let dir = try TempDir()
        try writeFile(dir.path("f"), [UInt8](repeating: 7, count: 100))
        let source = try UploadSource.open(path: dir.path("f"))
        defer { source.close() }
        #expect(truncate(dir.path("f"), 40) == 0)
        #expect {
            _ = try source.read(at: 0, count: 100)
        } throws: { error in
            (error as? UploadSourceError)?.message.contains("became shorter") == true
        }
    }
}
