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

/// ``FolderLock``: one sync or agent per notes folder (that a refused lock closes its descriptor once is checked with
/// strace, on the command line: `SyncCLITests.oneSyncPerFolderAtATime`).
@Suite struct FolderLockTests {
    static func folder(_ dir: TempDirectory) throws -> NotesFolder {
        let folder = NotesFolder(root: dir.path)
        try FileIO.makeDirectory(folder.stateDirectory)
        return folder
    }

    /// A held folder refuses a second lock, naming the folder and the fix; released, it can be taken again.
    @Test func aHeldFolderRefusesASecondLock() throws {
        let dir = try TempDirectory()
        let folder = try Self.folder(dir)
        var held: FolderLock? = try FolderLock(folder)
        let refused = #expect(throws: NoteSyncError.self) { try FolderLock(folder, waitSeconds: 0.1) }
        #expect(refused?.kind == .locked && refused?.path == folder.root, "\(String(describing: refused))")
        #expect(refused?.fix?.contains("stop the agent") == true)
        #expect(held != nil)
        held = nil
        #expect(throws: Never.self) { _ = try FolderLock(folder) }
    }
}
