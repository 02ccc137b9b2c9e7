import Foundation
import GRDB
@testable import HalfTunesDaemon
@testable import HalfTunesJournal
import HalfTunesProtocol
import Logging
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

/// A new session is in the state from the start, while its row is written; if the row cannot be written (a
/// full disk, an I/O error: here a trigger refuses it) the session leaves the state again, and a client that
/// subscribed to it meanwhile is told (`didBecomeInvalid`) and let go instead of staying registered for an
/// identifier that may be opened again later.
@Suite struct SessionOpenFailureTests {
    @Test func aSubscriberOfANewSessionWhoseRowFailsIsLetGo() async throws {
        try await withCore("open-failure", prepare: { journal in
            try await journal.dbQueue.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER refused_by_test BEFORE INSERT ON sessions WHEN NEW.identifier LIKE '%doomed'
                    BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                    """)
            }
        }) { core, journal in
            // The row waits in the writer's queue while a client subscribes to the session.
            journal.writer.holdForTesting(true)
            let id = "1/doomed"
            let open = Task { try await core.openSession(SessionOpenParams(identifier: id), uid: 1) }
            while await !core.hasSession(id) { await Task.yield() }
            let channel = NIOAsyncTestingChannel()
            let outbox = Outbox(connectionID: 7, channel: channel, limit: 1 << 20, durability: journal.durability)
            let subscribe = Task {
                try await core.subscribe(EventsSubscribeParams(session: id, after: 0), caller: Caller(uid: 1),
                                         requestID: .int(1), outbox: outbox)
            }
            while await !core.hasSubscribers(id) { await Task.yield() }
            journal.writer.holdForTesting(false)

            await #expect(throws: RPCError.self) { try await open.value }
            try await subscribe.value
            #expect(await !core.hasSession(id))
            #expect(await !core.hasSubscribers(id), "the subscriber stays registered for a session that never existed")
            // What the client reads: the subscription's answer, then (whichever came first on the core) the session's
            // end, as the last line. Lines leave once the journal's commit before them is durable (its own thread).
            var lines: [String] = []
            var types: [String] = []
            let deadline = ContinuousClock.now + .seconds(30)
            while !types.contains("didBecomeInvalid"), ContinuousClock.now < deadline {
                await channel.testingEventLoop.run()
                while let buffer = try await channel.readOutbound(as: ByteBuffer.self) {
                    let line = String(buffer: buffer)
                    lines.append(line)
                    if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                       let type = (object["params"] as? [String: Any])?["type"] as? String {
                        types.append(type)
                    }
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(types.last == "didBecomeInvalid", "\(lines)")
            await channel.testingEventLoop.run()
            #expect(try await channel.readOutbound(as: ByteBuffer.self) == nil)
        }
    }
}

extension DaemonCore {
    func hasSession(_ identifier: String) -> Bool { state.sessions[identifier] != nil }
    func hasSubscribers(_ identifier: String) -> Bool { subscribers[identifier] != nil }
}
