// Unit tests: transport and file errors map to stable TaskError codes, transient or permanent.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import AsyncHTTPClient
@testable import HalfTunesEngine
import HalfTunesProtocol
import NIOCore
import NIOHTTP1
import Testing

@Suite struct ErrorMappingTests {
    let url = "http://user@example.test:8080/path?q=1"

    @Test func transportErrors() {
        let cases: [(Error, String, Bool)] = [
            (IOError(errnoCode: ECONNREFUSED, reason: "connect"), TaskErrorCode.connectionRefused, true),
            (IOError(errnoCode: ECONNRESET, reason: "read"), TaskErrorCode.connectionLost, true),
            (IOError(errnoCode: EPIPE, reason: "write"), TaskErrorCode.connectionLost, true),
            (IOError(errnoCode: ETIMEDOUT, reason: "read"), TaskErrorCode.timedOut, true),
            (IOError(errnoCode: EHOSTUNREACH, reason: "connect"), TaskErrorCode.connectionRefused, true),
            (HTTPClientError.remoteConnectionClosed, TaskErrorCode.connectionLost, true),
            (HTTPClientError.connectTimeout, TaskErrorCode.timedOut, true),
            (HTTPClientError.redirectLimitReached, TaskErrorCode.tooManyRedirects, false),
            (HTTPClientError.redirectCycleDetected, TaskErrorCode.tooManyRedirects, false),
            (HTTPClientError.unsupportedScheme("ftp"), TaskErrorCode.invalidResponse, false),
            (HTTPClientError.emptyHost, TaskErrorCode.invalidResponse, false),
            (HTTPParserError.invalidEOFState, TaskErrorCode.connectionLost, true),
            (HTTPParserError.invalidChunkSize, TaskErrorCode.invalidResponse, true),
            (ChannelError.connectTimeout(.seconds(30)), TaskErrorCode.timedOut, true),
            (ChannelError.eof, TaskErrorCode.connectionLost, true),
        ]
        for (error, code, transient) in cases {
            let (taskError, isTransient) = ErrorMapping.classify(error, url: url)
            #expect(taskError.code == code, "\(error)")
            #expect(isTransient == transient, "\(error)")
            #expect(taskError.httpStatus == nil)
        }
        #expect(ErrorMapping.classify(IOError(errnoCode: ECONNREFUSED, reason: "connect"), url: url).error.message
            == "Connection refused by example.test:8080")
    }

    @Test func badURLsAreNamed() {
        #expect(ErrorMapping.requestBuildFailure(HTTPClientError.invalidURL, url: "gopher://x/y").message
            == "Invalid URL 'gopher://x/y': scheme 'gopher' is not supported (only http and https are)")
        #expect(ErrorMapping.requestBuildFailure(HTTPClientError.invalidURL, url: "just words").message
            == "Invalid URL 'just words': it has no scheme (only http and https are)")
    }

    @Test func fileErrors() {
        let full = FileIOError(operation: "write", path: "/d/f.partial", errno: ENOSPC)
        #expect(full.taskError.code == TaskErrorCode.diskFull)
        #expect(full.isTransient)
        #expect(full.description.hasPrefix("Cannot write '/d/f.partial': "))
        let quota = FileIOError(operation: "write", path: "/d/f.partial", errno: EDQUOT)
        #expect(quota.taskError.code == TaskErrorCode.diskFull)
        let big = FileIOError(operation: "write", path: "/d/f.partial", errno: EFBIG)
        #expect(big.taskError.code == TaskErrorCode.fileTooLarge)
        #expect(big.isTransient)
        let denied = FileIOError(operation: "open", path: "/d/f.partial", errno: EACCES)
        #expect(denied.taskError.code == TaskErrorCode.ioError)
        #expect(!denied.isTransient)
        #expect(denied.taskError.message.contains(String(cString: strerror(EACCES))))
    }
}
