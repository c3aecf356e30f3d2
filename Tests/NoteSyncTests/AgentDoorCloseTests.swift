import Foundation
import Testing

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// The agent's door (``AgentSocket/Door``) closes each connection once, whoever gets to it first when the agent stops:
/// a descriptor closed twice is closed under whatever took its number meanwhile. Each case opens a file right after
/// the door let a connection go, which takes the lowest free number (the connection's, if it was closed), then checks
/// the file is still open once the connection's reader or answer has had its turn.
@Suite(.serialized) struct AgentDoorCloseTests {
    /// A connected pair of sockets: the agent's end and the command's.
    static func connection() throws -> (agent: Int32, command: Int32) {
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return (fds[0], fds[1])
    }

    static func isOpenFile(_ fd: Int32, _ device: dev_t) -> Bool {
        var info = stat()
        return fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFCHR && info.st_rdev == device
    }

    static var nullDevice: dev_t {
        var info = stat()
        _ = stat("/dev/null", &info)
        return info.st_rdev
    }

    /// The agent stops while a command's request is being read: the connection is shut down, not closed, and its
    /// reader drops it, once.
    @Test func aConnectionBeingReadIsClosedByItsReaderOnly() throws {
        let door = AgentSocket.Door()
        let (agent, command) = try Self.connection()
        defer { close(command) }
        var socketInfo = stat()
        try #require(fstat(agent, &socketInfo) == 0)
        #expect(door.accepted(agent))
        door.closeAll()
        // Shut down: the reader sees the end of the stream, and the number is still the connection's.
        var byte: UInt8 = 0
        #expect(read(agent, &byte, 1) == 0)
        let file = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(file) }
        #expect(file != agent)
        #expect(!door.received(agent), "the door is closed")
        door.drop(agent)
        #expect(Self.isOpenFile(file, Self.nullDevice), "the reader's drop closed another file")
        // Closed: the number is free, or taken since by another file (this one, or one another test opened).
        var info = stat()
        #expect(
            fstat(agent, &info) != 0 || info.st_ino != socketInfo.st_ino || info.st_dev != socketInfo.st_dev,
            "the connection was never closed")
    }

    /// The agent stops with a request read and not answered: closed by the door, and the late answer closes nothing.
    @Test func aLateAnswerClosesNothing() throws {
        let door = AgentSocket.Door()
        let (agent, command) = try Self.connection()
        defer { close(command) }
        #expect(door.accepted(agent) && door.received(agent))
        door.closeAll()
        let file = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(file) }
        door.answer(agent, AgentSocket.Response(report: nil, keptAs: nil, errorKind: nil, error: nil))
        #expect(Self.isOpenFile(file, Self.nullDevice), "the late answer closed another file")
    }

    /// A connection accepted after the agent stopped is closed at once, and the acceptor is told to stop.
    @Test func aConnectionAfterTheStopIsRefused() throws {
        let door = AgentSocket.Door()
        door.closeAll()
        let (agent, command) = try Self.connection()
        defer { close(command) }
        #expect(!door.accepted(agent))
        var info = stat()
        #expect(fstat(agent, &info) != 0, "left open")
    }
}
