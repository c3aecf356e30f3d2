import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// The S3 primitives a server needs (docs/server-format.md, "Storage"): create-if-absent, read, head, list,
/// replace, delete. Requests are signed with SigV4 (the body's SHA-256 signed, never `UNSIGNED-PAYLOAD`);
/// transient failures (connection errors, timeouts, 5xx, 429) are retried with backoff and then reported as
/// `serverUnreachable` (changes wait, exit 3); refused credentials (401/403) are a configuration error, never
/// "offline".
///
/// Synchronous: the sync engine is. Each request waits on async-http-client's own event loops (never on Swift
/// concurrency's threads, which a blocked caller could starve). Keys are relative to the location's prefix.
public final class S3Client: Sendable {
    public enum CreateOutcome: Sendable, Equatable {
        case created
        /// The key was there already (412 Precondition Failed).
        case exists
    }

    /// An object as a listing or `HeadObject` describes it.
    public struct Object: Sendable, Equatable {
        /// Relative to the location's prefix.
        public var key: String
        public var size: Int64
        /// Nanoseconds since 1970, by the service's clock.
        public var lastModified: Int64
        public var etag: String
    }

    public let location: S3Location
    let signer: SigV4Signer
    let http: HTTPClient
    package let logger: Logger
    /// Attempts per request before the service counts as unreachable, and the first backoff (doubled each time).
    let attempts: Int
    package let backoff: Double
    package let timeout: TimeAmount

    public init(
        location: S3Location, credentials: SigV4Credentials, logger: Logger, attempts: Int = 4, backoff: Double = 0.25,
        timeoutSeconds: Int64 = 30
    ) {
        self.location = location
        self.signer = SigV4Signer(credentials: credentials, region: location.region)
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(timeoutSeconds))
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        // A refused connection fails the request at once; ``retrying(_:_:)`` tries again with its own backoff. The
        // client's own retries would wait out the connect timeout on each attempt: 4 × 5 s before a service that is
        // down counts as offline.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.decompression = .disabled
        self.http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.logger = logger
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.timeout = .seconds(timeoutSeconds)
    }

    deinit { try? http.syncShutdown() }

    /// Closes the connections (the client is not used after).
    public func shutdown() { try? http.syncShutdown() }

    // MARK: the primitives

    /// Creates `key` with `data` only if no object has that key (`PutObject` with `If-None-Match: *`): the
    /// analogue of `renameat2(RENAME_NOREPLACE)`. An outcome lost on the way (a timeout after the request was
    /// sent, a 5xx) is settled by reading the key back: our bytes there mean created.
    public func createIfAbsent(_ key: String, _ data: Data) throws -> CreateOutcome {
        let hash = SigV4Signer.payloadHash(of: data)
        let settle = { try self.settle(key, data) }
        return try claim(key, settle: settle) {
            try self.send(
                "PUT", path: self.location.path(of: key), headers: [("If-None-Match", "*")], body: data, payloadHash: hash)
        }
    }

    /// A conditional `PutObject` of `key` made by `put`, tried again as ``createIfAbsent(_:_:)`` says; `settle` tells
    /// an outcome lost on the way (nil: the key is empty, try again).
    func claim(
        _ key: String, settle: () throws -> CreateOutcome?, _ put: () throws -> Response
    ) throws -> CreateOutcome {
        var reason = ""
        for attempt in 1...attempts {
            let response: Response
            do {
                response = try put()
            } catch let failure as Transient {
                // Sent or not, we cannot tell (unless no connection was made): the key tells.
                if failure.sent, let outcome = try settle() { return outcome }
                reason = failure.reason
                pause(after: attempt, reason)
                continue
            }
            switch response.status {
            case 200, 201: return .created
            case 412: return .exists
            case 409, 429, 500...599:
                // 409: another conditional write to the key is in flight (AWS); a 5xx may have stored it.
                if let outcome = try settle() { return outcome }
                reason = "HTTP \(response.status)"
                pause(after: attempt, reason)
            default: throw refusal(response, key: key)
            }
        }
        throw unreachable(key, reason)
    }

    /// Writes `key` whatever is there (`PutObject`): the marker and small files only their owner writes.
    public func put(_ key: String, _ data: Data) throws {
        let hash = SigV4Signer.payloadHash(of: data)
        let response = try retrying(key) { try self.send("PUT", path: self.location.path(of: key), body: data, payloadHash: hash) }
        guard (200...299).contains(response.status) else { throw refusal(response, key: key) }
    }

    /// The object at `key`, or nil when there is none. One larger than `limit` is `corrupt`.
    public func read(_ key: String, limit: Int = 1 << 30) throws -> Data? {
        let response = try retrying(key) { try self.send("GET", path: self.location.path(of: key), limit: limit) }
        switch response.status {
        case 200: return response.body
        case 404: return nil
        default: throw refusal(response, key: key)
        }
    }

    /// `length` bytes of the object at `key` from `offset` (a ranged `GetObject`), fewer when it ends first; nil when
    /// there is none. A service that ignores the range sends the whole object, which is cut here.
    public func readRange(_ key: String, offset: Int64, length: Int) throws -> Data? {
        guard length > 0 else { return try head(key) == nil ? nil : Data() }
        let range = "bytes=\(offset)-\(offset + Int64(length) - 1)"
        let response = try retrying(key) {
            try self.send("GET", path: self.location.path(of: key), headers: [("range", range)], limit: 1 << 30)
        }
        switch response.status {
        case 206: return response.body.prefix(length)
        case 200:
            let start = Int(clamping: offset)
            guard start < response.body.count else { return Data() }
            return Data(
                response.body[response.body.startIndex + start..<min(response.body.endIndex, response.body.startIndex + start + length)])
        case 416: return Data()
        case 404: return nil
        default: throw refusal(response, key: key)
        }
    }

    /// What `HeadObject` says of `key`, or nil when there is none.
    public func head(_ key: String) throws -> Object? {
        let response = try retrying(key) { try self.send("HEAD", path: self.location.path(of: key)) }
        switch response.status {
        case 200:
            let size = Int64(response.header("content-length") ?? "") ?? 0
            let modified = response.header("last-modified").flatMap(Self.httpDate) ?? 0
            return Object(key: key, size: size, lastModified: modified, etag: response.header("etag") ?? "")
        case 404: return nil
        default: throw refusal(response, key: key)
        }
    }

    /// The objects under `prefix` (relative to the location's prefix) whose keys sort after `startAfter`, in
    /// order, through every page of `ListObjectsV2`; with a `delimiter`, also the common prefixes ("folders").
    /// `maxKeys` stops after that many keys and prefixes (one page).
    public func list(
        prefix: String, startAfter: String? = nil, delimiter: String? = nil, maxKeys: Int? = nil
    ) throws -> (objects: [Object], prefixes: [String]) {
        var objects: [Object] = []
        var prefixes: [String] = []
        var continuation: String?
        repeat {
            let page = try listPage(
                prefix: prefix, startAfter: startAfter, continuation: continuation, delimiter: delimiter, maxKeys: maxKeys)
            objects += page.objects
            prefixes += page.prefixes
            continuation = maxKeys == nil ? page.next : nil
        } while continuation != nil
        return (objects, prefixes)
    }

    /// The objects under `prefix`, in key order, from at most `pages` pages of `ListObjectsV2` (1,000 keys each);
    /// `complete` is false when more keys follow the last one returned.
    public func list(prefix: String, pages: Int) throws -> (objects: [Object], complete: Bool) {
        var objects: [Object] = []
        var continuation: String?
        for _ in 0..<max(pages, 1) {
            let page = try listPage(prefix: prefix, startAfter: nil, continuation: continuation, delimiter: nil, maxKeys: nil)
            objects += page.objects
            guard let next = page.next else { return (objects, true) }
            continuation = next
        }
        return (objects, false)
    }

    /// One page of `ListObjectsV2`; `next` is the continuation token when the listing goes on.
    func listPage(
        prefix: String, startAfter: String?, continuation: String?, delimiter: String?, maxKeys: Int?
    ) throws -> (objects: [Object], prefixes: [String], next: String?) {
        var query = [("list-type", "2"), ("prefix", location.prefix + prefix)]
        if let delimiter { query.append(("delimiter", delimiter)) }
        if let maxKeys { query.append(("max-keys", String(maxKeys))) }
        if let continuation {
            query.append(("continuation-token", continuation))
        } else if let startAfter {
            query.append(("start-after", location.prefix + startAfter))
        }
        let page = query
        let response = try retrying(prefix) {
            try self.send("GET", path: self.location.bucketPath, query: page, limit: 1 << 26)
        }
        guard response.status == 200 else { throw refusal(response, key: prefix) }
        let text = String(decoding: response.body, as: UTF8.self)
        var objects: [Object] = []
        var prefixes: [String] = []
        for block in Self.elements("Contents", in: text) {
            guard let key = Self.elements("Key", in: block).first, key.hasPrefix(location.prefix) else { continue }
            objects.append(
                Object(
                    key: String(key.dropFirst(location.prefix.count)),
                    size: Int64(Self.elements("Size", in: block).first ?? "") ?? 0,
                    lastModified: Self.elements("LastModified", in: block).first.flatMap(Self.isoDate) ?? 0,
                    etag: Self.elements("ETag", in: block).first ?? ""))
        }
        for block in Self.elements("CommonPrefixes", in: text) {
            for name in Self.elements("Prefix", in: block) where name.hasPrefix(location.prefix) {
                prefixes.append(String(name.dropFirst(location.prefix.count)))
            }
        }
        let next =
            Self.elements("IsTruncated", in: text).first == "true" ? Self.elements("NextContinuationToken", in: text).first : nil
        return (objects, prefixes, next)
    }

    /// Removes `key` (gc, fsck); a key already gone is fine.
    public func delete(_ key: String) throws {
        let response = try retrying(key) { try self.send("DELETE", path: self.location.path(of: key)) }
        guard [200, 204, 404].contains(response.status) else { throw refusal(response, key: key) }
    }

    /// Sets `key`'s modification time to now (`CopyObject` onto itself): gc keeps an asset a writer reused.
    public func touch(_ key: String) throws {
        let source = "/" + location.bucket + "/" + SigV4Signer.uriEncode(location.prefix + key, keepingSlashes: true)
        let response = try retrying(key) {
            try self.send(
                "PUT", path: self.location.path(of: key),
                headers: [("x-amz-copy-source", source), ("x-amz-metadata-directive", "REPLACE")])
        }
        guard response.status == 200 || response.status == 404 else { throw refusal(response, key: key) }
    }

    /// Creates the bucket (an S3-compatible service; on AWS the bucket is made in its console): one that exists
    /// and is ours already is fine.
    public func createBucketIfMissing() throws {
        let response = try retrying("") { try self.send("PUT", path: self.location.bucketPath) }
        let code = Self.elements("Code", in: String(decoding: response.body, as: UTF8.self)).first
        guard response.status == 200 || code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" else {
            throw refusal(response, key: "")
        }
    }

    // MARK: the precondition probe

    /// The probe's keys start with this (fsck and `server init` pass over one a probe in progress left).
    public static let probePrefix = "notesync-probe-"

    /// Refuses a service that accepts `If-None-Match` and ignores it, which would let two devices both win one
    /// log slot: a probe key is created twice (the second must fail with 412 and leave the first bytes), and a
    /// read with a wrong `If-Match` must fail with 412. The probe key is removed after.
    public func probePreconditions() throws {
        // At the top of the prefix, not in a "folder": services on a filesystem (SeaweedFS) keep an emptied folder.
        let key = Self.probePrefix + UUID().uuidString.lowercased()
        let first = Data("notesync probe 1 \(key)".utf8)
        do {
            try probe(key, first)
        } catch {
            try? delete(key)
            throw error
        }
        try delete(key)
    }

    private func probe(_ key: String, _ first: Data) throws {
        guard try createIfAbsent(key, first) == .created else {
            throw ignoresPreconditions("a new key was reported as existing")
        }
        let second = try createIfAbsent(key, Data("notesync probe 2 \(key)".utf8))
        let stored = try read(key)
        guard second == .exists, stored == first else {
            throw ignoresPreconditions(
                "a second PutObject with If-None-Match: * on an existing key "
                    + (stored == first ? "was reported as stored" : "replaced the object"))
        }
        let response = try retrying(key) {
            try self.send("GET", path: self.location.path(of: key), headers: [("If-Match", "\"0123456789abcdef\"")])
        }
        guard response.status == 412 else {
            throw ignoresPreconditions("a read with a wrong If-Match answered HTTP \(response.status), not 412")
        }
    }

    // MARK: requests

    package struct Response: Sendable {
        package var status: Int
        var headers: [(String, String)]
        package var body: Data

        package func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name }?.1 }
    }

    /// A failure that may pass: no connection, a timeout, a reset.
    struct Transient: Error {
        package var reason: String
        /// False when no connection was made: the request never left, so nothing it asked can have happened.
        package var sent = true
    }

    /// Whether `error` is a connection that could not be made (refused, unreachable, a name that does not resolve,
    /// the connect timeout): the request was not sent.
    static func neverConnected(_ error: any Error) -> Bool {
        switch error {
        case let error as IOError: return [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL].contains(error.errnoCode)
        case is NIOConnectionError: return true
        case ChannelError.connectTimeout: return true
        case let error as HTTPClientError: return error == .connectTimeout
        default: return false
        }
    }

    package func send(
        _ method: String, path: String, query: [(String, String)] = [], headers: [(String, String)] = [],
        body: Data? = nil, payloadHash: String? = nil, limit: Int = 1 << 20, upload: Upload? = nil
    ) throws -> Response {
        let hash = payloadHash ?? SigV4Signer.payloadHash(of: body ?? Data())
        let signed = signer.sign(
            method: method, host: location.host, path: path, query: query.map { (name: $0.0, value: $0.1) },
            headers: headers.map { (name: $0.0, value: $0.1) }, payloadHash: hash, date: Date())
        let url =
            "\(location.scheme)://\(location.host)\(signed.encodedPath)"
            + (signed.encodedQuery.isEmpty ? "" : "?" + signed.encodedQuery)
        var httpHeaders = HTTPHeaders()
        for (name, value) in headers { httpHeaders.add(name: name, value: value) }
        for header in signed.headersToAdd { httpHeaders.add(name: header.name, value: header.value) }
        let request: HTTPClient.Request
        do {
            request = try HTTPClient.Request(
                url: url, method: HTTPMethod(rawValue: method), headers: httpHeaders,
                body: upload?.body(on: http.eventLoopGroup.any())
                    ?? body.map { .byteBuffer(ByteBuffer(bytes: $0)) } ?? (method == "PUT" ? .byteBuffer(ByteBuffer()) : nil))
        } catch {
            throw NoteSyncError(.usage, path: "\(location)", "cannot make a request to \(url): \(error)")
        }
        let response: HTTPClient.Response
        do {
            response = try http.execute(request: request, deadline: .now() + timeout + (upload?.extraTime ?? .zero)).wait()
        } catch {
            // No answer: no connection, a timeout, a reset, a name that does not resolve. It may pass.
            throw Transient(reason: "\(error)", sent: !Self.neverConnected(error))
        }
        let bytes = response.body.map { Data($0.readableBytesView) } ?? Data()
        if bytes.count > limit && response.status.code == 200 {
            throw NoteSyncError(
                .corrupt, path: "\(location)\(path)", "the S3 service answered with more than \(limit) bytes",
                fix: "run `notesync server fsck` on the server")
        }
        return Response(
            status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) }, body: bytes)
    }

    /// `request` again after a transient failure, a 5xx or a 429, with backoff; then `serverUnreachable`.
    package func retrying(_ key: String, _ request: () throws -> Response) throws -> Response {
        var reason = ""
        for attempt in 1...attempts {
            do {
                let response = try request()
                guard response.status == 429 || (500...599).contains(response.status) else { return response }
                reason = "HTTP \(response.status)"
            } catch let failure as Transient {
                reason = failure.reason
            }
            pause(after: attempt, reason)
        }
        throw unreachable(key, reason)
    }

    /// After an ambiguous claim: `.created` when our bytes are at the key, `.exists` when others are, nil when the
    /// key is empty (the claim did not land: try again).
    /// A service that does not answer the read (after its retries) leaves the outcome unknown: unreachable, which
    /// the engine settles as any ambiguous claim, by reading the slot back on its next sync.
    package func settle(_ key: String, _ data: Data) throws -> CreateOutcome? {
        guard let stored = try read(key, limit: max(data.count, 1) + 1) else { return nil }
        return stored == data ? .created : .exists
    }

    package func pause(after attempt: Int, _ reason: String) {
        guard attempt < attempts else { return }
        logger.debug("s3.retry", metadata: ["s3.attempt": "\(attempt)", "reason": "\(reason)"])
        usleep(useconds_t(backoff * Double(1 << (attempt - 1)) * 1e6))
    }

    /// `Last-Modified` (RFC 1123, `Wed, 21 Oct 2015 07:28:00 GMT`) in nanoseconds since 1970; nil for any other
    /// form. Parsed by hand: a formatter per answer cost more CPU than the request it described.
    static func httpDate(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        // "Www, DD Mon YYYY HH:MM:SS GMT"
        guard bytes.count == 29, bytes[3] == 0x2C, bytes[4] == 0x20, bytes[7] == 0x20, bytes[11] == 0x20,
            bytes[16] == 0x20, bytes[19] == 0x3A, bytes[22] == 0x3A, bytes[25] == 0x20,
            String(decoding: bytes[26...], as: UTF8.self) == "GMT",
            let day = number(bytes[5..<7]), let year = number(bytes[12..<16]), let hour = number(bytes[17..<19]),
            let minute = number(bytes[20..<22]), let second = number(bytes[23..<25]),
            let month = monthNames.firstIndex(of: String(decoding: bytes[8..<11], as: UTF8.self))
        else { return nil }
        return nanoseconds(year: year, month: month + 1, day: day, hour: hour, minute: minute, second: second, fraction: 0)
    }

    /// A listing's `LastModified` (ISO 8601 in UTC, `2009-10-12T17:50:30.000Z`, with or without fractions) in
    /// nanoseconds since 1970; nil for any other form.
    static func isoDate(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.last == 0x5A, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x54,
            bytes[13] == 0x3A, bytes[16] == 0x3A,
            let year = number(bytes[0..<4]), let month = number(bytes[5..<7]), let day = number(bytes[8..<10]),
            let hour = number(bytes[11..<13]), let minute = number(bytes[14..<16]), let second = number(bytes[17..<19])
        else { return nil }
        var fraction: Int64 = 0
        if bytes.count > 20 {
            let digits = bytes[20..<(bytes.count - 1)]
            guard bytes[19] == 0x2E, !digits.isEmpty, digits.count <= 9, let value = number(digits) else { return nil }
            fraction = Int64(value) * Int64((0..<(9 - digits.count)).reduce(1) { value, _ in value * 10 })
        }
        return nanoseconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second, fraction: fraction)
    }

    static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Decimal digits only (no sign, no spaces), or nil.
    package static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty else { return nil }
        var value = 0
        for byte in digits {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    /// A UTC date and time in nanoseconds since 1970; nil when a field is out of range.
    package static func nanoseconds(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, fraction: Int64) -> Int64? {
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        let days = SigV4Signer.daysSince1970(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return seconds * 1_000_000_000 + fraction
    }

    // MARK: errors

    package func unreachable(_ key: String, _ reason: String) -> NoteSyncError {
        NoteSyncError(
            .serverUnreachable, path: "\(location)\(key)",
            "the S3 service at \(location.scheme)://\(location.host) cannot be reached (\(reason))",
            fix: "check the network and the endpoint; notes are kept and changes wait until it answers")
    }

    package func refusal(_ response: Response, key: String) -> NoteSyncError {
        let text = String(decoding: response.body.prefix(4096), as: UTF8.self)
        let code = Self.elements("Code", in: text).first ?? "HTTP \(response.status)"
        let path = "\(location)\(key)"
        switch response.status {
        case 401, 403:
            return NoteSyncError(
                .usage, path: path, "the S3 service refused the request (\(code), HTTP \(response.status))",
                fix: "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the profile in ~/.aws/credentials, "
                    + "AWS_PROFILE), the region (AWS_REGION), and that the key may read, write, list and delete in "
                    + "\(location)")
        case 404 where code == "NoSuchBucket":
            return NoteSyncError(
                .notAServer, path: path, "the bucket \(location.bucket) does not exist on \(location.host)",
                fix: "check the bucket name and --endpoint, or create the bucket first")
        default:
            return NoteSyncError(.io, path: path, "the S3 service answered \(code) (HTTP \(response.status))")
        }
    }

    func ignoresPreconditions(_ what: String) -> NoteSyncError {
        NoteSyncError(
            .unsupportedFilesystem, path: "\(location)",
            "the S3 service at \(location.scheme)://\(location.host) ignores conditional writes: \(what); two "
                + "devices could both win one log slot, so notesync does not write to it",
            fix: "use a service that implements PutObject with If-None-Match (AWS S3, Cloudflare R2, SeaweedFS, "
                + "MinIO, Ceph RGW); a proxy in between must pass If-None-Match and If-Match through")
    }

    /// The texts of every `<name>…</name>` element, XML entities decoded (S3's answers are flat enough).
    package static func elements(_ name: String, in xml: String) -> [String] {
        var found: [String] = []
        var rest = xml[...]
        let open = "<\(name)>"
        let close = "</\(name)>"
        while let start = rest.range(of: open), let end = rest.range(of: close, range: start.upperBound..<rest.endIndex) {
            found.append(decodeEntities(String(rest[start.upperBound..<end.lowerBound])))
            rest = rest[end.upperBound...]
        }
        return found
    }

    static func decodeEntities(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var result = ""
        var rest = text[...]
        while let amp = rest.firstIndex(of: "&") {
            result += rest[..<amp]
            guard let semi = rest[amp...].firstIndex(of: ";") else { break }
            let entity = rest[rest.index(after: amp)..<semi]
            switch entity {
            case "amp": result += "&"
            case "lt": result += "<"
            case "gt": result += ">"
            case "quot": result += "\""
            case "apos": result += "'"
            default:
                if entity.hasPrefix("#x"), let code = UInt32(entity.dropFirst(2), radix: 16), let scalar = Unicode.Scalar(code) {
                    result.unicodeScalars.append(scalar)
                } else if entity.hasPrefix("#"), let code = UInt32(entity.dropFirst()), let scalar = Unicode.Scalar(code) {
                    result.unicodeScalars.append(scalar)
                } else {
                    result += rest[amp...semi]
                }
            }
            rest = rest[rest.index(after: semi)...]
        }
        return result + rest
    }
}
