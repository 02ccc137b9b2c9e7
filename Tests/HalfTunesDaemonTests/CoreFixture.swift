import Foundation
@testable import HalfTunesDaemon
import HalfTunesEngine
@testable import HalfTunesJournal
import Logging
import NIOPosix

/// Runs `body` with a recovered `DaemonCore` on a journal in a temporary directory (`prepare` edits the journal
/// before the core opens it), for tests of the runner without a process; then shuts everything down and removes the
/// directory.
func withCore(_ label: String, prepare: (Journal) async throws -> Void = { _ in },
              _ body: (DaemonCore, Journal) async throws -> Void) async throws {
    let dir = NSTemporaryDirectory() + "htd-\(label)-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let journal = try Journal(path: dir + "/journal.sqlite")
    try await prepare(journal)
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let clients = try HTTPClients(eventLoopGroup: group, caFile: nil)
    let config = DaemonConfiguration(socketPath: dir + "/control.sock", stateDirectory: dir,
                                     downloadsDirectory: dir + "/dl", maxConcurrent: 1)
    let core = DaemonCore(configuration: config, journal: journal, clients: clients, logger: Logger(label: label))
    var failure: (any Error)?
    do {
        try await core.recover()
        try await body(core, journal)
    } catch {
        failure = error
    }
    await core.shutdown()
    await clients.shutdown()
    try await group.shutdownGracefully()
    if let failure { throw failure }
    if journal.takesWrites { try journal.close() } // a body may have closed it
}
