// What a published file records about where it came from, without I/O; and applying it to a real file.
import CLinuxFile
import Foundation
import HalfTunesCore
import HalfTunesEngine
import Testing

@Suite struct PublishMetadataTests {
    @Test func credentialsAndFragmentsAreStripped() {
        typealias M = PublishMetadata
        #expect(M.strippingCredentials("https://alice:pw@host/a/b.iso?x=1#f") == "https://host/a/b.iso?x=1")
        #expect(M.strippingCredentials("https://alice@host/a") == "https://host/a")
        #expect(M.strippingCredentials("http://host:8080/a%20b") == "http://host:8080/a%20b")
        let m = M.of(url: "https://u:p@h/f", headers: ["referer": "https://r/x#y", "X": "1"],
                     lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", preserveModificationTime: true)
        #expect(m == M(originURL: "https://h/f", referrerURL: "https://r/x", modificationTime: 784_111_777))
        let kept = M.of(url: "https://h/f", headers: [:], lastModified: "Sun, 06 Nov 1994 08:49:37 GMT",
                        preserveModificationTime: false)
        #expect(kept.modificationTime == nil && kept.referrerURL == nil)
        #expect(M.of(url: "https://h/f", headers: [:], lastModified: "garbage", preserveModificationTime: true).modificationTime == nil)
    }

    @Test func applySetsTheAttributesAndTheMtimeThroughTheDescriptor() throws {
        let dir = try TempDir()
        let path = dir.path("file.partial")
        #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
        let file = try OpenPartial.open(path)
        let problems = PublishMetadata(originURL: "https://h/f", referrerURL: nil, modificationTime: 784_111_777.5).apply(to: file)
        #expect(problems.isEmpty, "\(problems)")
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = htd_get_xattr(path, "user.xdg.origin.url", &buffer, buffer.count)
        #expect(n > 0 && String(decoding: buffer[..<max(n, 0)], as: UTF8.self) == "https://h/f")
        #expect(htd_get_xattr(path, "user.xdg.referrer.url", &buffer, buffer.count) < 0)
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mtim.tv_sec == 784_111_777 && st.st_mtim.tv_nsec == 500_000_000)
        #expect(PublishMetadata().apply(to: file).isEmpty, "nothing to set, nothing done")
    }

    /// The metadata goes to the file that was opened, whatever the path names by then: a symlink swapped in
    /// at the path to another file leaves that file untouched.
    @Test func aSymlinkSwappedInAfterTheOpenIsNotFollowed() throws {
        let dir = try TempDir()
        let path = dir.path("file.partial"), victim = dir.path("victim")
        #expect(FileManager.default.createFile(atPath: path, contents: Data("mine".utf8)))
        #expect(FileManager.default.createFile(atPath: victim, contents: Data("theirs".utf8)))
        var before = stat()
        #expect(stat(victim, &before) == 0)
        let file = try OpenPartial.open(path)
        #expect(rename(path, dir.path("moved")) == 0 && symlink(victim, path) == 0)
        #expect(PublishMetadata(originURL: "https://h/f", modificationTime: 784_111_777).apply(to: file).isEmpty)
        var buffer = [UInt8](repeating: 0, count: 256)
        #expect(htd_get_xattr(victim, "user.xdg.origin.url", &buffer, buffer.count) < 0)
        var after = stat()
        #expect(stat(victim, &after) == 0 && after.st_mtim.tv_sec == before.st_mtim.tv_sec)
        #expect(htd_get_xattr(dir.path("moved"), "user.xdg.origin.url", &buffer, buffer.count) > 0)
    }
}
