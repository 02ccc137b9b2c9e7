import Foundation
@testable import HalfTunesDaemon
import HalfTunesEngine
@testable import HalfTunesJournal
import HalfTunesProtocol
import Logging
import NIOPosix
import Testing

/// A task row the journal would not even take (closed, or no longer able to make anything durable) goes to the
/// state as a row whose write failed, as a row that failed once submitted does: a finished one is written again with
/// its events, instead of the journal keeping the task unfinished for ever.
@Suite struct RowNotSubmittedTests {
    @Test func aFinishedRowTheJournalWouldNotTakeIsWrittenAgain() async throws {
        let dir = NSTemporaryDirectory() + "htd-not-submitted-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let journal = try Journal(path: dir + "/journal.sqlite")
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let clients = try HTTPClients(eventLoopGroup: group, caFile: nil)
        let config = DaemonConfiguration(socketPath: dir + "/control.sock", stateDirectory: dir,
                                         downloadsDirectory: dir + "/dl", maxConcurrent: 1)
        let core = DaemonCore(configuration: config, journal: journal, clients: clients, logger: Logger(label: "not-submitted"))
        try await core.recover()
        _ = try await core.openSession(SessionOpenParams(identifier: "1/s"), uid: 1)
        let t = try await core.createTask(TaskCreateParams(session: "1/s", url: "http://127.0.0.1:9/x"), caller: Caller(uid: 1))

        try journal.close()
        _ = try await core.cancelTask(t.id, produceResumeData: false, caller: Caller(uid: 1))
        let rewrite = try #require(await core.rowRewrite(t.id), "the refused row is to be written again")
        #expect(rewrite.finished?.record.state == .canceled)
        #expect(rewrite.finished?.payloads.contains { if case .didComplete = $0 { true } else { false } } == true,
                "with its completion, which nothing else would journal")
        await core.shutdown()
        await clients.shutdown()
        try await group.shutdownGracefully()
    }
}

extension DaemonCore {
    func rowRewrite(_ id: Int64) -> DaemonState.RowRewrite? { state.rowRewrites[id] }
}
