// Decides the answer to one request (nginx-like Range / If-Range / validators, plus configured faults).
import NIOCore
import NIOHTTP1

/// Everything a connection needs to send one response; computed under the state lock.
struct ResponsePlan: Sendable {
    enum Body: Sendable {
        case none
        /// A short page (errors, redirects); not counted in `bodyBytesSent`.
        case page(ByteBuffer)
        /// A slice of a stored resource (shares its storage); counted in `bodyBytesSent`.
        case resource(ByteBuffer)
    }
    var requestIndex: Int
    var path: String
    var head: ByteBuffer
    var body: Body
    var chunked = false
    var stallAt: Int64? = nil
    var closeAt: Int64? = nil
    /// Close at `closeAt` with a TCP reset instead of a FIN.
    var reset = false
    var bytesPerSecond: Int? = nil
    var keepAlive: Bool
}

extension OriginState {
    mutating func recordArrival(_ head: HTTPRequestHead, connection: Int) -> Int {
        let uri = head.uri
        // An absolute-form target (a request forwarded as to a proxy) names the same resource as its path.
        var target = Substring(uri)
        if let scheme = target.range(of: "://"), target[..<scheme.lowerBound].allSatisfy(\.isLetter) {
            let rest = target[scheme.upperBound...]
            target = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
        }
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? String(target)
        requests.append(
            TestOrigin.RecordedRequest(
                method: head.method.rawValue, path: path, uri: uri,
                headers: head.headers.map { (name: $0.name, value: $0.value) },
                range: head.headers.first(name: "range"), ifRange: head.headers.first(name: "if-range"),
                arrivedAt: wallClockSeconds(), status: 0, rangeStart: nil, bodyBytesSent: 0, etag: nil, declaredLength: nil, truncated: false,
                connection: connection))
        return requests.count - 1
    }

    mutating func plan(request index: Int, keepAlive: Bool, isHTTP10: Bool) -> ResponsePlan {
        let request = requests[index]
        let path = request.path
        let isHead = request.method == "HEAD"
        var headers: [(String, String)] = [("Server", "TestOrigin"), ("Date", HTTPDate.format(HTTPDate.now()))]
        var behavior = behaviors[path] ?? TestOrigin.Behavior()
        defer { behaviors[path] = behaviors[path] == nil ? nil : behavior }

        func finish(_ status: Int, _ body: ResponsePlan.Body, chunked: Bool = false) -> ResponsePlan {
            requests[index].status = status
            if !keepAlive {
                headers.append(("Connection", "close"))
            } else if isHTTP10 {
                headers.append(("Connection", "keep-alive"))
            }
            let reason = HTTPResponseStatus(statusCode: status).reasonPhrase
            var text = "HTTP/1.1 \(status) \(reason)\r\n"
            for (name, value) in headers { text += "\(name): \(value)\r\n" }
            text += "\r\n"
            var bodyToSend = body
            if isHead { bodyToSend = .none }
            let head = behavior.headInLatin1
                ? ByteBuffer(bytes: text.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }) : ByteBuffer(string: text)
            return ResponsePlan(
                requestIndex: index, path: path, head: head, body: bodyToSend,
                chunked: chunked, keepAlive: keepAlive)
        }
        func page(_ status: Int, _ extra: [(String, String)] = []) -> ResponsePlan {
            let reason = HTTPResponseStatus(statusCode: status).reasonPhrase
            let html = "<html>\r\n<head><title>\(status) \(reason)</title></head>\r\n<body>\r\n"
                + "<center><h1>\(status) \(reason)</h1></center>\r\n<hr><center>TestOrigin</center>\r\n</body>\r\n</html>\r\n"
            headers += [("Content-Type", "text/html"), ("Content-Length", "\(html.utf8.count)")] + extra
            return finish(status, .page(ByteBuffer(string: html)))
        }

        // Faults hit only from `faultsFromRequest` on (requests to this path before this one, counted).
        let faulty = behavior.faultsFromRequest == 0
            || requests[..<index].lazy.filter { $0.path == path }.count >= behavior.faultsFromRequest
        if faulty, let status = behavior.failStatus, behavior.failTimes > 0 {
            behavior.failTimes -= 1
            return page(status, behavior.retryAfter.map { [("Retry-After", $0)] } ?? [])
        }
        if let reply = uploadReply(request: index) {  // a PUT/POST body received by an upload endpoint
            headers += reply.headers
            return finish(reply.status, .page(reply.body))
        }
        if let location = behavior.redirectTo {
            return page(behavior.redirectStatus, [("Location", location)])
        }
        guard let resource = resources[path] else { return page(404) }
        guard request.method == "GET" || isHead else { return page(405, [("Allow", "GET, HEAD")]) }

        let size = Int64(resource.body.readableBytes)
        requests[index].etag = resource.etag
        var validators: [(String, String)] = []
        if !behavior.omitValidators {
            if !(faulty && behavior.omitLastModified) { validators.append(("Last-Modified", resource.lastModified)) }
            if !(faulty && behavior.omitETag) {
                validators.append(("ETag", faulty && behavior.weakETag ? "W/" + resource.etag : resource.etag))
            }
        }

        // Range evaluation, like nginx's static module + range filter.
        var range: ClosedRange<Int64>? = nil
        let ignoreRange = faulty && behavior.ignoreRange
        if !ignoreRange, let rangeHeader = request.range {
            let ifRangeOK: Bool
            if faulty && behavior.ignoreIfRange {
                ifRangeOK = true
            } else if let ifRange = request.ifRange {
                let etagMatches = ifRange == resource.etag && !(faulty && (behavior.weakETag || behavior.omitETag))
                let dateMatches = ifRange == resource.lastModified && !(faulty && behavior.omitLastModified)
                ifRangeOK = !behavior.omitValidators && (etagMatches || dateMatches)
            } else {
                ifRangeOK = true
            }
            if ifRangeOK {
                switch Self.parseRange(rangeHeader, size: size) {
                case .ignore: break
                case .unsatisfiable:
                    return page(416, [("Content-Range", "bytes */\(size)")])
                case .range(let r):
                    if faulty, behavior.refuseRangeTimes > 0 {
                        behavior.refuseRangeTimes -= 1
                        return page(416, [("Content-Range", "bytes */\(size)")])
                    }
                    range = r
                }
            }
        }
        if faulty, range != nil, behavior.wrongContentRange, let r = range {
            range = max(0, r.lowerBound - 1024)...r.upperBound
        }

        let start = range?.lowerBound ?? 0
        let length = range.map { $0.upperBound - $0.lowerBound + 1 } ?? size
        let status = range == nil ? 200 : 206
        requests[index].rangeStart = start
        requests[index].declaredLength = length
        headers.append(("Content-Type", "application/octet-stream"))
        if behavior.omitContentLength {
            headers.append(("Transfer-Encoding", "chunked"))
        } else {
            headers.append(("Content-Length", "\(faulty ? behavior.claimedLength ?? length : length)"))
        }
        headers += validators
        if let r = range {
            let claimed = faulty ? behavior.contentRangeTotal ?? size : size
            headers.append(("Content-Range", "bytes \(r.lowerBound)-\(r.upperBound)/\(claimed)"))
        }
        if !ignoreRange { headers.append(("Accept-Ranges", "bytes")) }
        headers += behavior.extraHeaders

        let slice = resource.body.getSlice(at: resource.body.readerIndex + Int(start), length: Int(length))!
        var plan = finish(status, .resource(slice), chunked: behavior.omitContentLength)
        guard !isHead else { return plan }
        plan.bytesPerSecond = behavior.bytesPerSecond
        guard faulty else { return plan }
        if let after = behavior.dropAfterBytes, behavior.dropTimes > 0,
            after < length || (behavior.omitContentLength && after == length) {
            behavior.dropTimes -= 1
            plan.closeAt = max(0, after)
        }
        if let after = behavior.resetAfterBytes, behavior.resetTimes > 0, after < length {
            behavior.resetTimes -= 1
            if max(0, after) <= plan.closeAt ?? .max {
                plan.closeAt = max(0, after)
                plan.reset = true
            }
        }
        if behavior.shortBody, behavior.shortBodyTimes > 0 {
            behavior.shortBodyTimes -= 1
            plan.closeAt = min(plan.closeAt ?? .max, length / 2)
        }
        if behavior.claimedLength != nil { plan.stallAt = length }
        if let after = behavior.stallAfterBytes, behavior.stallTimes > 0, after < length {
            behavior.stallTimes -= 1
            plan.stallAt = max(0, after)
        }
        return plan
    }

    enum RangeResult: Equatable {
        case ignore
        case unsatisfiable
        case range(ClosedRange<Int64>)
    }

    /// `bytes=N-`, `bytes=N-M`, `bytes=-S`; anything else (including multiple ranges) is ignored → 200.
    static func parseRange(_ header: String, size: Int64) -> RangeResult {
        let trimmed = header.trimmingCharacters(in: " ")
        guard trimmed.lowercased().hasPrefix("bytes=") else { return .ignore }
        let spec = trimmed.dropFirst(6).trimmingCharacters(in: " ")
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .ignore }
        let first = spec[..<dash].trimmingCharacters(in: " ")
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: " ")
        if first.isEmpty {
            guard let suffix = Int64(last), suffix >= 0 else { return .ignore }
            if suffix == 0 || size == 0 { return .unsatisfiable }
            return .range(max(0, size - suffix)...(size - 1))
        }
        guard let start = Int64(first), start >= 0 else { return .ignore }
        if start >= size { return .unsatisfiable }
        if last.isEmpty { return .range(start...(size - 1)) }
        guard let end = Int64(last), end >= 0 else { return .ignore }
        if end < start { return .unsatisfiable }
        return .range(start...min(end, size - 1))
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        var s = Substring(self)
        while s.first == set { s.removeFirst() }
        while s.last == set { s.removeLast() }
        return String(s)
    }
}
