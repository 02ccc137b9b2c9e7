import HalfTunesCore
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The end of a download through the core's state: verify, choose a name, record the intent, move, and what
/// suspend, cancel, a taken name, a bad digest and stale results do meanwhile — in virtual time, no files.
@Suite("DaemonState: the end of a download")
struct DaemonStateCompletionTests {
    typealias S = DaemonStateTests
    static let one = DaemonState.SlotLimits(maxConcurrent: 1, maxConnectionsPerHost: 8)
    static let validators = Validators(etag: "\"e1\"", lastModified: nil)
    /// The host every test task downloads from (`DaemonStateTests.task`).
    static let host = "http://127.0.0.1:9"

    /// What a test task's published file is given: its origin (no Referer, no Last-Modified in these tests).
    static func metadata(_ id: Int64) -> PublishMetadata { PublishMetadata(originURL: "\(host)/\(id)") }

    /// Task 1 running (its transfer about to deliver every byte), task 2 queued behind it (one slot).
    static func running(checksum: String? = nil) throws -> DaemonState {
        var state = S.state()
        var first = S.task(1, session: "a", owner: 1)
        first.record.checksum = checksum
        #expect(try S.resumeAll(&state, [first, S.task(2, session: "a", owner: 1)], limits: one) == [1])
        return state
    }

    static func intent(_ actions: [DaemonState.Action]) -> TaskRecord? {
        for case let .journal(row, payloads) in actions where row.phase == .publishing && payloads.isEmpty { return row }
        return nil
    }

    @Test func aCompleteTransferIsNamedRecordedMovedThenCompletedAndFreesItsSlot() throws {
        var state = try Self.running()
        var actions = state.handle(.attemptEnded(1, .completed(totalBytes: 100, validators: Self.validators),
                                                     jitterSample: 0.5), now: 10)
        // No checksum: no journal write yet (the intent records the length). Still running, publishing, but
        // its transfer slot goes to task 2 at once.
        #expect(actions == [.chooseName(1, attempt: 1, preferred: "/d/1", destination: "/d/1", avoiding: []), .journal(state.tasks[2]!.record,
                                                                                  [.stateChanged(state: .running, previous: .queued, reason: nil)]),
                            .startAttempt(2), .hostAllowance(Self.host, extras: 7)]) // nothing queued for it now
        #expect(state.tasks[1]?.machine.state == .running && state.tasks[1]?.record.bytesDurable == 100)
        #expect(state.completionPhase(1) == .publishing && state.tasks.running == [2])
        #expect(state.tasks.count(in: .running) == 2)

        actions = state.handle(.completion(1, attempt: 1, .nameChosen("/d/1")), now: 11)
        let row = try #require(Self.intent(actions))
        #expect(row.location == "/d/1" && row.bytesDurable == 100 && row.bytesExpected == 100)
        #expect(actions.last == .move(1, attempt: 1, partial: "/d/.1.partial", location: "/d/1", replacing: false,
                                      partialIsDurable: true, metadata: Self.metadata(1)))
        #expect(state.isMoving(1))
        // While the file moves, lifecycle inputs are not taken: a client's suspend or cancel is held (the runner
        // feeds it again once the move has ended), anything else is ignored; the task is left as it was.
        let moving = state.tasks[1]
        #expect(state.handle(.task(1, .suspend), now: 12) == [.heldWhileMoving(task: 1)])
        #expect(state.handle(.task(1, .cancel(keepPartial: false)), now: 12) == [.heldWhileMoving(task: 1)])
        #expect(state.handle(.task(1, .cancel(keepPartial: true)), now: 12) == [.heldWhileMoving(task: 1)])
        #expect(state.handle(.task(1, .resume), now: 12).isEmpty)
        #expect(state.tasks[1] == moving && state.isMoving(1) && state.resumeDataBeingMade.isEmpty)
        #expect(state.handle(.clockTick, now: 1e12) == [.pruneResumeData(createdBefore: 1e12 - DaemonState.Caps().resumeDataLifetime)], "only housekeeping: nothing of the task")

        actions = state.handle(.completion(1, attempt: 1, .moveEnded(.published)), now: 13)
        #expect(S.journaled(actions, 1) == [.stateChanged(state: .completed, previous: .running, reason: nil),
                                            .didFinishDownloading(location: "/d/1"), .didComplete(error: nil)])
        #expect(actions.contains(.completionEnded(1, location: "/d/1", error: nil)))
        #expect(S.started(actions).isEmpty) // its slot was given away when the transfer ended
        #expect(state.tasks[1] == nil && state.completions.isEmpty && !state.isMoving(1))
        #expect(state.completionPhase(1) == nil && state.tasks.running == [2])
        #expect(state.tasks.count(in: .completed) == 1)
        // The held suspend, fed again, acts on the state the move left: the task is finished (the runner answers
        // it from the journal's row as `finishedTask`).
        #expect(state.handle(.task(1, .suspend), now: 14).isEmpty)
    }

    /// A name taken between the choice and the move: choose again avoiding it (the intent is recorded again).
    /// `overwrite`: the client's destination is the name, chosen by the state (no look at the file system); the
    /// move replaces what is there.
    @Test func anOverwritingDownloadIsPublishedAtItsOwnDestination() throws {
        var state = try Self.running()
        var t = try #require(state.tasks[1])
        t.record.overwrite = true // as task.create made its row
        state.tasks[1] = t
        let actions = state.handle(.attemptEnded(1, .completed(totalBytes: 100, validators: Self.validators),
                                                 jitterSample: 0.5), now: 10)
        #expect(!actions.contains { if case .chooseName = $0 { true } else { false } })
        #expect(Self.intent(actions)?.location == "/d/1")
        #expect(actions.contains(.move(1, attempt: 1, partial: "/d/.1.partial", location: "/d/1", replacing: true,
                                       partialIsDurable: true, metadata: Self.metadata(1))))
    }

    @Test func aNameTakenMeanwhileIsChosenAgain() throws {
        var state = try Self.running()
        _ = state.handle(.attemptEnded(1, .completed(totalBytes: 100, validators: Self.validators),
                                           jitterSample: 0.5), now: 10)
        _ = state.handle(.completion(1, attempt: 1, .nameChosen("/d/1")), now: 11)
        var actions = state.handle(.completion(1, attempt: 1, .moveEnded(.destinationExists)), now: 12)
        #expect(actions == [.chooseName(1, attempt: 1, preferred: "/d/1", destination: "/d/1", avoiding: ["/d/1"])] && !state.isMoving(1))
        actions = state.handle(.completion(1, attempt: 1, .nameChosen("/d/1 (1)")), now: 13)
        #expect(Self.intent(actions)?.location == "/d/1 (1)" && state.isMoving(1))
        actions = state.handle(.completion(1, attempt: 1, .moveEnded(.failed("EIO"))), now: 14)
        let error = try #require(S.completionError(actions, 1))
        #expect(error.code == TaskErrorCode.ioError)
        #expect(actions.contains(.completionEnded(1, location: nil, error: error)) && S.started(actions).isEmpty)
        // Failed: the partial is discarded, the row leaves phase publishing.
        #expect(actions.contains(.removePartial(path: "/d/.1.partial")))
        guard case let .journal(row, _)? = actions.first(where: { if case .journal = $0 { true } else { false } }) else {
            Issue.record("no journal write")
            return
        }
        #expect(row.phase == .transfer && row.location == nil && row.state == .failed)
    }

    /// With a checksum: the length is journaled before verifying; a mismatch fails the task and discards the
    /// data, and a digest that arrives after a suspend is stale and dropped.
    @Test func verificationJournalsTheLengthFirstAndAMismatchFails() throws {
        let good = Checksum(hex: String(repeating: "ab", count: 32))
        var state = try Self.running(checksum: good.description)
        var actions = state.handle(.attemptEnded(1, .completed(totalBytes: 3, validators: Self.validators),
                                                     jitterSample: 0.5), now: 10)
        guard case let .journal(row, [])? = actions.first else {
            Issue.record("the length was not journaled first: \(actions)")
            return
        }
        #expect(row.bytesDurable == 3 && row.phase == .transfer)
        #expect(actions[1] == .computeDigest(1, attempt: 1, path: "/d/.1.partial") && S.started(actions) == [2])
        #expect(state.completionPhase(1) == .verifying)

        actions = state.handle(.completion(1, attempt: 1, .digestComputed(.success(Checksum(hex: String(repeating: "cd", count: 32))))),
                                   now: 11)
        #expect(S.completionError(actions, 1)?.code == TaskErrorCode.checksumMismatch)
        #expect(actions.contains(.removePartial(path: "/d/.1.partial")) && S.started(actions).isEmpty)

        // Task 2 completes its transfer, is suspended while verifying: the late digest changes nothing.
        actions = state.handle(.attemptEnded(2, .completed(totalBytes: 3, validators: Self.validators),
                                                 jitterSample: 0.5), now: 12)
        #expect(actions == [.chooseName(2, attempt: 1, preferred: "/d/2", destination: "/d/2", avoiding: []), .hostAllowance(Self.host, extras: 0)]) // no checksum on task 2
        _ = state.handle(.task(2, .suspend), now: 13)
        #expect(state.completions[2] == nil && state.tasks[2]?.machine.state == .suspended)
        #expect(state.tasks[2]?.completing == false) // resumed later, it takes a slot again
        #expect(state.handle(.completion(2, attempt: 1, .nameChosen("/d/2")), now: 14).isEmpty)
    }

    /// A running download of session "a" whose journaled publish intent names `location`.
    static func publishing(_ id: Int64, location: String) -> ManagedTask {
        var t = S.task(id, session: "a", owner: 1)
        t.machine = TaskStateMachine(state: .running)
        t.record.state = .running
        t.record.phase = .publishing
        t.record.location = location
        return t
    }

    /// Recovery of a journaled intent: published → completed; the file gone → failed; still to publish → named.
    @Test(arguments: [PublishRecovery.published, .lost, .needsPublish])
    func aRecoveredIntentIsFinished(_ recovery: PublishRecovery) throws {
        var state = S.state()
        _ = state.join([Self.publishing(1, location: "/d/1")], now: 0)
        let actions = state.handle(.recoveredCompletion(1, recovery, totalBytes: 5), now: 1)
        switch recovery {
        case .published:
            #expect(actions.contains(.completionEnded(1, location: "/d/1", error: nil)) && state.tasks.count(in: .completed) == 1)
        case .lost:
            #expect(S.completionError(actions, 1)?.code == TaskErrorCode.ioError)
        default:
            #expect(actions == [.chooseName(1, attempt: 0, preferred: "/d/1", destination: "/d/1", avoiding: []), .hostAllowance(Self.host, extras: 0)] && state.completions[1] != nil)
        }
    }

    /// Which restored tasks finish a publish is the state's: one whose row says `publishing` asks the runner to look
    /// at its file (at its chosen location, else its destination), and nothing else happens to it until the answer;
    /// a running one in the transfer phase is queued again instead. Without the partial's length, its durable bytes
    /// count.
    @Test func aRestoredPublishAsksTheRunnerToLookAtItsFile() {
        var state = S.state()
        var t = Self.publishing(1, location: "/d/1 (2)")
        t.record.durableRanges = ByteRanges(prefix: 7)
        #expect(state.handle(.taskRestored(t.record), now: 0) == [.recoverPublish(1, partial: "/d/.1.partial", location: "/d/1 (2)"),
                                                           .hostAllowance(Self.host, extras: 7)]) // counted running until published
        var other = S.task(2, session: "a", owner: 1)
        other.machine = TaskStateMachine(state: .running)
        other.record.state = .running
        let restored = state.handle(.taskRestored(other.record), now: 0)
        #expect(!restored.contains { if case .recoverPublish = $0 { true } else { false } })
        #expect(state.tasks[2]?.machine.state == .queued)
        _ = state.handle(.recoveredCompletion(1, .needsPublish, totalBytes: nil), now: 1)
        #expect(state.completions[1]?.machine.total == 7)
    }

    /// What the published file is given and where it goes first are the state's: the origin URL without its
    /// credentials, the task's Referer, the response's Last-Modified unless the session keeps the write's time; the
    /// journaled location (a name the response gave) before the destination.
    @Test func theMoveCarriesTheFilesMetadataAndTheNameTheLocationFirst() {
        var config = SessionConfiguration()
        config.preserveModificationTime = false
        let state = S.state(sessions: [("a", 1, .init()), ("b", 2, config)])
        var t = S.task(1, session: "a", owner: 1)
        t.record.url = "http://user:secret@127.0.0.1:9/1"
        t.record.headers = ["Referer": "http://127.0.0.1:9/page"]
        t.record.lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        #expect(state.publishMetadata(of: t) == PublishMetadata(originURL: "http://127.0.0.1:9/1",
                                                                 referrerURL: "http://127.0.0.1:9/page",
                                                                 modificationTime: 784_111_777))
        t.record.session = "b"
        #expect(state.publishMetadata(of: t).modificationTime == nil, "the session keeps the write's time")
        t.record.kind = TaskKind.data.rawValue
        #expect(state.publishMetadata(of: t) == PublishMetadata())

        var named = Self.publishing(1, location: "/d/1 (2)")
        named.record.phase = .transfer
        var restored = S.state()
        _ = restored.join([named], now: 0)
        restored.tasks[1]?.record.phase = .publishing
        let actions = restored.handle(.recoveredCompletion(1, .needsPublish, totalBytes: 5), now: 1)
        #expect(actions.contains(.chooseName(1, attempt: 0, preferred: "/d/1 (2)", destination: "/d/1", avoiding: [])), "\(actions)")
        #expect(restored.isReserved("/d/1", byAnotherThan: 2) && !restored.isReserved("/d/1", byAnotherThan: 1))
    }
}
