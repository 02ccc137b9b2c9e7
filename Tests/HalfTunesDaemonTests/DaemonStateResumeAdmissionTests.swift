import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// task.create from resume data, as the state admits it: the kept ranges clipped to what the partial holds, byte 0
/// (and the partial removed) when it is gone or empty, the owner's disk share not checked again, and the moved
/// partial removed when the batch is withdrawn.
@Suite("DaemonState: admitting a create from resume data")
struct DaemonStateResumeAdmissionTests {
    typealias A = DaemonStateAdmissionTests

    static let kept = ByteRanges([0..<100, 200..<300])

    static func resuming(length: Int64?, disk: DaemonState.DiskShare? = nil) -> DaemonState.NewTask {
        var new = A.new("a", "/d/file") // its partial: /d/.file.partial
        new.disk = disk
        var token = ResumeTokenRecord(token: "old-token", session: "a", url: "http://127.0.0.1:9/new",
                                      partialPath: "/d/.old.partial", destination: "/d/old", ranges: kept, createdAt: 0)
        token.etag = "\"v1\""
        token.lastModified = "Tue, 24 Nov 2026 10:00:00 GMT"
        token.bytesExpected = 1_000
        new.resume = DaemonState.ResumeOffer(token: token, partialLength: length)
        return new
    }

    @Test func theKeptRangesAreClippedToWhatThePartialHolds() throws {
        var state = A.state()
        let whole = state.handle(.admitting(Self.resuming(length: 300)), now: 0)
        #expect(try #require(A.admission(whole)).resumed == Self.kept)
        let cut = state.handle(.admitting(Self.resuming(length: 250)), now: 0)
        #expect(try #require(A.admission(cut)).resumed == ByteRanges([0..<100, 200..<250]), "only what the file holds")
        #expect(A.admission(state.handle(.admitting(A.new("a", "/d/other")), now: 0))?.resumed == nil, "no resume data")
    }

    /// The admitted row continues from the clipped ranges with the token's validators and length (the partial's
    /// bytes are of that version of the resource); a partial the runner could not move leaves it at byte 0, with
    /// none of them, and the token's partial goes.
    @Test func theAdmittedRowContinuesWithTheTokensValidatorsUnlessThePartialIsNotMoved() throws {
        var state = A.state()
        _ = try #require(A.admission(state.handle(.admitting(Self.resuming(length: 250)), now: 0)))
        let row = try #require(state.admitted.rows.first?.record)
        #expect(row.durableRanges == ByteRanges([0..<100, 200..<250]) && row.bytesExpected == 1_000)
        #expect(row.etag == "\"v1\"" && row.lastModified == "Tue, 24 Nov 2026 10:00:00 GMT")
        _ = try #require(A.admission(state.handle(.admitting(A.new("a", "/d/plain")), now: 0)))
        #expect(state.admitted.rows.last?.record.etag == nil && state.admitted.rows.last?.record.durableRanges.isEmpty == true)
        #expect(state.handle(.resumePartialNotMoved(partial: "/d/.old.partial", into: "/d/.file.partial"), now: 0)
                == [.removePartial(path: "/d/.old.partial")])
        let reset = try #require(state.admitted.rows.first?.record)
        #expect(reset.durableRanges.isEmpty && reset.etag == nil && reset.lastModified == nil && reset.bytesExpected == nil)
        #expect(state.admitted.partials.isEmpty)
        _ = state.handle(.created(A.stored(state, ids: [3, 4])), now: 1)
        #expect(state.tasks[3]?.partialMayExist == false && state.tasks[3]?.bytesReceived == 0)
    }

    @Test func aPartialGoneOrEmptyStartsFromZeroAndWhatIsLeftGoes() throws {
        var state = A.state()
        for length in [nil, Int64(0)] {
            let actions = state.handle(.admitting(Self.resuming(length: length)), now: 0)
            #expect(actions.count == 2 && actions.last == .removePartial(path: "/d/.old.partial"), "\(actions)")
            guard case .admitted(let admission)? = actions.first else { Issue.record("not admitted: \(actions)"); continue }
            #expect(admission.resumed == nil)
        }
        #expect(state.admitted.partials.isEmpty, "nothing was moved for them")
    }

    @Test func resumeDataIsNotRefusedForTheDiskItHoldsAlready() throws {
        var state = A.state()
        let full = DaemonState.DiskShare(held: 1000, limit: 1000)
        #expect(A.refusal(state.handle(.admitting({ var n = A.new("a", "/d/new"); n.disk = full; return n }()), now: 0))
                == .diskFull(1, held: 1000, limit: 1000))
        #expect(A.admission(state.handle(.admitting(Self.resuming(length: 300, disk: full)), now: 0))?.resumed == Self.kept)
    }

    @Test func aWithdrawnBatchRemovesThePartialsMovedForIt() {
        var state = A.state()
        _ = state.handle(.admitting(Self.resuming(length: 300)), now: 0)
        _ = state.handle(.admitting(A.new("a", "/d/plain")), now: 0)
        #expect(state.handle(.admissionsWithdrawn, now: 1) == [.removePartial(path: "/d/.file.partial")])
        #expect(state.admitted.isEmpty && state.admitted.partials.isEmpty)
        // Created instead: nothing of the batch is withdrawn any more.
        _ = state.handle(.admitting(Self.resuming(length: 300)), now: 2)
        _ = state.handle(.created([]), now: 2)
        #expect(state.handle(.admissionsWithdrawn, now: 3).isEmpty)
    }

    /// A task whose path received resume data's partial has a file to remove on cancel, whatever ranges it
    /// continues from; the batch's other tasks, never started, have none.
    @Test func aTaskGivenResumeDatasPartialHasOneToRemove() {
        var state = DaemonStateTests.state()
        _ = state.handle(.admitting(Self.resuming(length: 300)), now: 0)
        let moved = DaemonStateTests.task(7, session: "a", owner: 1) // bare ranges: only the moved file says so
        let moveTarget = { var t = moved; t.record.partialPath = "/d/.file.partial"; return t }()
        let plain = DaemonStateTests.task(8, session: "a", owner: 1)
        _ = state.join([moveTarget, plain], now: 1)
        #expect(state.tasks[7]?.partialMayExist == true && state.tasks[8]?.partialMayExist == false)
        #expect(state.handle(.task(7, .cancel(keepPartial: false)), now: 2).contains(.removePartial(path: "/d/.file.partial")))
        #expect(!state.handle(.task(8, .cancel(keepPartial: false)), now: 2)
            .contains { if case .removePartial = $0 { true } else { false } })
    }

    /// The batch's insert fails: the partial resume data brought goes, even when the ranges it continues from are
    /// empty (the kept ones lay past what the file held); a task that brought none has nothing to remove.
    @Test func aFailedInsertRemovesThePartialResumeDataBrought() {
        var state = DaemonStateTests.state()
        _ = state.handle(.admitting(Self.resuming(length: 300)), now: 0)
        var moved = DaemonStateTests.task(7, session: "a", owner: 1)
        moved.record.partialPath = "/d/.file.partial" // ranges empty: only the moved file says so
        moved.inserting = true
        var plain = DaemonStateTests.task(8, session: "a", owner: 1)
        plain.inserting = true
        _ = state.join([moved, plain], now: 1)
        let actions = state.handle(.createsJournaled([7, 8], failed: true), now: 2)
        #expect(actions.contains(.removePartial(path: "/d/.file.partial")), "\(actions)")
        #expect(!actions.contains(.removePartial(path: "/d/.8.partial")), "\(actions)")
        #expect(state.tasks[7] == nil && state.tasks[8] == nil)
    }

    @Test func aRefusedCreateLeavesTheTokensPartialAloneUnlessItCannotBeKept() {
        var state = A.state()
        _ = state.handle(.sessionInvalidating("a", cancelTasks: false), now: 0)
        #expect(A.refusal(state.handle(.admitting(Self.resuming(length: 300)), now: 1)) == .sessionInvalidated("a"))
        #expect(state.handle(.resumeTokenNotKept(owner: 1, partial: "/d/.old.partial"), now: 2) == [.removePartial(path: "/d/.old.partial")])
    }

    static func token(_ name: String, url: String = "http://127.0.0.1:9/file", session: String = "a") -> DaemonState.RedeemedToken {
        .init(record: ResumeTokenRecord(token: name, session: session, url: url, partialPath: "/d/.\(name).partial",
                                        destination: "/d/file", ranges: kept, createdAt: 0),
              owner: 1)
    }

    static func kept(_ actions: [DaemonState.Action]) -> [String] {
        actions.compactMap { if case .keepResumeToken(let t) = $0 { t.record.token } else { nil } }
    }

    /// Which redeemed tokens go back to the journal is the state's: one an admitted create used is used up; one whose
    /// create was refused (by the state or by the runner's checks) is kept again when the batch ends, after the
    /// batch's tasks joined the state, and counted for its owner again (one that cannot be written is not).
    @Test func aRedeemedTokenIsUsedUpByAnAdmittedCreateAndKeptAgainOtherwise() {
        var state = A.state()
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 3), now: 0)
        for name in ["used", "refused", "unchecked"] { _ = state.handle(.resumeTokenRedeemed(Self.token(name)), now: 0) }
        #expect(state.resumeDataHeld(by: 1) == 0, "taken from the journal")
        var used = Self.resuming(length: 300)
        used.resume?.token.token = "used"
        let admission = A.admission(state.handle(.admitting(used), now: 0))
        #expect(admission != nil)
        var refused = Self.resuming(length: 300)
        refused.resume?.token.token = "refused"
        refused.session = "gone"
        #expect(A.refusal(state.handle(.admitting(refused), now: 0)) == .sessionInvalidated("gone"))
        // "unchecked" was refused by the runner's checks: never fed as `admitting`.
        let created = state.handle(.created(A.stored(state, ids: [9])), now: 1)
        #expect(Self.kept(created) == ["refused", "unchecked"], "\(created)")
        if let first = created.firstIndex(where: { if case .keepResumeToken = $0 { true } else { false } }) {
            #expect(created[first...].allSatisfy { if case .keepResumeToken = $0 { true } else { false } }, "after the batch's own actions")
        }
        #expect(state.resumeDataHeld(by: 1) == 2)
        #expect(Self.kept(state.handle(.created([]), now: 2)).isEmpty, "kept once")
        // One the journal did not take: its partial goes, and it counts no more.
        #expect(state.handle(.resumeTokenNotKept(owner: 1, partial: "/d/.refused.partial"), now: 3)
            == [.removePartial(path: "/d/.refused.partial")])
        #expect(state.resumeDataHeld(by: 1) == 1)
    }

    /// A batch that ends without a journaled create (none admitted, or its insert not submitted) keeps its tokens
    /// again too; a token whose URL this daemon refuses is used up when redeemed, its partial with it.
    @Test func aWithdrawnBatchKeepsItsTokensAndAnUnusableOneIsUsedUp() {
        var state = A.state()
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 2), now: 0)
        _ = state.handle(.resumeTokenRedeemed(Self.token("plain")), now: 0)
        let unusable = state.handle(.resumeTokenRedeemed(Self.token("ftp", url: "ftp://127.0.0.1/file")), now: 0)
        #expect(unusable == [.removePartial(path: "/d/.ftp.partial")])
        #expect(Self.kept(state.handle(.admissionsWithdrawn, now: 1)) == ["plain"])
        #expect(Self.kept(state.handle(.admissionsWithdrawn, now: 2)).isEmpty)
        #expect(state.resumeDataHeld(by: 1) == 1, "one taken and kept again, one used up: \(state.resumeDataKept)")
    }

    /// A token's count follows the uid its resume data was made for, not its session: one whose session is deleted
    /// while the batch waits (its invalidation ended) is still counted out when redeemed, back when kept again, and
    /// out when that write fails.
    @Test func aTokensCountFollowsItsOwnerWhateverHappensToItsSession() {
        var state = A.state()
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 2), now: 0)
        _ = state.handle(.sessionRemoved("b", createdAt: 0), now: 0) // the token's session, gone meanwhile
        _ = state.handle(.resumeTokenRedeemed(Self.token("orphan", session: "b")), now: 1)
        #expect(state.resumeDataHeld(by: 1) == 1)
        #expect(Self.kept(state.handle(.admissionsWithdrawn, now: 2)) == ["orphan"])
        #expect(state.resumeDataHeld(by: 1) == 2)
        _ = state.handle(.resumeTokenNotKept(owner: 1, partial: "/d/.orphan.partial"), now: 3)
        #expect(state.resumeDataHeld(by: 1) == 1)
    }
}
