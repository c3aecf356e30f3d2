import Dispatch
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

/// The simulation's filesystem personalities (``SimSchedule/Filesystem``): what ``SimulatedFolders`` gives a folder
/// on every thread, that seeds replay as found without them, and a pulled version on each personality.
@Suite(.simulationFolder) struct SimFilesystemTests {
    /// The engine's parallel work runs on other threads, where ``FolderRename/without(_:_:)`` (task-local) is not
    /// seen: a registered folder lacks its steps there too, and a folder beside it lacks nothing.
    @Test func aRegisteredFolderLacksItsStepsOnEveryThread() throws {
        let scratch = try SimScratch(in: SimRunner.baseDirectory)
        let (exfat, plain) = (scratch.sub("exfat"), scratch.sub("exfat-not"))
        SimulatedFolders.set(.init(lacking: .exfat, fixedMode: 0o777), forFolder: exfat)
        defer { SimulatedFolders.set(nil, forFolder: exfat) }
        try FileIO.makeDirectory(exfat)
        try FileIO.makeDirectory(plain)
        let probed = DispatchQueue(label: "another thread").sync {
            (try? FolderGuarantees.probe(in: exfat + "/probe"), try? FolderGuarantees.probe(in: plain + "/probe"))
        }
        #expect(probed.0?.missing == ["rename-exchange", "rename-without-replace", "hard links"])
        #expect(probed.1?.missing == [])
        try FileIO.createAndSync(exfat + "/n.md", Data("n".utf8), mode: 0o600, exactMode: true)
        #expect(FileIO.lstatInfo(exfat + "/n.md").map { $0.st_mode & 0o7777 } == 0o777)
        #expect(FileIO.lstatInfo(exfat + "/probe").map { $0.st_mode & 0o7777 } == 0o777)
    }

    /// `filesystems: false` gives the seed's schedule as found before personalities were drawn: the same steps less
    /// the users' `chmod`s, every folder plain.
    @Test func seedsWithoutPersonalitiesAreTheSeedsAsFound() {
        for seed in UInt64(1)...200 {
            let before = SimSchedule.forSeed(seed, filesystems: false, cases: false)
            let now = SimSchedule.forSeed(seed, filesystems: true, cases: false)
            #expect(before.filesystems == nil)
            #expect(now.filesystems?.count == now.deviceCount)
            let others = now.steps.filter { if case .makePrivate = $0.action { false } else { true } }
            #expect(others == before.steps && now.watch == before.watch, "seed \(seed)")
        }
    }

    /// A note edited on a plain folder, pulled into a private note on each personality, edited there and pulled
    /// back: on a folder without rename flags or links the old file stays until the new one is in.
    @Test(arguments: SimSchedule.Filesystem.allCases)
    func aPulledVersionOnEachPersonality(_ filesystem: SimSchedule.Filesystem) {
        let schedule = SimSchedule(
            deviceCount: 3, clockStep: 1_000_000_000,
            steps: [
                .init(0, .edit(.pool(0), .rewrite(lines: 3), .inPlace)),
                .init(0, .sync(nil, full: true)),
                .init(1, .sync(nil, full: true)),
                .init(1, .makePrivate(.pool(0))),
                .init(0, .edit(.pool(0), .append, .renameOver)),
                .init(0, .sync(nil, full: false)),
                .init(1, .sync(nil, full: false)),
                .init(1, .edit(.pool(0), .changeLine(1), .vim)),
                .init(1, .sync(.crashAtPoint(7, occurrence: 0), full: false)),
                .init(1, .sync(nil, full: true)),
                .init(0, .sync(nil, full: true))
            ], filesystems: [.plain, filesystem, .plain])
        let (findings, figures) = SimRunner.run(schedule)
        #expect(findings.isEmpty, "\(findings)")
        // Where chmod does something, the pulled versions were written over the private note.
        #expect((figures.privateRewrites > 0) == (filesystem.fixedMode == nil))
    }
}
