// Content-Disposition header shapes seen in the wild, and traversal attempts, to the name a download gets.
import HalfTunesCore
import Testing

@Suite struct ContentDispositionTests {
    static let cases: [(header: String, name: String?)] = [
        (#"attachment; filename="report-2026.pdf""#, "report-2026.pdf"),
        (#"attachment; filename=report-2026.pdf"#, "report-2026.pdf"),                      // no quotes
        (#"attachment; filename="report.pdf";"#, "report.pdf"),                              // trailing ;
        (#"attachment;filename="report.pdf""#, "report.pdf"),                                // no space
        (#"ATTACHMENT; FILENAME="Report.PDF""#, "Report.PDF"),                               // upper case
        (#"inline; filename="a b.txt""#, "a b.txt"),
        (#"filename="no-type.bin""#, "no-type.bin"),                                         // no disposition type
        (#"attachment; filename = "spaced.zip" "#, "spaced.zip"),                            // spaces around =
        (#"attachment; filename*=UTF-8''%E2%82%AC%20rates.pdf"#, "€ rates.pdf"),             // RFC 5987
        (#"attachment; filename="fallback.pdf"; filename*=UTF-8''%C3%A9t%C3%A9.pdf"#, "été.pdf"), // * wins
        (#"attachment; filename*=utf-8'en'na%C3%AFve.txt; filename="naive.txt""#, "naïve.txt"),
        (#"attachment; filename*=ISO-8859-1''caf%E9.txt"#, "café.txt"),
        (#"attachment; filename*=UTF-8''%FF%FE.txt; filename="ok.txt""#, "ok.txt"),           // bad UTF-8: fall back
        (#"attachment; filename*=KOI8-R''x.txt; filename="ok2.txt""#, "ok2.txt"),             // unknown charset
        (#"attachment; filename="100%25%20done.txt""#, "100% done.txt"),                      // percent-encoding
        (#"attachment; filename="quote\"inside.txt""#, #"quote"inside.txt"#),                 // escaped quote
        (#"attachment; filename="semi;colon.txt""#, "semi;colon.txt"),                        // ; inside quotes
        (#"attachment; filename="../../etc/passwd""#, "_.._etc_passwd"),                      // traversal
        (#"attachment; filename*=UTF-8''..%2F..%2Fx"#, "_.._x"),
        (#"attachment; filename="..\\..\\windows\\system.ini""#, "_.._windows_system.ini"),
        (#"attachment; filename=".hidden""#, "hidden"),                                       // leading dot
        (#"attachment; filename="..""#, nil),
        (#"attachment; filename=".""#, nil),
        (#"attachment; filename="""#, nil),
        (#"attachment; filename="/""#, nil),
        (#"attachment; filename="tab\#tname.txt""#, "tabname.txt"),                          // control char dropped
        (#"attachment"#, nil),
        (#"inline"#, nil),
        (#""#, nil),
        (#"attachment; filename="unterminated.txt"#, "unterminated.txt"),
    ]

    @Test(arguments: 0..<cases.count)
    func headerShapes(_ i: Int) {
        let (header, name) = Self.cases[i]
        #expect(ContentDisposition.filename(header) == name, "\(header)")
    }

    @Test func bidirectionalControlsAreRemoved() {
        #expect(ContentDisposition.sanitize("invoice\u{202E}fdp.exe") == "invoicefdp.exe")
        #expect(ContentDisposition.sanitize("\u{2066}a\u{2069}\u{200F}b\u{061C}.txt") == "ab.txt")
        #expect(ContentDisposition.filename("attachment; filename*=UTF-8''x%E2%80%AEtxt.exe") == "xtxt.exe")
        #expect(ContentDisposition.sanitize("\u{202E}") == nil)
    }

    @Test func longNamesKeepTheirExtensionWithin200Bytes() throws {
        let long = String(repeating: "é", count: 300) + ".tar.gz"
        let name = try #require(ContentDisposition.sanitize(long))
        #expect(name.utf8.count <= 200 && name.hasSuffix(".gz"))
        #expect(ContentDisposition.sanitize(String(repeating: "a", count: 250))?.utf8.count == 200)
    }
}
