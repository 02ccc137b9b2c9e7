/// Every method of the control protocol. The daemon routes from one table keyed by these.
public enum RPCMethod: String, Sendable, CaseIterable {
    case daemonStatus = "daemon.status"
    case sessionOpen = "session.open"
    case sessionList = "session.list"
    case sessionInvalidate = "session.invalidate"
    case taskCreate = "task.create"
    case taskResume = "task.resume"
    case taskSuspend = "task.suspend"
    case taskCancel = "task.cancel"
    case taskGet = "task.get"
    case taskList = "task.list"
    case taskUpdate = "task.update"
    case taskMove = "task.move"
    case daemonSetLimits = "daemon.setLimits"
    case eventsSubscribe = "events.subscribe"
    case eventsAck = "events.ack"
}
