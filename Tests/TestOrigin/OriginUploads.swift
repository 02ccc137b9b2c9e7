// TestOrigin's upload endpoints: PUT/POST bodies received per path (length, sha256), answers, drops.
import Crypto
import NIOCore
import NIOHTTP1

extension TestOrigin {
    /// How a path answers PUT and POST requests (`acceptUploads`).
    public struct UploadEndpoint: Sendable {
        public init() {}

        /// The status of the answer once the whole body arrived.
        public var status: Int = 201
        /// The answer's body; nil: "received <n> bytes sha256 <hex>\n".
        public var responseBody: [UInt8]? = nil
        /// Extra response header fields.
        public var responseHeaders: [(String, String)] = []
        /// Close the connection abruptly after receiving N body bytes of a request...
        public var dropAfterBytes: Int64? = nil
        /// ...for this many requests (then receive normally).
        public var dropTimes: Int = 1
    }

    /// One PUT/POST body as the origin received it.
    public struct ReceivedUpload: Sendable {
        public var method: String
        public var path: String
        /// The request's Content-Length, if it had one.
        public var contentLength: Int64?
        /// Body bytes received (so far, while `complete` is false).
        public var bytes: Int64
        /// Lower-case hex SHA-256 of the body (set once `complete`).
        public var sha256: String?
        /// The whole body arrived (the request's end was read).
        public var complete: Bool
        /// The first 64 KiB of the body.
        public var prefix: [UInt8]
    }

    /// Makes `path` accept PUT and POST bodies (any other method keeps the usual answers).
    public func acceptUploads(_ path: String, _ endpoint: UploadEndpoint = UploadEndpoint()) {
        core.state.withLockedValue { $0.uploads.endpoints[path] = endpoint }
    }

    /// The endpoint of `path` with its drop counter as used so far.
    public func uploadEndpoint(_ path: String) -> UploadEndpoint? {
        core.state.withLockedValue { $0.uploads.endpoints[path] }
    }

    /// Upload requests of `path` in arrival order (incomplete ones too: dropped or still arriving).
    public func uploads(_ path: String) -> [ReceivedUpload] {
        core.state.withLockedValue { s in
            s.uploads.order.compactMap { s.uploads.byRequest[$0] }.filter { $0.received.path == path }.map(\.received)
        }
    }

    /// Body bytes received for `path` over all its upload requests (live).
    public func uploadBytesReceived(_ path: String) -> Int64 {
        core.state.withLockedValue { s in
            s.uploads.byRequest.values.filter { $0.received.path == path }.reduce(0) { $0 + $1.received.bytes }
        }
    }
}

/// Upload state inside `OriginState` (under its lock).
struct OriginUploads: @unchecked Sendable {  // SHA256 is not Sendable; only used under the state lock
    struct Receiving {
        var received: TestOrigin.ReceivedUpload
        var hasher = SHA256()
        var dropAt: Int64?
    }

    static let prefixLength = 64 << 10

    var endpoints: [String: TestOrigin.UploadEndpoint] = [:]
    var byRequest: [Int: Receiving] = [:]
    var order: [Int] = []
}

extension OriginCore {
    /// A request head arrived: PUT/POST to an upload endpoint starts receiving a body.
    func beginUpload(request index: Int, head: HTTPRequestHead) {
        state.withLockedValue { s in
            let path = s.requests[index].path
            guard head.method == .PUT || head.method == .POST, var endpoint = s.uploads.endpoints[path] else { return }
            var dropAt: Int64?
            if let after = endpoint.dropAfterBytes, endpoint.dropTimes > 0 {
                endpoint.dropTimes -= 1
                s.uploads.endpoints[path] = endpoint
                dropAt = after
            }
            let received = TestOrigin.ReceivedUpload(
                method: head.method.rawValue, path: path,
                contentLength: head.headers.first(name: "content-length").flatMap { Int64($0) },
                bytes: 0, sha256: nil, complete: false, prefix: [])
            s.uploads.byRequest[index] = OriginUploads.Receiving(received: received, dropAt: dropAt)
            s.uploads.order.append(index)
        }
    }

    /// Body bytes of a request arrived. Returns true when the connection must be dropped now.
    func receiveUploadBody(request index: Int, _ buffer: ByteBuffer) -> Bool {
        state.withLockedValue { s in
            guard var r = s.uploads.byRequest[index] else { return false }
            var part = buffer
            if let dropAt = r.dropAt {
                let room = Int(max(0, dropAt - r.received.bytes))
                if part.readableBytes >= room {
                    part = part.getSlice(at: part.readerIndex, length: room)!
                    r.dropAt = nil
                    Self.take(part, into: &r)
                    s.uploads.byRequest[index] = r
                    return true
                }
            }
            Self.take(part, into: &r)
            s.uploads.byRequest[index] = r
            return false
        }
    }

    /// The request's end arrived: its body is complete.
    func finishUpload(request index: Int) {
        state.withLockedValue { s in
            guard var r = s.uploads.byRequest[index] else { return }
            r.received.complete = true
            r.received.sha256 = r.hasher.finalize().map { String(format2hex: $0) }.joined()
            s.uploads.byRequest[index] = r
        }
    }

    private static func take(_ part: ByteBuffer, into r: inout OriginUploads.Receiving) {
        part.withUnsafeReadableBytes { r.hasher.update(bufferPointer: $0) }
        let room = OriginUploads.prefixLength - r.received.prefix.count
        if room > 0 { r.received.prefix += part.getBytes(at: part.readerIndex, length: min(room, part.readableBytes)) ?? [] }
        r.received.bytes += Int64(part.readableBytes)
    }
}

extension OriginState {
    /// The answer to a complete PUT/POST of an upload endpoint (nil for anything else).
    func uploadReply(request index: Int) -> (status: Int, headers: [(String, String)], body: ByteBuffer)? {
        guard let r = uploads.byRequest[index], r.received.complete,
              let endpoint = uploads.endpoints[r.received.path] else { return nil }
        let text = "received \(r.received.bytes) bytes sha256 \(r.received.sha256 ?? "")\n"
        let body = ByteBuffer(bytes: endpoint.responseBody ?? Array(text.utf8))
        let headers = [("Content-Type", "text/plain"), ("Content-Length", "\(body.readableBytes)")] + endpoint.responseHeaders
        return (endpoint.status, headers, body)
    }
}

extension String {
    fileprivate init(format2hex byte: UInt8) {
        let digits = Array("0123456789abcdef")
        self = String([digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]])
    }
}
