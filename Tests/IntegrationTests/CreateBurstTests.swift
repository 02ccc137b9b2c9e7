import Foundation
import GRDB
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// task.create requests pipelined in one burst are made together (one journal transaction); each is still
/// checked as if the ones before it existed, and answered on its own, in order (issue 11).
@Suite("task.create in bursts")
struct CreateBurstTests {
    @Test func createsInOneBurstSeeEachOtherAndAreAnsweredInOrder() async throws {
        try await withDaemon(["--max-tasks-per-session", "5"]) { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("burst")
            func create(_ id: Int, _ params: String) -> String {
                #"{"jsonrpc":"2.0","id":\#(id),"method":"task.create","params":{"session":"burst",\#(params)}}"# + "\n"
            }
            let song = origin.url("/music/song.mp3")
            let lines = [
                create(1, #""url":"\#(origin.url("/a"))","destination":"a""#),
                create(2, #""url":"\#(origin.url("/b"))","destination":"a""#),  // taken by request 1
                create(3, #""url":"ftp://127.0.0.1/x""#),                         // refused: not http(s)
                create(4, #""url":"\#(song)""#),                                  // song.mp3
                create(5, #""url":"\#(song)""#),                                  // song (1).mp3: 4 holds the name
                #"{"jsonrpc":"2.0","id":6,"method":"daemon.status"}"# + "\n",
                create(7, #""url":"\#(origin.url("/c1"))","destination":"c1""#),
                create(8, #""url":"\#(origin.url("/c2"))","destination":"c2","description":"\#(String(repeating: "d", count: 5000))""#),
                create(9, #""url":"\#(origin.url("/c3"))","destination":"c3""#),
                create(10, #""url":"\#(origin.url("/c4"))","destination":"c4""#), // the session's 6th: over the cap of 5
            ]
            let s = try RawSocket(path: daemon.socketPath)
            try s.send(lines.joined())
            var answers: [[String: Any]] = []
            for _ in lines { answers.append(try #require(try s.readObject())) }
            #expect(answers.map { $0["id"] as? Int } == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
            func destination(_ answer: [String: Any]) -> String? {
                ((answer["result"] as? [String: Any])?["destination"] as? String).map { ($0 as NSString).lastPathComponent }
            }
            #expect(destination(answers[0]) == "a")
            #expect(answers[1].errorCode == RPCErrorCode.destinationConflict.rawValue, "\(answers[1])")
            #expect(answers[2].errorCode == RPCErrorCode.invalidParams.rawValue, "\(answers[2])")
            #expect(destination(answers[3]) == "song.mp3")
            #expect(destination(answers[4]) == "song (1).mp3")
            #expect(answers[5]["result"] != nil)
            #expect(destination(answers[6]) == "c1")
            #expect(answers[7].errorCode == RPCErrorCode.invalidParams.rawValue, "\(answers[7])") // description too long
            #expect(destination(answers[8]) == "c3")
            #expect(answers[9].errorCode == RPCErrorCode.limitExceeded.rawValue, "\(answers[9])")

            // Exactly the five answered with a task exist, journaled: they survive kill -9.
            let created = Set(answers.compactMap { ($0["result"] as? [String: Any])?["id"] as? Int }.map(Int64.init))
            #expect(created.count == 5)
            #expect(Set(try client.tasks(session: "burst").map(\.id)) == created)
            daemon.kill9()
            try daemon.restart()
            let after = try daemon.client().tasks(session: "burst")
            #expect(Set(after.map(\.id)) == created)
            #expect(Set(after.map { ($0.destination as NSString).lastPathComponent }) == ["a", "song.mp3", "song (1).mp3", "c1", "c3"])
        }
    }

    /// A create whose journal write fails (a trigger added to the live daemon's journal refuses the row, as a
    /// full disk would) is answered `ioError`, and nothing of it is left: no task in the list or the counts, no
    /// request to the server (nothing starts before its row is written), its destination free again, no event
    /// of it reaches a subscriber (its events were numbered and sent before the write failed: the connection
    /// drops them); the daemon goes on, and after kill -9 only what was answered as created exists.
    @Test func aCreateWhoseRowCannotBeWrittenFailsAndLeavesNothing() async throws {
        try await withDaemon() { daemon, origin in
            origin.put("/kept.bin", TestOrigin.randomBytes(count: 1000, seed: 701))
            origin.put("/refused.bin", TestOrigin.randomBytes(count: 1000, seed: 702))
            let client = try daemon.client()
            _ = try client.openSession("refuse")
            let kept = try client.createTask(TaskCreateParams(session: "refuse", url: origin.url("/kept.bin"), destination: "kept"))
            let recorder = try EventRecorder(client: try daemon.client(), session: "refuse", after: 0)
            try recorder.wait(for: "the kept task's creation") { $0.task == kept.id }
            let journal = try DatabaseQueue(path: daemon.stateDir + "/journal.sqlite")
            try await journal.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER refused_by_test BEFORE INSERT ON tasks WHEN NEW.url LIKE '%/refused.bin'
                    BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                    """)
            }
            try journal.close()
            let refused = #"{"jsonrpc":"2.0","id":1,"method":"task.create","params":{"session":"refuse","url":"\#(origin.url("/refused.bin"))","destination":"r","start":true}}"#
            let s = try RawSocket(path: daemon.socketPath)
            try s.send(refused + "\n")
            let answer = try #require(try s.readObject())
            #expect(answer.errorCode == RPCErrorCode.ioError.rawValue, "\(answer)")
            #expect(((answer["error"] as? [String: Any])?["message"] as? String)?.contains("could not be written") == true)
            #expect(try client.tasks(session: "refuse").map(\.id) == [kept.id])
            #expect(try client.status().tasks.filter { $0.value > 0 } == ["suspended": 1])
            #expect(origin.requests("/refused.bin").isEmpty)

            // The destination it took is free again, and the daemon goes on creating and downloading.
            let again = try client.createTask(TaskCreateParams(session: "refuse", url: origin.url("/kept.bin"),
                                                               destination: "r", start: true))
            #expect((again.destination as NSString).lastPathComponent == "r")
            #expect(again.id > kept.id)
            _ = try client.waitFor(task: again.id, state: .completed)
            // The subscriber saw the two tasks that exist, the second to its end, and nothing of the refused one
            // (its id lies between theirs: ids are never handed out twice).
            try recorder.wait(for: "the second task's completion") {
                $0.task == again.id && $0.isDidComplete
            }
            #expect(Set(recorder.all.compactMap(\.task)) == [kept.id, again.id], "\(recorder.all)")
            #expect(again.id > kept.id + 1) // the refused create took an id of its own
            daemon.kill9()
            try daemon.restart()
            #expect(Set(try daemon.client().tasks(session: "refuse").map(\.id)) == [kept.id, again.id])
        }
    }
}
