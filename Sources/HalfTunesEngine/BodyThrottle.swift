// Holds a download's response back to its bandwidth limits: the delay before a body part is acknowledged.
import NIOCore
import HalfTunesProtocol

/// Used by `TransferDelegate` on its event loop only. Every received body part is reserved against the
/// transfer's `RateLimiter`; when the limiter asks for a delay, the body part's future completes only after
/// it, so AsyncHTTPClient stops reading and the server is slowed down by TCP flow control. The delay is
/// asked for again at least every `RateLimiter.maximumWaitSlice`, so changed limits apply at once.
final class BodyThrottle: @unchecked Sendable {
    private let limiter: RateLimiter
    private let eventLoop: EventLoop
    private var promise: EventLoopPromise<Void>?
    private var timer: Scheduled<Void>?

    init(limiter: RateLimiter, eventLoop: EventLoop) {
        self.limiter = limiter
        self.eventLoop = eventLoop
    }

    /// A body part is being held back for the limit (the silence is ours, not the server's).
    var isHolding: Bool {
        eventLoop.preconditionInEventLoop()
        return promise != nil
    }

    /// Counts `bytes` against the limits; returns `acknowledged`, delayed as long as the limits require.
    func admit(_ bytes: Int, acknowledged: EventLoopFuture<Void>) -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        let reservation = limiter.reserve(bytes)
        let delay = limiter.delay(for: reservation)
        guard delay > 0.0005 else { return acknowledged }
        let released = eventLoop.makePromise(of: Void.self)
        promise = released
        schedule(reservation, after: delay)
        return acknowledged.and(released.futureResult).map { _ in }
    }

    /// Lets the held body part go at once (the request ended or failed).
    func release() {
        eventLoop.preconditionInEventLoop()
        timer?.cancel()
        timer = nil
        let held = promise
        promise = nil
        held?.succeed(())
    }

    private func schedule(_ reservation: RateLimiter.Reservation, after delay: Double) {
        let slice = min(delay, RateLimiter.maximumWaitSlice)
        timer = eventLoop.scheduleTask(in: .nanoseconds(Seconds.nanoseconds(slice))) { [self] in
            guard promise != nil else { return }
            let remaining = limiter.delay(for: reservation)
            if remaining > 0.0005 {
                schedule(reservation, after: remaining)
            } else {
                release()
            }
        }
    }
}
