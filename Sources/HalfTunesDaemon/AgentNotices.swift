// Which finished tasks the users' agents are told about (`agent.notify`), and what each notice says.
import Foundation
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

enum AgentNotices {
    /// The notice for `record`, just journaled as finished in a session of `configuration` named `presented` to its
    /// owner; nil when the session's `notifications` do not cover it.
    static func notice(for record: TaskRecord, configuration: SessionConfiguration, sessionName: String,
                       presented: String, now: Double) -> AgentNotice? {
        guard let id = record.id, record.state.isTerminal else { return nil }
        let kind = TaskKind(rawValue: record.kind) ?? .download
        let policy = configuration.notifications ?? SessionNotifications.defaultValue(forSession: sessionName)
        guard policy.covers(kind: kind, state: record.state) else { return nil }
        let location = record.state == .completed ? record.location : nil
        let bytes: Int64? = switch kind {
        case .download: record.state == .completed ? record.bytesExpected ?? record.bytesDurable : record.bytesDurable
        default: nil
        }
        return AgentNotice(session: presented, task: id, kind: kind, state: record.state, name: name(of: record, location: location),
                           location: location, bytes: bytes, seconds: max(0, now - record.createdAt),
                           error: record.error.map { String($0.message.prefix(300)) })
    }

    /// A file's name: the download's location, the upload's file, the name the response suggested, the destination
    /// the client named, else the name the URL suggests (as a download without a destination is named).
    static func name(of record: TaskRecord, location: String?) -> String {
        let named = record.nameFromResponse ? nil : (record.destination.isEmpty ? nil : record.destination)
        for path in [location, record.file, record.suggestedFilename, named].compactMap({ $0 }) {
            if let last = path.split(separator: "/").last { return String(last) }
        }
        return URL(string: record.url).map(Destination.suggestedName(for:)) ?? record.url
    }
}
