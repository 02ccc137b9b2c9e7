import HalfTunesProtocol
import NIOConcurrencyHelpers
import NIOCore

/// The ordered, bounded output of one client connection. Lines are written in the order `send` is
/// called; a client that stops reading and lets more than `limit` bytes pile up is disconnected (it
/// can re-subscribe from its last `seq`), so it never stalls the daemon or grows its memory.
final class Outbox: Sendable {
    let connectionID: UInt64
    private let channel: Channel
    private let limit: Int
    private let state = NIOLockedValueBox<(pending: Int, closed: Bool)>((0, false))
    private let order = NIOLock()

    init(connectionID: UInt64, channel: Channel, limit: Int) {
        self.connectionID = connectionID
        self.channel = channel
        self.limit = limit
    }

    func send(response: RPCResponse) {
        guard let line = try? WireCoding.line(response) else { return }
        send(line: line)
    }

    func send(notification event: Event) {
        guard let params = try? JSONValue(encoding: event),
              let line = try? WireCoding.line(RPCNotification(method: HalfTunes.eventNotification, params: params))
        else { return }
        send(line: line)
    }

    func send(line: [UInt8]) {
        let size = line.count
        let overflow: Bool = state.withLockedValue { s in
            if s.closed { return false }
            s.pending += size
            if s.pending > limit { s.closed = true; return true }
            return false
        }
        if overflow {
            channel.close(promise: nil)
            return
        }
        if state.withLockedValue({ $0.closed }) { return }
        let channel = self.channel
        order.withLock {
            channel.eventLoop.execute {
                let buffer = channel.allocator.buffer(bytes: line)
                channel.writeAndFlush(buffer).whenComplete { [weak self] _ in
                    self?.state.withLockedValue { $0.pending -= size }
                }
            }
        }
    }

    func close() {
        state.withLockedValue { $0.closed = true }
        channel.close(promise: nil)
    }
}
