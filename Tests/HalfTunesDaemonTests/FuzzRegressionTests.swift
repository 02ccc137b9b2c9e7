import Foundation
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon
@testable import HalfTunesCore

/// Inputs the fuzzers (Fuzz/, `make fuzz`) found, each kept as a test here and in Fuzz/Corpus.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    /// Swift splits strings into characters (grapheme clusters): "/" or "." followed by a combining mark (U+0334)
    /// is one character that is neither, while the kernel reads bytes. A client's path with such a "/" would be
    /// split into other components than the kernel's (normalize kept a `..` the kernel follows); a server's name
    /// starting ".\u{334}" was not seen to start with a dot, and would have been a hidden file.
    @Test func combiningMarksAfterSlashesAndDots() {
        // The `names` harness's input (Fuzz/Corpus/names/combining-after-slash).
        let found = String(decoding: [0xcc, 0xb4, 0xb4, 0x00, 0x00, 0x2f, 0x2e, 0x74, 0x2e, 0x2f, 0x63, 0x2e, 0xcc, 0x5c,
                                      0x00, 0x00, 0x00, 0x2f, 0x2e, 0x00, 0x2d] as [UInt8], as: UTF8.self)
        #expect(throws: RPCError.self) { try Destination.checkClientPath(found, field: "destination") }
        for path in ["/d/../\u{334}x", "/d/\u{334}/etc/passwd", "/\u{334}"] {
            #expect(throws: RPCError.self) { try Destination.checkClientPath(path, field: "destination") }
        }
        #expect((try? Destination.checkClientPath("/d/e\u{301}t\u{334}e\u{301}.txt", field: "destination")) != nil,
                "combining marks elsewhere are names like any other")
        for name in [".\u{334}profile", "..\u{334}", ". .\u{334}x"] {
            let safe = ContentDisposition.sanitize(name)
            #expect(safe.map { $0.utf8.first != UInt8(ascii: ".") } ?? true, "\(safe ?? "-")")
        }
        #expect(ContentDisposition.sanitize(found).map { !$0.utf8.contains(UInt8(ascii: "/")) } == true)
    }
}
