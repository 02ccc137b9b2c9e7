import Foundation
import HalfTunesCore
import HalfTunesEngine
import TestOrigin
import Testing

@Suite("Checksum")
struct ChecksumTests {
    let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

    @Test func parsesSha256InAnyCase() throws {
        let parsed = try #require(Checksum(parsing: "SHA256:" + abc.uppercased()))
        #expect(parsed.hex == abc)
        #expect(parsed.description == "sha256:" + abc)
        #expect(Checksum(parsing: "sha256:" + abc) == parsed)
    }

    @Test func refusesAnythingElseWithAReason() {
        for bad in ["", abc, "sha256:", "sha256:" + abc.dropLast(), "sha256:" + abc + "0", "md5:" + abc,
                    "sha256:" + abc.dropLast() + "g", "sha256: " + abc.dropFirst(), "sha256:" + abc + "\n"] {
            #expect(Checksum(parsing: bad) == nil, "\(bad)")
            #expect(Checksum.problem(with: bad) != nil, "\(bad)")
        }
        #expect(Checksum.problem(with: "md5:" + abc)?.contains("not supported") == true)
        #expect(Checksum.problem(with: "sha256:12")?.contains("64 hex digits") == true)
    }

    @Test func digestsAFile() throws {
        let path = NSTemporaryDirectory() + "checksum-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data("abc".utf8)))
        #expect(try Checksum.sha256(ofFile: path).hex == abc)
        // Larger than one read: 3 MiB + 5 bytes of a pattern, checked against a one-shot digest.
        let big = Data((0..<(3 << 20) + 5).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        #expect(FileManager.default.createFile(atPath: path, contents: big))
        #expect(try Checksum.sha256(ofFile: path).hex == TestOrigin.sha256Hex(Array(big)))
        #expect(throws: FileIOError.self) { try Checksum.sha256(ofFile: path + ".missing") }
    }
}
