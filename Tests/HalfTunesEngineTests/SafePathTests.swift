// SafePath: directories reached one component at a time; only root's or the daemon's own links are followed.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import HalfTunesEngine
import HalfTunesProtocol
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

@Suite struct SafePathDirectoryTests {
    /// A directory made for a user is given to them without following a link: chown of a link that was
    /// swapped in would give away whatever it points to.
    @Test(.enabled(if: getuid() == 0, "needs root to give a directory away"))
    func madeDirectoriesAreGivenAwayWithoutFollowingLinks() throws {
        let dir = try TempDir()
        let made = dir.path("made")
        #expect(try SafePath.makeDirectory(made, mode: 0o755, owner: (65534, 65534)))
        var st = stat()
        #expect(lstat(made, &st) == 0 && st.st_uid == 65534 && (st.st_mode & S_IFMT) == S_IFDIR)
        #expect(try SafePath.makeDirectory(made, mode: 0o755, owner: (65534, 65534)) == false) // exists: untouched
        // Under another user's link nothing is made, and the link's target keeps its owner.
        let target = dir.path("target")
        #expect(mkdir(target, 0o755) == 0)
        #expect(symlink(target, dir.path("link")) == 0 && lchown(dir.path("link"), 65534, 65534) == 0)
        #expect(throws: FileIOError.self) { try SafePath.makeDirectory(dir.path("link") + "/sub", mode: 0o755, owner: (65534, 65534)) }
        #expect(stat(target, &st) == 0 && st.st_uid == 0 && access(target + "/sub", F_OK) != 0)
    }

    @Test func renameWorksBetweenSafelyReachedDirectories() throws {
        let dir = try TempDir()
        #expect(mkdir(dir.path("a"), 0o755) == 0 && mkdir(dir.path("b"), 0o755) == 0)
        try writeFile(dir.path("a") + "/f", Array("x".utf8))
        #expect(try SafePath.rename(dir.path("a") + "/f", to: dir.path("b") + "/g") == 0)
        #expect(try readFile(dir.path("b") + "/g") == Array("x".utf8))
        #expect(try SafePath.rename(dir.path("a") + "/f", to: dir.path("b") + "/h") == ENOENT)
    }

    /// Paths are split and compared as the kernel reads them, by bytes: a `/` with a combining mark after it is
    /// still a separator, and `é` is not `e` + U+0301.
    @Test func pathsAreSplitAndComparedByBytes() throws {
        #expect(PathBytes.components("/a/\u{334}b//c/") == ["a", "\u{334}b", "c"])
        #expect("/a/\u{334}b".split(separator: "/").count == 1, "what a split by Character gives: one part with a / in it")
        #expect(PathBytes.components(of: "/r/x/\u{334}y", below: "/r") == ["x", "\u{334}y"])
        let split = try #require(PathBytes.splitLast("/d/\u{334}name"))
        #expect(split.before == "/d" && split.after == "\u{334}name")
        #expect(PathBytes.splitLast("name") == nil)
        #expect(PathBytes.isInside("/home/caf\u{E9}/x", "/home/caf\u{E9}"))
        #expect(!PathBytes.isInside("/home/cafe\u{301}/x", "/home/caf\u{E9}"), "canonically equal, not the same directory")
        #expect("/home/cafe\u{301}/x".hasPrefix("/home/caf\u{E9}"), "what hasPrefix says")
        #expect(!PathBytes.isInside("/rootx", "/root") && PathBytes.isInside("/root", "/root") && PathBytes.isInside("/x", "/"))
    }
}
