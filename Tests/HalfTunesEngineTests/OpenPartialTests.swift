// OpenPartial and the publish through it: a partial swapped for a symlink, a hard link or another file is
// refused, and nothing else is touched (real files in a temporary directory).
import Foundation
import HalfTunesCore
import HalfTunesEngine
import Testing

@Suite struct OpenPartialTests {
    @Test func onlyTheDaemonsOwnRegularSingleLinkFileOpens() throws {
        let dir = try TempDir()
        let partial = dir.path("p.partial"), victim = dir.path("victim")
        try writeFile(victim, Array("precious".utf8))
        #expect(symlink(victim, partial) == 0)
        #expect(throws: FileIOError.self) { try OpenPartial.open(partial) }
        do { _ = try OpenPartial.open(partial) } catch { #expect(error.description.contains("symbolic link"), "\(error)") }
        unlink(partial)
        #expect(link(victim, partial) == 0)
        do { _ = try OpenPartial.open(partial) } catch { #expect(error.description.contains("2 hard links"), "\(error)") }
        unlink(partial)
        #expect(mkdir(partial, 0o755) == 0)
        #expect(throws: FileIOError.self) { try OpenPartial.open(partial) }
        rmdir(partial)
        try writeFile(partial, Array("mine".utf8))
        let file = try OpenPartial.open(partial)
        #expect(try file.sha256() == Checksum.sha256(ofFile: partial))
        try file.checkStillAtPath()
    }

    /// Swapped after the open, each way: the publish fails, the destination does not appear, and the file
    /// put at the partial path (or linked from it) keeps its bytes and its name.
    @Test(arguments: ["symlink", "hardlink", "other"])
    func aPartialSwappedBeforeThePublishIsNeverPublished(swap: String) throws {
        let dir = try TempDir()
        let partial = dir.path("p.partial"), victim = dir.path("victim"), destination = dir.path("done.bin")
        try writeFile(partial, Array("the download".utf8))
        try writeFile(victim, Array("precious".utf8))
        let file = try OpenPartial.open(partial)
        #expect(rename(partial, dir.path("elsewhere")) == 0)
        switch swap {
        case "symlink": #expect(symlink(victim, partial) == 0)
        case "hardlink": #expect(link(victim, partial) == 0)
        default: try writeFile(partial, Array("another file".utf8))
        }
        for replacing in [false, true] {
            #expect(throws: PublishError.self) {
                try FilePublisher.publish(file, destination: destination, replacing: replacing)
            }
            #expect(!FileManager.default.fileExists(atPath: destination))
        }
        #expect(try readFile(victim) == Array("precious".utf8))
        #expect(FileManager.default.fileExists(atPath: partial), "the planted name was removed")
    }

    /// The publish links the very inode it holds, and removes the partial's name only while it names it.
    @Test func thePublishLinksTheOpenFile() throws {
        let dir = try TempDir()
        let partial = dir.path("p.partial"), destination = dir.path("done.bin")
        try writeFile(partial, Array("the download".utf8))
        let file = try OpenPartial.open(partial)
        try FilePublisher.publish(file, destination: destination)
        #expect(try readFile(destination) == Array("the download".utf8))
        #expect(!FileManager.default.fileExists(atPath: partial))
        try writeFile(partial, Array("again".utf8))
        #expect(throws: PublishError.destinationExists(destination)) {
            try FilePublisher.publish(partialPath: partial, destination: destination)
        }
        try FilePublisher.publish(partialPath: partial, destination: destination, replacing: true)
        #expect(try readFile(destination) == Array("again".utf8))
    }
}
