// Queue and limit controls: a task's priority and bandwidth limit, its place in the queue, daemon-wide limits.

extension HalfTunesClient {
    /// Changes a task's priority and/or its own bandwidth limit (bytes per second, 0 removes it). A
    /// running transfer goes on with the new limit; a queued task takes its place in the new priority class.
    @discardableResult
    public func update(_ id: Int64, priority: TaskPriority? = nil, bandwidthLimit: Int64? = nil) throws -> TaskInfo {
        try call(.taskUpdate, TaskUpdateParams(id: id, priority: priority, bandwidthLimit: bandwidthLimit))
    }

    /// Moves a queued (or suspended, or waiting) task to the front or back of its priority class.
    @discardableResult
    public func move(_ id: Int64, to position: TaskMoveParams.Position) throws -> TaskInfo {
        try call(.taskMove, TaskMoveParams(id: id, to: position))
    }

    /// The daemon-wide limits in effect.
    public func limits() throws -> DaemonLimits {
        let status = try status()
        return status.limits ?? DaemonLimits(maxConcurrent: status.maxConcurrent, maxConnectionsPerHost: 6,
                                             bandwidthLimit: 0)
    }

    /// Changes the given daemon-wide limits at once (running transfers go on) and keeps them across restarts;
    /// returns the limits now in effect.
    @discardableResult
    public func setLimits(maxConcurrent: Int? = nil, maxConnectionsPerHost: Int? = nil,
                          bandwidthLimit: Int64? = nil) throws -> DaemonLimits {
        try call(.daemonSetLimits, DaemonSetLimitsParams(maxConcurrent: maxConcurrent,
                                                         maxConnectionsPerHost: maxConnectionsPerHost,
                                                         bandwidthLimit: bandwidthLimit))
    }
}
