// HalfTunesProtocol: the wire types of halftunesd's JSON-RPC 2.0 control protocol (a leaf module).
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

public enum HalfTunes {
    /// The version of the daemon, CLI and protocol shipped together.
    public static let version = "0.1.0"
    /// Lines longer than this are refused by the daemon.
    public static let maxLineBytes = 1 << 20
    /// The largest length or offset taken from outside (a server's head, a client's parameter, a journal row):
    /// 2^62 bytes (4 EiB), so that two of them add up without overflow. A larger one is refused where it enters.
    public static let maxByteCount: Int64 = 1 << 62
    /// The JSON-RPC notification method that carries events.
    public static let eventNotification = "event"
}
