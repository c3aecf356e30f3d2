import Foundation
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport
import Synchronization

/// The running agent's door for the command line: a Unix socket in `.notesync/` through which `notesync sync` asks
/// the agent (which holds the folder's lock) to sync now — and `notesync restore` to restore a version — and gets the
/// agent's report back, as git's fsmonitor
/// daemon serves `git status`. One request per connection: a line of JSON (``Request``), answered by a line of JSON
/// (``Response``); until then the agent writes an empty line every second (``Door``), and a command that hears
/// nothing for ``silenceLimit`` says the agent does not answer.
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

        package enum CodingKeys: String, CodingKey { case allowMassDelete, restore, dryRun, colorDiffs, recover }

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

    public struct Response: Codable, Sendable {
        public var report: SyncReport?
        /// For a restore: where the text it replaced was kept, when it could not be pushed first.
        public var keptAs: String?
        /// The error the sync ended with: its kind (for the exit code) and what it says.
        public var errorKind: String?
        public var error: String?
    }

    /// A `sockaddr_un` for `path`, or nil when the path is too long for one (108 bytes): then there is no socket,
    /// and commands find only the folder's lock: they say the folder is busy.
    package static func address(_ path: String) -> sockaddr_un? {
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
        let path = folder.agentSocket
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

    /// How often the agent writes a heartbeat (an empty line) to every command it is serving: a sync may take
    /// minutes, and the heartbeat tells a command that waits for it that the agent is alive.
    static let heartbeat: Duration = .seconds(1)

    /// How long a command waits for the agent without a byte from it (its answer or a heartbeat) before it says
    /// that the agent does not answer: a stopped (SIGSTOP, a suspended terminal) or stuck agent.
    public static let silenceLimit: Duration = .seconds(10)

    /// Asks the agent serving `folder` to sync now; nil when no agent answers (none runs, or an older one).
    ///
    /// Throws (`locked`) when an agent holds the socket but says nothing for ``silenceLimit``: the command must
    /// not work on its own then, as the agent still holds the folder and may go on with the request.
    public static func requestSync(_ folder: NotesFolder, _ request: Request) throws -> Response? {
        guard var address = address(folder.agentSocket) else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let clock = ContinuousClock()
        var deadline = clock.now + silenceLimit
        // Non-blocking: a listener whose backlog is full (an agent that accepts nothing) fails with EAGAIN at once
        // instead of blocking.
        while true {
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if connected == 0 { break }
            guard errno == EAGAIN || errno == EINTR else { return nil }
            guard clock.now < deadline else { throw notAnswering(folder) }
            usleep(50_000)
        }
        var line = try JSONEncoder().encode(request)
        line.append(0x0A)
        guard send(fd, line) else { return nil }
        shutdown(fd, Int32(SHUT_WR))
        var answer = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        deadline = clock.now + silenceLimit
        while true {
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let left = deadline - clock.now
            guard left > .zero else { throw notAnswering(folder) }
            let polled = poll(&ready, 1, Int32(max(1, min(left.seconds * 1000, 60_000))))
            if polled < 0 && errno == EINTR { continue }
            if polled == 0 { continue }
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { break }
            answer.append(contentsOf: buffer[0..<count])
            deadline = clock.now + silenceLimit
        }
        // Heartbeats are empty lines; the answer is the one line of JSON.
        guard let json = answer.split(separator: 0x0A).last(where: { !$0.isEmpty }) else { return nil }
        return try JSONDecoder().decode(Response.self, from: json)
    }

    /// The error of a command whose agent does not answer, with the agent's pid when its status file names it.
    static func notAnswering(_ folder: NotesFolder) -> NoteSyncError {
        let pid = AgentStatus.read(folder).map { String($0.pid) }
        let who = pid.map { "the agent (`notesync watch`, pid \($0))" } ?? "the agent (`notesync watch`)"
        let id = pid ?? "PID"
        return NoteSyncError(
            .locked, path: folder.root,
            "\(who) holds this notes folder but has not answered for \(Int(silenceLimit.seconds)) seconds: it is "
                + "stopped or stuck; nothing was done by this command (the agent may still do it once it runs on)",
            fix: "if it was stopped (state T in `ps -o pid,stat,cmd -p \(id)`), let it go on with `kill -CONT \(id)`; "
                + "otherwise stop it with `kill \(id)` (`kill -9 \(id)` if it does not exit); then run the command again")
    }

    /// Writes all of `data` to a connected socket; false when the other side is gone (never SIGPIPE:
    /// `send(2)` with `MSG_NOSIGNAL`). A socket with a send timeout gives up when it expires.
    package static func send(_ fd: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { buffer in
            var done = 0
            while done < buffer.count {
                let sent = Glibc.send(fd, buffer.baseAddress!.advanced(by: done), buffer.count - done, Int32(MSG_NOSIGNAL))
                if sent < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN {
                        var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                        if poll(&ready, 1, 30_000) > 0 { continue }
                    }
                    return false
                }
                done += sent
            }
            return true
        }
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

    /// The connections the agent has accepted and not answered yet. A thread writes a heartbeat to each every
    /// ``AgentSocket/heartbeat`` while the agent works on them; ``answer(_:_:)`` takes a connection out before it
    /// writes the answer and closes it, so a heartbeat never lands inside an answer or on a reused descriptor.
    /// Each connection is closed once, by whoever takes it out: an answer or a drop, or ``closeAll()`` when the agent
    /// stops. The one whose request is being read is only shut down there (its reader wakes and drops it): closed
    /// under the reader, its number could be another file's by the time the reader closed it again.
    final class Door: Sendable {
        private let state = Mutex<(open: Set<Int32>, reading: Int32, closed: Bool)>(([], -1, false))

        package init() {
            let thread = Thread { [self] in
                while beat() { Thread.sleep(forTimeInterval: AgentSocket.heartbeat.seconds) }
            }
            thread.name = "notesync-agent-heartbeat"
            thread.start()
        }

        /// Takes an accepted connection whose request is read next: at most 5 s to send its request, and at most
        /// 30 s for each write to a command that stopped reading, so that no command can hold the agent. False (the
        /// connection closed) once the door is closed.
        package func accepted(_ fd: Int32) -> Bool {
            var wait = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            wait.tv_sec = 30
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            let taken = state.withLock { state in
                guard !state.closed else { return false }
                state.open.insert(fd)
                state.reading = fd
                return true
            }
            if !taken { close(fd) }
            return taken
        }

        /// The request of `fd` was read; false when the door closed meanwhile (the caller then drops it).
        func received(_ fd: Int32) -> Bool {
            state.withLock { state in
                if state.reading == fd { state.reading = -1 }
                return !state.closed
            }
        }

        /// Closes a connection that gets no answer (no valid request, or the agent stopped).
        package func drop(_ fd: Int32) {
            if take(fd) { close(fd) }
        }

        package func answer(_ fd: Int32, _ response: Response) {
            guard take(fd) else { return }
            if var data = try? JSONEncoder().encode(response) {
                data.append(0x0A)
                _ = AgentSocket.send(fd, data)
            }
            close(fd)
        }

        /// Takes `fd` out; false when it was not in (``closeAll()`` closed it).
        private func take(_ fd: Int32) -> Bool {
            state.withLock { state in
                if state.reading == fd { state.reading = -1 }
                return state.open.remove(fd) != nil
            }
        }

        /// Writes one heartbeat to every open connection, never blocking; false once the door is closed.
        private func beat() -> Bool {
            state.withLock { state in
                for fd in state.open { _ = Glibc.send(fd, [UInt8(0x0A)], 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                return !state.closed
            }
        }

        /// Ends the heartbeats and closes what is still open (the agent stops), but the connection whose request is
        /// being read: that one is shut down, and its reader drops it.
        func closeAll() {
            state.withLock { state in
                for fd in state.open where fd != state.reading { close(fd) }
                state.open = state.reading >= 0 ? [state.reading] : []
                if state.reading >= 0 { shutdown(state.reading, Int32(SHUT_RDWR)) }
                state.closed = true
            }
        }
    }
}
