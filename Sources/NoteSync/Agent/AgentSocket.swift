import Foundation
import Synchronization

/// The running agent's door for the command line: a Unix socket in `.notesync/` through which `notesync sync` asks
/// the agent (which holds the folder's lock) to sync now — and `notesync restore` to restore a version — and gets the
/// agent's report back, as git's fsmonitor
/// daemon serves `git status`. One request per connection: a line of JSON (``Request``), answered by a line of JSON
/// (``Response``).
public enum AgentSocket {
    public struct Request: Codable, Sendable {
        public var allowMassDelete: Bool
        /// `notesync restore`: the note and the version to bring back, instead of a plain sync.
        public var restore: Restore?
        /// `notesync diff` (`sync --dry-run`): what a sync would do, with diffs; nothing is written.
        public var dryRun = false
        public var colorDiffs = false
        /// `notesync recover`: a sync that forgets what the device knew of its server (``SyncOptions/forgetServer``).
        public var recover = false

        public struct Restore: Codable, Sendable {
            public var note: String
            public var version: Int64

            public init(note: String, version: Int64) {
                self.note = note
                self.version = version
            }
        }

        public init(
            allowMassDelete: Bool = false, restore: Restore? = nil, dryRun: Bool = false, colorDiffs: Bool = false,
            recover: Bool = false
        ) {
            self.allowMassDelete = allowMassDelete
            self.restore = restore
            self.dryRun = dryRun
            self.colorDiffs = colorDiffs
            self.recover = recover
        }

        enum CodingKeys: String, CodingKey { case allowMassDelete, restore, dryRun, colorDiffs, recover }

        /// Fields a command of another build left out take their defaults.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.init(
                allowMassDelete: try container.decodeIfPresent(Bool.self, forKey: .allowMassDelete) ?? false,
                restore: try container.decodeIfPresent(Restore.self, forKey: .restore),
                dryRun: try container.decodeIfPresent(Bool.self, forKey: .dryRun) ?? false,
                colorDiffs: try container.decodeIfPresent(Bool.self, forKey: .colorDiffs) ?? false,
                recover: try container.decodeIfPresent(Bool.self, forKey: .recover) ?? false)
        }
    }

    /// The name of the agent's cookie files (``SyncAgent``): written in the notes folder's root and awaited in the
    /// watch, so that every event before a command's request is seen before it is answered (as watchman's
    /// cookies). Under the agent's own prefix, so never scanned or synced.
    static let cookiePrefix = IgnoreRules.agentTempPrefix + "cookie-"

    public struct Response: Codable, Sendable {
        public var report: SyncReport?
        /// For a restore: where the text it replaced was kept, when it could not be pushed first.
        public var keptAs: String?
        /// The error the sync ended with: its kind (for the exit code) and what it says.
        public var errorKind: String?
        public var error: String?
    }

    public static func path(_ folder: NotesFolder) -> String { folder.stateDirectory + "/agent.sock" }

    /// A `sockaddr_un` for `path`, or nil when the path is too long for one (108 bytes): then there is no socket,
    /// and commands say the folder is busy, as before.
    static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return address
    }

    /// Listens on the folder's socket (a stale one from a killed agent is replaced: the caller holds the lock).
    /// Returns the listening descriptor, or nil when there can be none here.
    static func listen(_ folder: NotesFolder) -> Int32? {
        let path = path(folder)
        guard var address = address(path) else { return nil }
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(fd, 8) == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Asks the agent serving `folder` to sync now; nil when no agent answers (none runs, or an older one).
    public static func requestSync(_ folder: NotesFolder, _ request: Request) throws -> Response? {
        guard var address = address(path(folder)) else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return nil }
        var line = try JSONEncoder().encode(request)
        line.append(0x0A)
        try FileIO.writeAll(fd: fd, line, path: path(folder))
        shutdown(fd, Int32(SHUT_WR))
        var answer = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            answer.append(contentsOf: buffer[0..<count])
        }
        guard !answer.isEmpty else { return nil }
        return try JSONDecoder().decode(Response.self, from: answer)
    }

    /// Reads one request from an accepted connection (a line of JSON, at most 64 KiB).
    static func readRequest(_ fd: Int32) -> Request? {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while data.count < 65536, !data.contains(0x0A) {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            data.append(contentsOf: buffer[0..<count])
        }
        guard let end = data.firstIndex(of: 0x0A) else { return nil }
        return try? JSONDecoder().decode(Request.self, from: data[..<end])
    }

    static func answer(_ fd: Int32, _ response: Response) {
        if var data = try? JSONEncoder().encode(response) {
            data.append(0x0A)
            try? FileIO.writeAll(fd: fd, data, path: "agent socket")
        }
        close(fd)
    }
}
