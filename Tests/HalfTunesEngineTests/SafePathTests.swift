// SafePath: directories reached one component at a time; only root's or the daemon's own links are followed.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import HalfTunesEngine
import Testing

@Suite struct SafePathTests {
    @Test func ownLinksAreFollowedOthersAreRefused() throws {
        let dir = try TempDir()
        let real = dir.path("real")
        #expect(mkdir(real, 0o755) == 0)
        #expect(symlink(real, dir.path("mine")) == 0)
        // A link of the daemon's own user (here: this process) is followed...
        let fd = try SafePath.openDirectory(dir.path("mine"))
        var viaLink = stat(), direct = stat()
        #expect(fstat(fd, &viaLink) == 0 && stat(real, &direct) == 0 && viaLink.st_ino == direct.st_ino)
        close(fd)
    }

    @Test(.enabled(if: getuid() == 0, "needs root to give a link to another uid"))
    func anotherUsersLinkIsRefusedAndNothingIsCreatedThroughIt() throws {
        let dir = try TempDir()
        let real = dir.path("real")
        #expect(mkdir(real, 0o755) == 0)
        #expect(symlink(real, dir.path("theirs")) == 0 && lchown(dir.path("theirs"), 65534, 65534) == 0)
        #expect(throws: FileIOError.self) { try SafePath.openDirectory(dir.path("theirs")) }
        #expect(throws: FileIOError.self) { try SafePath.openDirectory(dir.path("theirs") + "/.") }
        do {
            _ = try PartialFile.prepare(path: dir.path("theirs") + "/x.partial", durableOffset: 0)
            Issue.record("a partial file was created through another user's link")
        } catch let error as FileIOError {
            #expect(error.errno == ELOOP && error.description.contains("symbolic link of uid 65534"), "\(error)")
        }
        #expect(PartialFile.length(path: real + "/x.partial") == nil && access(real + "/x.partial", F_OK) != 0)
        #expect(PartialFile.length(path: dir.path("theirs") + "/x.partial") == nil)
    }

    @Test(.enabled(if: getuid() == 0, "needs root to give a link to another uid"))
    func publishingAndRemovingNeverGoThroughAnotherUsersLink() throws {
        let dir = try TempDir()
        let real = dir.path("real"), elsewhere = dir.path("elsewhere")
        #expect(mkdir(real, 0o755) == 0 && mkdir(elsewhere, 0o755) == 0)
        let partial = real + "/.f.partial"
        try writeFile(partial, Array("complete".utf8))
        // The task's directory is swapped for another user's link to somewhere else.
        #expect(rename(real, dir.path("moved")) == 0)
        #expect(symlink(elsewhere, real) == 0 && lchown(real, 65534, 65534) == 0)
        try writeFile(elsewhere + "/.f.partial", Array("planted".utf8))
        #expect(throws: (any Error).self) { try FilePublisher.publish(partialPath: partial, destination: real + "/f") }
        #expect(access(elsewhere + "/f", F_OK) != 0, "published through the link")
        PartialFile.remove(path: partial)
        #expect(access(elsewhere + "/.f.partial", F_OK) == 0, "removed through the link")
        #expect(!PartialFile.move(from: partial, to: real + "/.g.partial"))
        #expect(access(elsewhere + "/.g.partial", F_OK) != 0)
    }

    @Test func pathsMustBeAbsoluteFiles() {
        #expect(throws: FileIOError.self) { try SafePath.openDirectory("relative/dir") }
        #expect(throws: FileIOError.self) { try SafePath.inParent(of: "/tmp/") { _, _ in 0 } }
        #expect(throws: FileIOError.self) { try SafePath.inParent(of: "/tmp/..") { _, _ in 0 } }
        #expect(throws: FileIOError.self) { try SafePath.openDirectory("/nonexistent-dir-\(getpid())/x") }
    }
}
