import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite("Task state machine")
struct TaskStateMachineTests {
    typealias M = TaskStateMachine
    let boom = TaskError(code: TaskErrorCode.connectionLost, message: "dropped")

    func machine(_ state: TaskState, deadline: Double? = nil) -> M {
        M(state: state, resourceDeadline: deadline)
    }

    @Test func newTasksStartSuspendedUnlessAskedToStart() {
        let (suspended, a1) = M.created(start: false, resourceDeadline: nil)
        #expect(suspended.state == .suspended)
        #expect(a1 == [.emitStateChanged(from: nil, to: .suspended, reason: nil)])
        let (queued, a2) = M.created(start: true, resourceDeadline: nil)
        #expect(queued.state == .queued)
        #expect(a2.contains(.enqueue))
        #expect(a2.last == .emitStateChanged(from: .suspended, to: .queued, reason: nil))
    }

    @Test func resumeQueuesThenSlotStartsTransfer() throws {
        var m = machine(.suspended)
        #expect(try m.handle(.resume, now: 0) == [.enqueue, .emitStateChanged(from: .suspended, to: .queued, reason: nil)])
        #expect(try m.handle(.slotGranted, now: 0) == [.startTransfer, .emitStateChanged(from: .queued, to: .running, reason: nil)])
        #expect(m.state == .running)
        // resume is a no-op on queued and running tasks
        #expect(try m.handle(.resume, now: 0) == [])
    }

    @Test func suspendFromEveryActiveState() throws {
        var running = machine(.running)
        #expect(try running.handle(.suspend, now: 0).first == .stopTransfer)
        #expect(running.state == .suspended)
        var queued = machine(.queued)
        #expect(try queued.handle(.suspend, now: 0) == [.emitStateChanged(from: .queued, to: .suspended, reason: nil)])
        var waiting = machine(.waiting)
        #expect(try waiting.handle(.suspend, now: 0) == [.emitStateChanged(from: .waiting, to: .suspended, reason: nil)])
        var suspended = machine(.suspended)
        #expect(try suspended.handle(.suspend, now: 0) == [])
    }

    @Test func cancelEndsEveryLiveStateWithCanceledError() throws {
        for state in [TaskState.suspended, .queued, .running, .waiting] {
            var m = machine(state)
            let actions = try m.handle(.cancel(keepPartial: false), now: 0)
            #expect(m.state == .canceled)
            #expect(m.error?.code == TaskErrorCode.canceled)
            #expect(actions.contains(.discardPartial))
            #expect(actions.last == .emitComplete(error: m.error))
            if state == .running { #expect(actions.first == .stopTransfer) }
        }
        var keep = machine(.running)
        let actions = try keep.handle(.cancel(keepPartial: true), now: 0)
        #expect(actions.contains(.keepPartialForResumeData))
        #expect(!actions.contains(.discardPartial))
    }

    @Test func terminalStatesRefuseClientChanges() {
        for state in [TaskState.completed, .failed, .canceled] {
            for input in [M.Input.resume, .suspend, .cancel(keepPartial: false), .slotGranted] {
                var m = machine(state)
                #expect(throws: M.IllegalTransition.self) { try m.handle(input, now: 0) }
                #expect(m.state == state)
            }
        }
    }

    @Test func internalInputsOnlyFromTheRightStates() {
        var suspended = machine(.suspended)
        #expect(throws: M.IllegalTransition.self) { try suspended.handle(.slotGranted, now: 0) }
        #expect(throws: M.IllegalTransition.self) { try suspended.handle(.completed, now: 0) }
        var queued = machine(.queued)
        #expect(throws: M.IllegalTransition.self) {
            try queued.handle(.transferFailed(TaskError(code: "x", message: "x"), transient: true, retryAfter: nil), now: 0)
        }
    }

    @Test func completionEmitsStateThenComplete() throws {
        var m = machine(.running)
        let actions = try m.handle(.completed, now: 5)
        #expect(actions == [.emitStateChanged(from: .running, to: .completed, reason: nil), .emitComplete(error: nil)])
        #expect(m.error == nil)
    }

    @Test func transientFailureWaitsWithExponentialBackoff() throws {
        var m = M(state: .running, backoff: Backoff(initial: 1, maximum: 60, jitter: 0.2))
        var delays: [Double] = []
        for _ in 0..<8 {
            let actions = try m.handle(.transferFailed(boom, transient: true, retryAfter: nil), now: 100)
            #expect(m.state == .waiting)
            #expect(m.waitingReason == boom)
            guard case .scheduleRetry(let at)? = actions.first else { Issue.record("no retry scheduled"); return }
            delays.append(at - 100)
            #expect(m.nextAttemptAt == at)
            _ = try m.handle(.retryDue, now: at)
            #expect(m.state == .queued)
            _ = try m.handle(.slotGranted, now: at)
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60])
        // progress resets the backoff
        _ = try m.handle(.madeProgress, now: 0)
        _ = try m.handle(.transferFailed(boom, transient: true, retryAfter: nil), now: 0)
        #expect(m.nextAttemptAt == 1)
    }

    @Test func retryAfterIsHonouredAndClamped() throws {
        var m = machine(.running)
        _ = try m.handle(.transferFailed(boom, transient: true, retryAfter: 30), now: 0)
        #expect(m.nextAttemptAt == 30)
        _ = try m.handle(.retryDue, now: 30)
        _ = try m.handle(.slotGranted, now: 30)
        _ = try m.handle(.transferFailed(boom, transient: true, retryAfter: 1_000_000), now: 30)
        #expect(m.nextAttemptAt == 3630.0)
    }

    @Test func permanentFailureFailsAndDiscardsPartial() throws {
        var m = machine(.running)
        let notFound = TaskError(code: TaskErrorCode.httpStatus, message: "HTTP 404", httpStatus: 404)
        let actions = try m.handle(.transferFailed(notFound, transient: false, retryAfter: nil), now: 0)
        #expect(m.state == .failed)
        #expect(m.error == notFound)
        #expect(actions == [.discardPartial, .emitStateChanged(from: .running, to: .failed, reason: notFound),
                            .emitComplete(error: notFound)])
    }

    @Test func resourceDeadlineTurnsRetriesIntoFailure() throws {
        var m = machine(.running, deadline: 10)
        _ = try m.handle(.transferFailed(boom, transient: true, retryAfter: 20), now: 5)
        #expect(m.state == .failed)
        #expect(m.error?.code == TaskErrorCode.resourceTimeout)
        var waiting = M(state: .waiting, nextAttemptAt: 12, resourceDeadline: 10)
        _ = try waiting.handle(.retryDue, now: 12)
        #expect(waiting.state == .failed)
    }

    @Test func resumeOfWaitingRetriesNow() throws {
        var m = M(state: .waiting, waitingReason: boom, nextAttemptAt: 50)
        #expect(try m.handle(.resume, now: 0) == [.enqueue, .emitStateChanged(from: .waiting, to: .queued, reason: nil)])
        #expect(m.waitingReason == nil && m.nextAttemptAt == nil)
    }

    @Test func staleRetryTimerIsIgnored() throws {
        var m = machine(.suspended)
        #expect(try m.handle(.retryDue, now: 0) == [])
        #expect(m.state == .suspended)
    }

    @Test func restoreAfterRestart() throws {
        var running = machine(.running)
        #expect(try running.handle(.restored, now: 0) == [.enqueue, .emitStateChanged(from: .running, to: .queued, reason: nil)])
        var queued = machine(.queued)
        #expect(try queued.handle(.restored, now: 0) == [.enqueue])
        var waiting = M(state: .waiting, waitingReason: boom, nextAttemptAt: 42)
        #expect(try waiting.handle(.restored, now: 0) == [.scheduleRetry(at: 42)])
        for state in [TaskState.suspended, .completed, .failed, .canceled] {
            var m = machine(state)
            #expect(try m.handle(.restored, now: 0) == [])
        }
    }

    @Test func sessionInvalidationCancelsWithItsOwnReason() throws {
        var m = machine(.queued)
        let actions = try m.handle(.sessionInvalidated, now: 0)
        #expect(m.state == .canceled)
        #expect(m.error?.code == TaskErrorCode.sessionInvalidated)
        #expect(actions.first == .discardPartial && !actions.contains(.stopTransfer))
    }

    @Test func resourceDeadlineEndsPendingTasksButNotSuspendedOnes() throws {
        var running = machine(.running, deadline: 10)
        #expect(try running.handle(.resourceDeadlinePassed, now: 9) == [])
        let actions = try running.handle(.resourceDeadlinePassed, now: 10)
        #expect(actions.first == .stopTransfer)
        #expect(actions.contains(.discardPartial))
        #expect(running.state == .failed && running.error?.code == TaskErrorCode.resourceTimeout)
        var queued = machine(.queued, deadline: 10)
        #expect(try queued.handle(.resourceDeadlinePassed, now: 11).first == .discardPartial)
        var suspended = machine(.suspended, deadline: 10)
        #expect(try suspended.handle(.resourceDeadlinePassed, now: 11) == [])
        #expect(suspended.state == .suspended)
    }

    /// A quarantined task (restored after crashes it ran in) fails from any pending state, without a transfer to
    /// stop (nothing runs at restore); a suspended or finished one is left as it is.
    @Test func aQuarantinedPendingTaskFailsAndOthersAreLeftAlone() throws {
        let error = TaskError(code: TaskErrorCode.quarantined, message: "m")
        for state in [TaskState.running, .queued, .waiting] {
            var m = machine(state)
            let actions = try m.handle(.quarantined(error), now: 0)
            #expect(m.state == .failed && m.error == error, "\(state)")
            #expect(actions.contains(.emitComplete(error: error)) && !actions.contains(.stopTransfer))
            #expect(m.waitingReason == nil)
        }
        for state in [TaskState.suspended, .completed, .failed, .canceled] {
            var m = machine(state)
            #expect(try m.handle(.quarantined(error), now: 0) == [] && m.state == state)
        }
    }
}
