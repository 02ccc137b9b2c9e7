import Foundation
import TestOrigin

/// A throwaway certificate authority and a server certificate for 127.0.0.1 it signed, made with
/// openssl(1) in a directory of the test's, for an https TestOrigin and a daemon trusting it (`--ca-file`).
struct TestCA {
    let caCertificate: String
    let server: TestOrigin.TLSFiles

    init(in dir: String) throws {
        caCertificate = dir + "/ca.pem"
        server = TestOrigin.TLSFiles(certificate: dir + "/server.pem", privateKey: dir + "/server.key")
        let ext = dir + "/server.ext"
        try "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
            .write(toFile: ext, atomically: true, encoding: .utf8)
        let steps: [[String]] = [
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", dir + "/ca.key",
             "-out", caCertificate, "-days", "2", "-subj", "/CN=halftunesd test CA"],
            ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", server.privateKey,
             "-out", dir + "/server.csr", "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", dir + "/server.csr", "-CA", caCertificate, "-CAkey", dir + "/ca.key", "-CAcreateserial",
             "-out", server.certificate, "-days", "2", "-extfile", ext],
        ]
        for args in steps {
            let r = try runCommand("/usr/bin/openssl", args)
            guard r.status == 0 else { throw TestFailure("openssl \(args.first ?? "") failed: \(r.stderr)") }
        }
    }
}

/// A test CA in a temporary directory and an https TestOrigin serving its server certificate, for `body`; the
/// origin is shut down and the directory removed whatever `body` does.
func withSecureOrigin(_ body: (TestCA, TestOrigin) async throws -> Void) async throws {
    let certificates = try TempDir()
    defer { certificates.remove() }
    let ca = try TestCA(in: certificates.path)
    let secure = try await TestOrigin.start(tls: ca.server)
    do {
        try await body(ca, secure)
    } catch {
        try? await secure.shutdown()
        throw error
    }
    try await secure.shutdown()
}
