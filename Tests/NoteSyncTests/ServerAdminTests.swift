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

/// The `notesync server` and `recover` use cases (``ServerAdmin``, ``FolderRecovery``) called as a library: what
/// they make, what they refuse, what they return, without the binary.
@Suite struct ServerAdminTests {
    static let passphrase = "seven tired kites over the bay"

    /// Gives `passphrase` for every question, as `--passphrase-file` does.
    static func secrets(_ passphrase: String = Self.passphrase) -> Secrets {
        Secrets(isGiven: true, newPassphrase: { passphrase }, passphrase: { _ in passphrase })
    }

    /// A notes folder at `notes` bound to a new server at `server`, holding one synced note; its state and config.
    static func syncedFolder(_ notes: String, _ server: String, note: String = "plan.md") throws -> (
        NotesFolder, LocalState, FolderConfig
    ) {
        var setup = FolderSetup(notes: notes, server: server, deviceName: "laptop")
        setup.createServer = true
        _ = try setup.run(logger: testLogger)
        let folder = NotesFolder(root: notes)
        try FileIO.createAndSync(folder.root + "/" + note, Data("the plan\n".utf8))
        let state = try LocalState(path: folder.database)
        let config = try FolderConfig(state: state, folder: folder)
        _ = try SyncEngine(folder: folder, state: state, config: config, logger: testLogger).sync(SyncOptions())
        return (folder, state, config)
    }

    /// The names of the notes a server holds.
    static func notes(on server: String, vault: Vault? = nil) throws -> Set<String> {
        let store = try ServerStore(root: server, device: "check", logger: testLogger, vault: vault)
        var zone = ZoneState()
        _ = try store.fetch(into: &zone)
        return Set(zone.heads.filter { !$0.value.deleted }.map(\.key.string))
    }

    @Test func aServerIsMadeOnceAndIsAtTheNewestFormat() throws {
        let temp = try TempDirectory()
        let created = try ServerAdmin.create(
            root: temp.sub("server"), endpoint: nil, encrypt: false, ownerOnly: false, secrets: .none, logger: testLogger)
        #expect(created.recovery == nil && created.marker.format == ServerMarker.plainFormat)
        #expect(
            try ServerAdmin.upgrade(root: temp.sub("server"), endpoint: nil, logger: testLogger)
                == .alreadyAt(serverID: created.marker.id, format: ServerMarker.plainFormat))
        #expect(throws: NoteSyncError.self) {
            try ServerAdmin.create(
                root: temp.sub("server"), endpoint: nil, encrypt: false, ownerOnly: false, secrets: .none, logger: testLogger)
        }
        // A plain server asks for no passphrase: `.none` throws if asked.
        let report = try ServerAdmin.fsck(
            root: temp.sub("server"), endpoint: nil, repair: false, tempAge: 3600, gapAge: 3600, secrets: .none,
            logger: testLogger)
        #expect(report.isClean && !report.withoutKey)
    }

    @Test func anEncryptedCopyHoldsTheNotesAndIsCheckedWithOrWithoutItsKey() throws {
        let temp = try TempDirectory()
        let (_, state, _) = try Self.syncedFolder(temp.sub("notes"), temp.sub("server"))
        try state.close()
        #expect {
            try ServerAdmin.encryptedCopy(
                of: temp.sub("server"), to: temp.sub("server/copy"), endpoint: nil, secrets: Self.secrets(), logger: testLogger)
        } throws: { ($0 as? NoteSyncError)?.message == "the copy and the server must not contain each other" }
        #expect(FileIO.lstatInfo(temp.sub("server/copy")) == nil)
        let copy = try ServerAdmin.encryptedCopy(
            of: temp.sub("server"), to: temp.sub("sealed"), endpoint: nil, secrets: Self.secrets(), logger: testLogger)
        #expect(copy.destination == (try ServerAddress.normalized(temp.sub("sealed"))))
        #expect(copy.report.marker.isEncrypted && copy.report.entries >= 1 && copy.report.texts == 1)
        let store = try ServerStore(root: copy.destination, device: "check", logger: testLogger)
        #expect(try Self.notes(on: copy.destination, vault: try store.unlock(passphrase: Self.passphrase)) == ["plan.md"])
        #expect(try store.unlock(passphrase: copy.recovery.text).keyBytes == (try store.unlock(passphrase: Self.passphrase)).keyBytes)
        let withoutKey = try ServerAdmin.fsck(
            root: copy.destination, endpoint: nil, repair: false, tempAge: 3600, gapAge: 3600, secrets: .none,
            logger: testLogger)
        #expect(withoutKey.withoutKey && withoutKey.isClean)
        let withKey = try ServerAdmin.fsck(
            root: copy.destination, endpoint: nil, repair: false, tempAge: 3600, gapAge: 3600, secrets: Self.secrets(),
            logger: testLogger)
        #expect(!withKey.withoutKey && withKey.isClean && withKey.entries == copy.report.entries)
    }

    @Test func aPassphraseIsChangedOnlyWithTheCurrentOne() throws {
        let temp = try TempDirectory()
        let created = try ServerAdmin.create(
            root: temp.sub("server"), endpoint: nil, encrypt: true, ownerOnly: false, secrets: Self.secrets(),
            logger: testLogger)
        #expect(created.recovery != nil && created.marker.isEncrypted)
        let fresh = "a new and longer passphrase"
        #expect(throws: (any Error).self) {
            try ServerAdmin.changePassphrase(
                root: temp.sub("server"), endpoint: nil, current: Self.secrets("not the passphrase"), fresh: { fresh },
                logger: testLogger)
        }
        let changed = try ServerAdmin.changePassphrase(
            root: temp.sub("server"), endpoint: nil, current: Self.secrets(), fresh: { fresh }, logger: testLogger)
        #expect(changed.serverID == created.marker.id)
        let store = try ServerStore(root: temp.sub("server"), device: "check", logger: testLogger)
        _ = try store.unlock(passphrase: fresh)
        #expect(throws: (any Error).self) { try store.unlock(passphrase: Self.passphrase) }
        // The recovery key still opens it.
        _ = try store.unlock(passphrase: try #require(created.recovery).text)
    }

    @Test func aRecoveryMovesTheFolderToAnotherServerAndPushesItsNotes() throws {
        let temp = try TempDirectory()
        let (folder, state, config) = try Self.syncedFolder(temp.sub("notes"), temp.sub("server"))
        defer { try? state.close() }
        let other = try ServerAdmin.create(
            root: temp.sub("other"), endpoint: nil, encrypt: false, ownerOnly: false, secrets: .none, logger: testLogger)
        // A dry run binds nothing and writes nothing.
        var dry = FolderRecovery(folder: folder, state: state, config: config, server: temp.sub("other"))
        dry.dryRun = true
        let planned = try dry.run(logger: testLogger)
        #expect(planned.report.changes.map(\.kind) == [.upload])
        #expect(try state.meta(.serverPath) == config.server)
        #expect(try Self.notes(on: temp.sub("other")).isEmpty)
        // A server inside the notes folder is refused before anything changes.
        #expect {
            try FolderRecovery(folder: folder, state: state, config: config, server: temp.sub("notes/inner")).run(
                logger: testLogger)
        } throws: { ($0 as? NoteSyncError)?.message == "the server and the notes folder must not contain each other" }
        // A server that is not there is refused: a recovery never makes one.
        #expect(throws: NoteSyncError.self) {
            try FolderRecovery(folder: folder, state: state, config: config, server: temp.sub("missing")).run(
                logger: testLogger)
        }
        #expect(FileIO.lstatInfo(temp.sub("missing")) == nil)
        let recovered = try FolderRecovery(folder: folder, state: state, config: config, server: temp.sub("other")).run(
            logger: testLogger)
        #expect(recovered.report.changes.map(\.kind) == [.upload])
        #expect(recovered.config.server == (try ServerAddress.normalized(temp.sub("other"))))
        #expect(try state.meta(.serverPath) == recovered.config.server)
        #expect(try state.meta(.serverID) == other.marker.id)
        #expect(try Self.notes(on: temp.sub("other")) == ["plan.md"])
        #expect(try String(contentsOfFile: folder.root + "/plan.md", encoding: .utf8) == "the plan\n")
    }
}
