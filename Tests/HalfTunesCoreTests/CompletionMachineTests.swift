import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite("Completion machine: verify, choose a name, record the intent, move")
struct CompletionMachineTests {
    let sum = Checksum(hex: String(repeating: "ab", count: 32))
    let other = Checksum(hex: String(repeating: "cd", count: 32))

    @Test func withoutAChecksumTheNameIsChosenThenTheIntentRecordedBeforeTheMove() {
        var (m, actions) = CompletionMachine.transferCompleted(total: 10, checksum: nil)
        #expect(actions == [.chooseName(avoiding: [])])
        #expect(m.state == .choosingName)
        #expect(m.handle(.nameChosen("/d/f.bin")) == [.recordIntent(location: "/d/f.bin"), .move(location: "/d/f.bin")])
        #expect(m.isMoving)
        #expect(m.handle(.moveEnded(.published)) == [.complete(location: "/d/f.bin")])
        #expect(m.state == .finished)
        #expect(!m.isMoving)
    }

    @Test func aMatchingDigestLeadsToTheMoveAndAnyOtherFailsWithoutMoving() {
        var (m, actions) = CompletionMachine.transferCompleted(total: 10, checksum: sum.description)
        #expect(actions == [.computeDigest])
        #expect(m.state == .verifying)
        #expect(m.handle(.nameChosen("/x")) == []) // out of order: ignored
        #expect(m.handle(.digestComputed(.success(sum))) == [.chooseName(avoiding: [])])

        var (bad, _) = CompletionMachine.transferCompleted(total: 10, checksum: sum.description)
        let failed = bad.handle(.digestComputed(.success(other)))
        guard case .fail(let error)? = failed.first else { Issue.record("expected fail, got \(failed)"); return }
        #expect(failed.count == 1)
        #expect(error.code == TaskErrorCode.checksumMismatch)
        #expect(error.message.contains(other.description) && error.message.contains(sum.description))
        #expect(bad.state == .finished)
        #expect(bad.handle(.digestComputed(.success(sum))) == []) // nothing after the end
    }

    @Test func anUnreadableFileOrChecksumFailsTheTask() {
        var (m, _) = CompletionMachine.transferCompleted(total: 1, checksum: sum.description)
        let actions = m.handle(.digestComputed(.failure(TaskError(code: TaskErrorCode.ioError, message: "EIO"))))
        guard case .fail(let error)? = actions.first else { Issue.record("\(actions)"); return }
        #expect(error.code == TaskErrorCode.ioError)
        #expect(error.message.hasPrefix("Cannot read the downloaded data to verify its checksum"))

        let (garbled, garbledActions) = CompletionMachine.transferCompleted(total: 1, checksum: "md5:zz")
        #expect(garbled.state == .finished)
        guard case .fail(let unreadable)? = garbledActions.first else { Issue.record("\(garbledActions)"); return }
        #expect(unreadable.code == TaskErrorCode.checksumMismatch)
    }

    @Test func aNameTakenAtTheMoveIsAvoidedAndFiveTakenNamesFail() {
        var (m, _) = CompletionMachine.transferCompleted(total: 1, checksum: nil)
        var avoided: Set<String> = []
        for n in 1...CompletionMachine.maxNameAttempts {
            let name = "/d/f (\(n)).bin"
            #expect(m.handle(.nameChosen(name)) == [.recordIntent(location: name), .move(location: name)])
            let next = m.handle(.moveEnded(.destinationExists))
            avoided.insert(name)
            if n < CompletionMachine.maxNameAttempts {
                #expect(next == [.chooseName(avoiding: avoided)])
            } else {
                guard case .fail(let error)? = next.first else { Issue.record("\(next)"); return }
                #expect(error.code == TaskErrorCode.destinationConflict)
                #expect(m.state == .finished)
            }
        }
    }

    /// The daemon's bounded search found no free name: the task fails with a clear error, the file unpublished.
    @Test func noFreeNameFailsTheTaskAsAConflict() {
        var (m, _) = CompletionMachine.transferCompleted(total: 1, checksum: nil)
        let actions = m.handle(.noFreeName(near: "/d/f.bin"))
        guard case .fail(let error)? = actions.first, actions.count == 1 else { Issue.record("\(actions)"); return }
        #expect(error.code == TaskErrorCode.destinationConflict)
        #expect(error.message.contains("/d/f.bin"))
        #expect(m.state == .finished)
        #expect(m.handle(.noFreeName(near: "/d/f.bin")) == [], "finished: a stale answer changes nothing")
    }

    @Test func aFailedMoveFailsWithTheReason() {
        var (m, _) = CompletionMachine.transferCompleted(total: 1, checksum: nil)
        _ = m.handle(.nameChosen("/d/f.bin"))
        #expect(m.handle(.digestComputed(.success(sum))) == []) // stale digest while moving: ignored
        #expect(m.handle(.nameChosen("/d/g.bin")) == [])
        let actions = m.handle(.moveEnded(.failed("EROFS")))
        guard case .fail(let error)? = actions.first else { Issue.record("\(actions)"); return }
        #expect(error.code == TaskErrorCode.ioError)
        #expect(error.message.contains("/d/f.bin") && error.message.contains("EROFS"))
    }

    @Test(arguments: [PublishRecovery.published, .needsPublish, .conflict, .lost])
    func aRecordedIntentIsFinishedOnRecovery(recovery: PublishRecovery) {
        let (m, actions) = CompletionMachine.recovered(recovery, location: "/d/f.bin", total: 5)
        switch recovery {
        case .published:
            #expect(actions == [.complete(location: "/d/f.bin")])
            #expect(m.state == .finished)
        case .needsPublish, .conflict:
            // Never verified again (the intent is recorded only after verification); the name is chosen again
            // (the daemon keeps the journaled one unless something else is there now).
            #expect(actions == [.chooseName(avoiding: [])])
            #expect(m.state == .choosingName)
        case .lost:
            guard case .fail(let error)? = actions.first else { Issue.record("\(actions)"); return }
            #expect(error.code == TaskErrorCode.ioError)
        }
    }
}
