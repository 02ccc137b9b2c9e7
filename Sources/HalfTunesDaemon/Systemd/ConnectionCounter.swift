import NIOConcurrencyHelpers
import NIOCore

/// Counts client connections for the idle exit: how many are open, how many were ever accepted, and when
/// the last one came or went.
final class ConnectionCounter: Sendable {
    struct Snapshot: Sendable, Equatable {
        var open: Int
        var accepted: UInt64
        var lastChange: NIODeadline
    }

    private let state = NIOLockedValueBox(Snapshot(open: 0, accepted: 0, lastChange: .now()))

    var snapshot: Snapshot { state.withLockedValue { $0 } }

    func opened() {
        state.withLockedValue {
            $0.open += 1
            $0.accepted += 1
            $0.lastChange = .now()
        }
    }

    func closed() {
        state.withLockedValue {
            $0.open -= 1
            $0.lastChange = .now()
        }
    }
}

/// Sits on the listening channel and counts each accepted connection as it is accepted (on the event
/// loop, before the connection is set up), and again when it closes.
final class AcceptCounter: ChannelInboundHandler, Sendable {
    typealias InboundIn = Channel

    let counter: ConnectionCounter

    init(counter: ConnectionCounter) { self.counter = counter }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = unwrapInboundIn(data)
        let counter = self.counter
        counter.opened()
        child.closeFuture.whenComplete { _ in counter.closed() }
        context.fireChannelRead(data)
    }
}
