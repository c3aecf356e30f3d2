import AsyncHTTPClient
import Foundation
import NIOCore
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

extension S3Client {
    /// A request body sent from a local file a piece at a time (a big text's staged asset, ``BigText``): never held
    /// whole, each piece read when the connection has taken the one before.
    package struct Upload: Sendable {
        package let path: String
        package let size: Int64

        /// On top of the request timeout: a second for each MiB sent.
        var extraTime: TimeAmount { .seconds(size >> 20) }

        package func body(on loop: any EventLoop) -> HTTPClient.Body {
            let (path, size) = (path, size)
            return .stream(contentLength: size) { writer in
                @Sendable func send(from offset: Int64) -> EventLoopFuture<Void> {
                    guard offset < size else { return loop.makeSucceededVoidFuture() }
                    let wanted = Int(min(Int64(BigText.pieceBytes), size - offset))
                    let piece: Data
                    do {
                        guard let read = try FileIO.readRange(path, offset: offset, length: wanted), read.count == wanted else {
                            throw NoteSyncError(.io, path: path, "shrank while it was sent", fix: "sync again")
                        }
                        piece = read
                    } catch {
                        return loop.makeFailedFuture(error)
                    }
                    // The next piece in a task of its own: a write that completes at once would otherwise nest
                    // every piece's call in the one before (thousands deep for a big text).
                    return writer.write(.byteBuffer(ByteBuffer(bytes: piece))).flatMap {
                        loop.flatSubmit { send(from: offset + Int64(wanted)) }
                    }
                }
                return send(from: 0)
            }
        }
    }

    /// ``createIfAbsent(_:_:)`` of the bytes of the local file at `path`, sent a piece at a time and signed with
    /// their SHA-256 (read once before: the service refuses a body that is not those bytes). An outcome lost on
    /// the way is settled by `HeadObject`: a content-addressed asset at the key, ours or another writer's, is the
    /// text (a reader verifies it), so an object there of our size is taken as created, another as there already.
    public func createIfAbsent(_ key: String, file path: String) throws -> CreateOutcome {
        guard let info = FileIO.lstatInfo(path), let (digest, size) = try FileDigest.of(path: path),
            size == Int64(info.st_size)
        else { throw NoteSyncError(.io, path: path, "a staged asset is gone or changed", fix: "sync again") }
        let upload = Upload(path: path, size: size)
        let settle = { () throws -> CreateOutcome? in
            guard let object = try self.head(key) else { return nil }
            return object.size == size ? .created : .exists
        }
        return try claim(key, settle: settle) {
            try self.send(
                "PUT", path: self.location.path(of: key), headers: [("If-None-Match", "*")], payloadHash: digest.hex,
                upload: upload)
        }
    }
}

extension S3Storage {
    /// An object a piece at a time, each a ranged `GetObject` of `pieceBytes`: a big text's asset is never held
    /// whole. Nil when there is none; false when it grows past `limit` (objects do not change: a damaged listing).
    public func readPieces(_ path: String, limit: Int, pieceBytes: Int, _ body: (Data) throws -> Bool) throws -> Bool? {
        let key = key(path)
        var offset: Int64 = 0
        while true {
            guard let piece = try client.readRange(key, offset: offset, length: pieceBytes) else {
                return offset == 0 ? nil : false
            }
            offset += Int64(piece.count)
            if offset > Int64(limit) { return false }
            if piece.isEmpty { return true }
            guard try body(piece) else { return false }
            if piece.count < pieceBytes { return true }
        }
    }
}
