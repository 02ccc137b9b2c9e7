// Unit tests on real temporary files: PartialFile.prepare, FilePublisher.publish / recover / availableName.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import HalfTunesEngine
import Testing

@Suite struct FileTests {
    @Test func prepareCreatesTruncatesAndKeepsThePrefix() throws {
        let dir = try TempDir()
        let path = dir.path("a.partial")
        #expect(try PartialFile.prepare(path: path, durableOffset: 100) == 0)
        #expect(PartialFile.length(path: path) == 0)
        try writeFile(path, Array(0..<200).map { UInt8($0) })
        #expect(try PartialFile.prepare(path: path, durableOffset: 150) == 150)
        #expect(try readFile(path) == Array(0..<150).map { UInt8($0) })
        // A durable offset beyond the file keeps the file as it is.
        #expect(try PartialFile.prepare(path: path, durableOffset: 1000) == 150)
        #expect(try PartialFile.prepare(path: path, durableOffset: 0) == 0)
        #expect(PartialFile.length(path: path) == 0)
        PartialFile.remove(path: path)
        #expect(PartialFile.length(path: path) == nil)
        PartialFile.remove(path: path)  // ENOENT is fine
    }

    @Test func prepareRefusesSymlinksAndMissingDirectories() throws {
        let dir = try TempDir()
        let target = dir.path("target")
        try writeFile(target, [1, 2, 3])
        let link = dir.path("link.partial")
        #expect(symlink(target, link) == 0)
        #expect(throws: FileIOError.self) { try PartialFile.prepare(path: link, durableOffset: 0) }
        #expect(try readFile(target) == [1, 2, 3])
        do {
            _ = try PartialFile.prepare(path: dir.path("missing/x.partial"), durableOffset: 0)
            Issue.record("prepare in a missing directory should throw")
        } catch let error as FileIOError {
            #expect(error.errno == ENOENT)
            #expect(error.description.contains("missing/x.partial"))
            #expect(error.taskError.code == "ioError")
            #expect(!error.isTransient)
        }
    }

    @Test func publishLinksWithoutOverwriting() throws {
        let dir = try TempDir()
        let partial = dir.path("f.partial"), destination = dir.path("f.bin")
        try writeFile(partial, [1, 2, 3, 4])
        try FilePublisher.publish(partialPath: partial, destination: destination)
        #expect(try readFile(destination) == [1, 2, 3, 4])
        #expect(PartialFile.length(path: partial) == nil)

        // An existing destination is never replaced, and the partial stays.
        try writeFile(partial, [9, 9])
        #expect(throws: PublishError.destinationExists(destination)) {
            try FilePublisher.publish(partialPath: partial, destination: destination)
        }
        #expect(try readFile(destination) == [1, 2, 3, 4])
        #expect(try readFile(partial) == [9, 9])

        PartialFile.remove(path: partial)
        #expect(throws: PublishError.partialMissing(partial)) {
            try FilePublisher.publish(partialPath: partial, destination: dir.path("other.bin"))
        }
        #expect(PartialFile.length(path: dir.path("other.bin")) == nil)
    }

    @Test func publishIntoAMissingDirectoryFailsClearly() throws {
        let dir = try TempDir()
        let partial = dir.path("f.partial")
        try writeFile(partial, [1])
        do {
            try FilePublisher.publish(partialPath: partial, destination: dir.path("nope/f.bin"))
            Issue.record("publish into a missing directory should throw")
        } catch PublishError.io(let message, let code) {
            #expect(code == ENOENT)
            #expect(message.contains("nope/f.bin"))
        }
        #expect(try readFile(partial) == [1])
    }

    @Test func recoverCoversEveryCase() throws {
        let dir = try TempDir()
        let partial = dir.path("r.partial"), destination = dir.path("r.bin")
        #expect(FilePublisher.recover(partialPath: partial, destination: destination) == .lost)

        try writeFile(partial, [1, 2])
        #expect(FilePublisher.recover(partialPath: partial, destination: destination) == .needsPublish)

        // Crash after link, before unlink: same inode → finish the job.
        #expect(link(partial, destination) == 0)
        #expect(FilePublisher.recover(partialPath: partial, destination: destination) == .published)
        #expect(PartialFile.length(path: partial) == nil)
        #expect(try readFile(destination) == [1, 2])
        #expect(FilePublisher.recover(partialPath: partial, destination: destination) == .published)

        try writeFile(partial, [3])
        #expect(FilePublisher.recover(partialPath: partial, destination: destination) == .conflict)
        #expect(try readFile(partial) == [3])
        #expect(try readFile(destination) == [1, 2])
    }

    @Test func availableNameCountsUp() throws {
        let dir = try TempDir()
        let name = dir.path("song.mp3")
        #expect(FilePublisher.availableName(for: name, reserved: []) == name)
        try writeFile(name, [0])
        #expect(FilePublisher.availableName(for: name, reserved: []) == dir.path("song (1).mp3"))
        #expect(FilePublisher.availableName(for: name, reserved: [dir.path("song (1).mp3")]) == dir.path("song (2).mp3"))
        try writeFile(dir.path("song (1).mp3"), [0])
        #expect(FilePublisher.availableName(for: name, reserved: [dir.path("song (2).mp3")]) == dir.path("song (3).mp3"))
        #expect(FilePublisher.availableName(for: dir.path("x.tar.gz"), reserved: [dir.path("x.tar.gz")])
            == dir.path("x (1).tar.gz"))
        #expect(FilePublisher.availableName(for: dir.path("README"), reserved: [dir.path("README")])
            == dir.path("README (1)"))
        #expect(FilePublisher.availableName(for: dir.path(".profile"), reserved: [dir.path(".profile")])
            == dir.path(".profile (1)"))
    }

    /// 10,000 downloads of one name: the next free name costs a few dozen looks, not 10,000 — the first free one
    /// when the taken names run without a gap (as they were handed out), and with a gap among the first 8 that gap;
    /// a gap further on may be passed over, but the answer is always free.
    @Test func availableNameSearchesPastManyTakenNames() throws {
        let dir = try TempDir()
        let name = dir.path("download")
        try writeFile(name, [0])
        var taken = Set((1...10_000).map { dir.path("download (\($0))") })
        var looks = 0
        func next() -> String? {
            looks = 0
            return FilePublisher.availableName(for: name, isReserved: { looks += 1; return taken.contains($0) })
        }
        #expect(next() == dir.path("download (10001)"))
        #expect(looks <= 40, "\(looks) names looked at")
        taken.remove(dir.path("download (3)"))
        #expect(next() == dir.path("download (3)"))
        taken.insert(dir.path("download (3)"))
        taken.remove(dir.path("download (5000)"))
        let answer = next()
        #expect(answer.map { !taken.contains($0) && $0 != name } == true && looks <= 40, "\(answer ?? "-"), \(looks) looks")
        for n in [9, 16, 17, 10_001, 10_002] { // around the search's edges: the first free one
            taken = Set((1..<n).map { dir.path("download (\($0))") })
            #expect(next() == dir.path("download (\(n))"))
        }
    }

    /// Issue 54's names planted to make the search run on: `f`, `f (1)` … `f (8)`, then `f (16)`, `f (32)` …
    /// `f (2^62)` (it doubled past 2^63 and trapped). The search is bounded: past `maxCounted` it tries random
    /// numbers, so a free name comes in a few dozen looks; with every name taken it answers nil, never loops.
    @Test func availableNameIsBoundedWhateverNamesArePlanted() throws {
        let dir = try TempDir()
        let name = dir.path("f")
        var planted: Set<String> = [name]
        for n in 1...8 { planted.insert(dir.path("f (\(n))")) }
        for power in 4...62 { planted.insert(dir.path("f (\(1 << power))")) }
        var looks = 0
        let answer = FilePublisher.availableName(for: name, isReserved: { looks += 1; return planted.contains($0) })
        let found = try #require(answer)
        #expect(!planted.contains(found) && found.hasPrefix(dir.path("f (")), "\(found)")
        #expect(looks <= 70, "\(looks) names looked at")
        looks = 0
        #expect(FilePublisher.availableName(for: name, isReserved: { _ in looks += 1; return true }) == nil)
        #expect(looks <= 70, "\(looks) names looked at")
        #expect(FilePublisher.publishName(preferred: name, destination: name, avoiding: [name], isReserved: { _ in true }) == nil)
    }

    /// A name reserved at create (`preferring`) is given again while it is free and one the search would give for
    /// the same name (`name (n).ext`, split at the last `/` byte), so a random one is not drawn twice.
    @Test func thePreferredNumberedNameIsKeptWhileFree() throws {
        let dir = try TempDir()
        let name = dir.path("f.tar.gz")
        let kept = dir.path("f (123456789).tar.gz")
        let taken = { (path: String) in path != kept }
        #expect(FilePublisher.availableName(for: name, isReserved: taken, preferring: kept) == kept)
        #expect(FilePublisher.availableName(for: name, isReserved: { _ in true }, preferring: kept) == nil, "no longer free")
        for other in ["g (1).tar.gz", "f (0).tar.gz", "f (01).tar.gz", "f ().tar.gz", "f (1).gz", "f (x).tar.gz",
                      "sub/f (1).tar.gz"] {
            #expect(!FilePublisher.isNumberedName(dir.path(other), of: name), "\(other)")
        }
        #expect(FilePublisher.isNumberedName(dir.path("f (7).tar.gz"), of: name))
        // A "/" with a combining mark after it is still the directory's end, as the kernel reads the path.
        #expect(FilePublisher.isNumberedName("/d/\u{334}x (2)", of: "/d/\u{334}x"))
        #expect(!FilePublisher.isNumberedName("/e/x (2)", of: "/d/x"))
    }

    /// The name a finished download is published at: the preferred one while nothing is there (a dangling link
    /// counts as something) and it is not to be avoided; else the next free one, past avoided and reserved names.
    @Test func publishNameKeepsThePreferredNameOnlyWhileItIsFree() throws {
        let dir = try TempDir()
        let name = dir.path("a.bin"), first = dir.path("a (1).bin"), second = dir.path("a (2).bin")
        let free = { (_: String) in false }
        #expect(FilePublisher.publishName(preferred: name, destination: name, avoiding: [], isReserved: free) == name)
        #expect(FilePublisher.publishName(preferred: name, destination: name, avoiding: [name], isReserved: free) == first)
        #expect(symlink(dir.path("nowhere"), name) == 0)
        #expect(FilePublisher.publishName(preferred: name, destination: name, avoiding: [], isReserved: free) == first)
        #expect(FilePublisher.publishName(preferred: name, destination: name, avoiding: [first],
                                          isReserved: { $0 == second }) == dir.path("a (3).bin"))
        // A journaled location elsewhere is kept while free.
        #expect(FilePublisher.publishName(preferred: second, destination: name, avoiding: [], isReserved: free) == second)
    }
}
