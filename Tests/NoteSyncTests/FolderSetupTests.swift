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

/// ``FolderSetup``, the use case behind `notesync init`, called as a library: what it writes, what it refuses and
/// what it tells, without the binary.
@Suite struct FolderSetupTests {
    /// A setup of `notes` on `server` as device "laptop", with a new server allowed.
    static func setup(_ notes: String, _ server: String, create: Bool = true) -> FolderSetup {
        var setup = FolderSetup(notes: notes, server: server, deviceName: "laptop")
        setup.createServer = create
        return setup
    }

    @Test func aNewFolderIsBoundToTheNewServerItMade() throws {
        let temp = try TempDirectory()
        var notices: [FolderSetup.Notice] = []
        let outcome = try Self.setup(temp.sub("notes"), temp.sub("server")).run(logger: testLogger) { notices.append($0) }
        guard case .connected(let notes, let server, let device, let name) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(notes == NotesFolder(root: temp.sub("notes")).root && name == "laptop")
        #expect(server == (try ServerAddress.normalized(temp.sub("server"))))
        #expect(notices.contains { if case .serverCreated(server, nil) = $0 { true } else { false } })
        let store = try ServerStore(root: server, device: device, logger: testLogger)
        let state = try LocalState(path: NotesFolder(root: notes).database, readOnly: true)
        defer { try? state.close() }
        #expect(try state.meta(.serverID) == store.marker.id)
        #expect(try state.meta(.deviceID) == device)
        #expect(try state.meta(.deviceName) == "laptop")
        // A second setup of the same folder is refused, and says what to run instead.
        #expect {
            try Self.setup(notes, server).run(logger: testLogger)
        } throws: { error in
            let error = error as? NoteSyncError
            return error?.message == "is already a notesync notes folder" && error?.fix?.contains("notesync sync") == true
        }
    }

    @Test func aFolderThatIsNeitherEmptyNorAServerIsRefusedAndNothingIsWritten() throws {
        let temp = try TempDirectory()
        try FileIO.makeDirectory(temp.sub("server"))
        try FileIO.createAndSync(temp.sub("server/photo.jpg"), Data("x".utf8))
        #expect {
            try Self.setup(temp.sub("notes"), temp.sub("server")).run(logger: testLogger)
        } throws: { ($0 as? NoteSyncError)?.message == "holds other files and no notesync server" }
        #expect(FileIO.lstatInfo(temp.sub("notes")) == nil)
        #expect(try FileIO.list(temp.sub("server")) == ["photo.jpg"])
        // Without --create-server a missing folder is named missing, and the fix names the flag.
        #expect {
            try Self.setup(temp.sub("notes"), temp.sub("new"), create: false).run(logger: testLogger)
        } throws: { error in
            let error = error as? NoteSyncError
            return error?.message == "is not a notesync server (it is missing)" && error?.fix?.contains("--create-server") == true
        }
        #expect(FileIO.lstatInfo(temp.sub("new")) == nil)
    }

    @Test func notesFoldersNeverNestAndNeverHoldTheirServer() throws {
        let temp = try TempDirectory()
        _ = try Self.setup(temp.sub("outer"), temp.sub("server")).run(logger: testLogger)
        #expect {
            try Self.setup(temp.sub("outer/inner"), temp.sub("server2")).run(logger: testLogger)
        } throws: { ($0 as? NoteSyncError)?.message.hasPrefix("is inside the notes folder") == true }
        #expect {
            try Self.setup(temp.path, temp.sub("server3")).run(logger: testLogger)
        } throws: { ($0 as? NoteSyncError)?.message.hasPrefix("holds the notes folder") == true }
        #expect {
            try Self.setup(temp.sub("notes"), temp.sub("notes/server")).run(logger: testLogger)
        } throws: { ($0 as? NoteSyncError)?.message == "the server and the notes folder must not contain each other" }
    }

    /// A state that cannot be read is moved aside, its bytes kept, and the folder set up afresh; the notes stay.
    @Test func anUnreadableStateIsMovedAsideNotLost() throws {
        let temp = try TempDirectory()
        let folder = NotesFolder(root: temp.sub("notes"))
        try FileIO.makeDirectories(folder.stateDirectory)
        try FileIO.createAndSync(folder.database, Data("not a database".utf8))
        try FileIO.createAndSync(folder.root + "/note.md", Data("kept\n".utf8))
        var aside: String?
        let outcome = try Self.setup(folder.root, temp.sub("server")).run(logger: testLogger) { notice in
            if case .stateMovedAside(_, let path) = notice { aside = path }
        }
        guard case .connected = outcome, let aside else {
            Issue.record("\(outcome), aside \(aside ?? "none")")
            return
        }
        #expect(try FileIO.read(aside) == Data("not a database".utf8))
        #expect(try FileIO.read(folder.root + "/note.md") == Data("kept\n".utf8))
        #expect(FolderSetup.unreadableState(folder) == nil)
    }

    @Test func deviceNamesAreFitForFileNames() {
        #expect(FolderSetup.deviceName(" ann/s\u{7}\\laptop ") == "annslaptop")
        #expect(FolderSetup.deviceName("\u{1}/") == "device")
        #expect(FolderSetup.deviceName(String(repeating: "é", count: 50)).count == 40)
    }
}
