// task.cancel's resume data as the state decides it: whether a cancel keeps the partial, what its token holds, and what each uid holds.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// A canceled task whose resume data is being made: its session, owner (counted in `resumeDataInFlight` until
    /// the token is written or nothing is kept) and partial file.
    struct ResumeDataMaking: Equatable, Sendable {
        var session: String
        var owner: UInt32
        var partialPath: String
    }

    /// A cancel asking for resume data, refused: the owner already keeps the most allowed. Nothing changed.
    struct ResumeDataRefusal: Equatable, Sendable {
        var task: Int64
        var owner: UInt32
        var kept: Int
        var max: Int
    }

    /// What a `task.cancel` that asks for resume data gets, decided before anything is canceled.
    enum ResumeDataDecision: Equatable {
        /// None asked for, or none can be made: the response gave no validator to continue against (`If-Range`).
        case none
        /// The partial is kept and a token made once the transfer has stopped.
        case keep
        /// The task's uid already keeps `kept` of them, the most allowed: the cancel is refused, nothing is lost.
        case refused(kept: Int)
    }

    /// Whether canceling `t` keeps resume data: only if asked, only with a validator (without one the bytes could
    /// never be continued safely), and only while its uid keeps fewer than `cap` (`max-resume-data-per-uid`).
    func resumeDataDecision(for t: ManagedTask, asked: Bool, cap: Int) -> ResumeDataDecision {
        guard asked, Validators(etag: t.record.etag, lastModified: t.record.lastModified).ifRangeValue != nil else { return .none }
        let kept = resumeDataHeld(by: t.owner)
        return kept < cap ? .keep : .refused(kept: kept)
    }

    /// `.task(id, .cancel(keepPartial: true))`: a `task.cancel` asking for resume data. Refused (`resumeDataRefused`,
    /// nothing canceled) when the owner keeps the most allowed; canceled without it when none can be made; else
    /// canceled keeping the partial, counted against the owner, and the task stays in memory (not swept, its
    /// session's invalidation waits) until the caller, told so by `makeResumeData`, feeds `resumeDataStopped` once
    /// the transfer stopped.
    mutating func cancelAskingResumeData(_ id: Int64, extra: [EventPayload], now: Double) -> [Action] {
        var actions: [Action] = []
        var making: ResumeDataMaking?
        if let t = tasks[id], resumeDataBeingMade[id] == nil { // one being made already: canceled, the cancel is refused
            switch resumeDataDecision(for: t, asked: true, cap: caps.maxResumeDataPerUID) {
            case .none:
                break
            case .keep:
                making = ResumeDataMaking(session: t.record.session, owner: t.owner, partialPath: t.record.partialPath)
            case .refused(let kept):
                return [.resumeDataRefused(ResumeDataRefusal(task: id, owner: t.owner, kept: kept, max: caps.maxResumeDataPerUID))]
            }
        }
        // Before the cancel: a task with no transfer to stop would leave memory at once.
        if let making { resumeDataBeingMade[id] = making }
        let steps: [TaskStateMachine.Action]
        do {
            steps = try apply(.cancel(keepPartial: making != nil), to: id, extra: extra, now: now, into: &actions)
        } catch {
            if making != nil { resumeDataBeingMade[id] = nil }
            return [.refused(error)]
        }
        if let making {
            if steps.contains(.keepPartialForResumeData) {
                Self.add(1, to: &resumeDataInFlight, making.owner)
                actions.append(.makeResumeData(id))
            } else {
                resumeDataBeingMade[id] = nil // nothing was canceled (its publish is under way)
            }
        }
        grantSlots(limits, now: now, into: &actions)
        return actions
    }

    /// `resumeDataStopped`: the canceled task's transfer stopped (or none was in flight). A token naming what the
    /// partial still holds is written (`writeResumeToken`), or, nothing on disk, the partial goes and no resume
    /// data is answered.
    mutating func resumeDataStopped(_ id: Int64, durable: ByteRanges?, partialLength: Int64?, token: String,
                                    now: Double, into actions: inout [Action]) {
        guard let making = resumeDataBeingMade[id] else { return }
        guard let t = tasks[id] else {
            // Taken out meanwhile (its insert failed, its session went): nothing is kept, and nothing stays counted.
            actions.append(.removePartial(path: making.partialPath))
            return resumeDataMade(id, making, into: &actions)
        }
        switch Self.resumeData(of: t.record, durable: durable, partialLength: partialLength, token: token, now: now) {
        case .keep(let row):
            actions.append(.writeResumeToken(row, owner: making.owner))
        case .discard(let partialPath):
            actions.append(.removePartial(path: partialPath))
            resumeDataMade(id, making, into: &actions)
        }
    }

    /// `resumeTokenWritten`: the token is kept (counted against its owner), or its write failed and the partial,
    /// which no token will ever name, goes.
    mutating func resumeTokenWritten(_ id: Int64, failed: Bool, into actions: inout [Action]) {
        guard let making = resumeDataBeingMade[id] else { return }
        if failed {
            actions.append(.removePartial(path: making.partialPath))
        } else {
            Self.add(1, to: &resumeDataKept, making.owner)
        }
        resumeDataMade(id, making, into: &actions)
    }

    /// The resume data of `id` is made (or not): the task leaves memory, its session's invalidation may finish.
    private mutating func resumeDataMade(_ id: Int64, _ making: ResumeDataMaking, into actions: inout [Action]) {
        resumeDataBeingMade[id] = nil
        Self.add(-1, to: &resumeDataInFlight, making.owner)
        evict(id)
        invalidationDone(making.session, into: &actions)
    }

    /// Takes a finished task out of memory (it stays in the journal), unless its resume data is being made from it.
    mutating func evict(_ id: Int64) {
        guard resumeDataBeingMade[id] == nil else { return }
        tasks.evict(id)
    }

    /// Whether resume data of the session is being made (its invalidation waits for it). O(cancels making some).
    func makingResumeData(session: String) -> Bool {
        resumeDataBeingMade.values.contains { $0.session == session }
    }

    /// What a task canceled with `.keep` leaves once its transfer has stopped: a token row naming its partial, or
    /// (nothing kept on disk) the partial is removed and no resume data is answered.
    enum ResumeDataMade: Equatable {
        case keep(ResumeTokenRecord)
        case discard(partialPath: String)
    }

    /// The resume data of `r` once its attempt stopped. `durable`: the stopped attempt's ranges, newer than the
    /// row's (which they replace: after a restart from zero the row's older ranges are no longer in the file);
    /// nil when no attempt was in flight. Only what the partial file holds counts (`partialLength`: its length
    /// now, nil when it is gone): a token never promises bytes that are not there.
    static func resumeData(of r: TaskRecord, durable: ByteRanges?, partialLength: Int64?, token: String,
                           now: Double) -> ResumeDataMade {
        let ranges = (durable ?? r.durableRanges).clipped(to: partialLength ?? 0)
        guard ranges.count > 0 else { return .discard(partialPath: r.partialPath) }
        return .keep(ResumeTokenRecord(token: token, session: r.session, url: r.url, partialPath: r.partialPath,
                                       destination: r.destination, ranges: ranges, bytesExpected: r.bytesExpected,
                                       etag: r.etag, lastModified: r.lastModified, createdAt: now))
    }

    /// The resume data `uid` keeps or is making now (what `max-resume-data-per-uid` bounds). O(1).
    func resumeDataHeld(by uid: UInt32) -> Int {
        (resumeDataKept[uid] ?? 0) + (resumeDataInFlight[uid] ?? 0)
    }
}
