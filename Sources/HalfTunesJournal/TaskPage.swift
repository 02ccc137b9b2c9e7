import HalfTunesCore

/// One page of task ids (ascending) and the rows of the finished tasks among them, with their text when the page
/// was read with a `describe` (`Journal.taskPage`).
public struct TaskPage: Sendable, Equatable {
    public var ids: [Int64]
    public var finished: [Int64: FinishedRow]

    public init(ids: [Int64], finished: [Int64: FinishedRow]) {
        self.ids = ids
        self.finished = finished
    }
}
