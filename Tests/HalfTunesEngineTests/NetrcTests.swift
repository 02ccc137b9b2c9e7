// Unit tests: netrc files as curl and wget read them.
@testable import HalfTunesEngine
import HalfTunesProtocol
import Testing

@Suite struct NetrcTests {
    @Test func machinesDefaultAndTheFirstEntryWins() {
        let netrc = Netrc.parse("""
            machine files.example.org login alice password s3cret
            machine FILES.example.org login mallory password later
            # a comment-looking word is just skipped
            machine mirror.example
              login bob
              account ignored
              password "two words \\"quoted\\""
            default login anonymous password guest@example.org
            """)
        #expect(netrc.credentials(for: "files.example.org") == Credentials(user: "alice", password: "s3cret"))
        #expect(netrc.credentials(for: "Files.Example.Org") == Credentials(user: "alice", password: "s3cret"))
        #expect(netrc.credentials(for: "mirror.example") == Credentials(user: "bob", password: "two words \"quoted\""))
        #expect(netrc.credentials(for: "elsewhere") == Credentials(user: "anonymous", password: "guest@example.org"))
    }

    @Test func macrosEntriesWithoutLoginAndNoDefault() {
        let netrc = Netrc.parse("""
            macdef init
            cd /pub
            machine fake login no password no

            machine a.example password only
            machine b.example login carol
            """)
        #expect(netrc.credentials(for: "fake") == nil, "a macro's body is not an entry")
        #expect(netrc.credentials(for: "a.example") == nil, "no login: no credentials")
        #expect(netrc.credentials(for: "b.example") == Credentials(user: "carol", password: ""))
        #expect(netrc.credentials(for: "c.example") == nil)
        #expect(Netrc.parse("").credentials(for: "x") == nil)
    }

    @Test func whereTheFileIs() {
        #expect(Netrc.defaultPath(environment: ["NETRC": "/etc/n", "HOME": "/home/a"]) == "/etc/n")
        #expect(Netrc.defaultPath(environment: ["HOME": "/home/a"]) == "/home/a/.netrc")
        #expect(Netrc.defaultPath(environment: [:]) == nil)
    }
}
