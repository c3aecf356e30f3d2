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

/// One test per row of the reconciliation table (docs/reconciliation.md), plus the edge rows around it.
@Suite struct ReconcilerTests {
    static let a = ContentDigest(of: Data("a".utf8))
    static let b = ContentDigest(of: Data("b".utf8))
    static let c = ContentDigest(of: Data("c".utf8))
    let n = try! RecordName(validating: "n.md")

    func base(_ digest: ContentDigest, tag: Int64 = 5) -> BaseRecord {
        BaseRecord(tag: tag, digest: digest, size: 1, modified: 1, fingerprint: nil)
    }
    func head(_ digest: ContentDigest?, tag: Int64, version: Int = 1) -> RecordHead {
        RecordHead(
            tag: tag, deleted: digest == nil, text: digest.map { AssetRef(sha256: $0, size: 1) }, modified: 2,
            version: version, device: "dev-b")
    }
    func local(_ digest: ContentDigest) -> LocalSide { .present(digest: digest, size: 1, modified: 3) }

    @Test func sameSameIsNothing() {
        #expect(Reconciler.decide(local: local(Self.a), base: base(Self.a), server: head(Self.a, tag: 5)) == .nothing)
    }

    @Test func localEditIsPushedOnTheBase() {
        #expect(Reconciler.decide(local: local(Self.b), base: base(Self.a), server: head(Self.a, tag: 5)) == .push(digest: Self.b, base: 5))
    }

    @Test func localDeleteIsPushed() {
        #expect(Reconciler.decide(local: .absent, base: base(Self.a), server: head(Self.a, tag: 5)) == .push(digest: nil, base: 5))
    }

    @Test func newLocalNoteIsPushedAsNew() {
        #expect(Reconciler.decide(local: local(Self.a), base: nil, server: nil) == .push(digest: Self.a, base: 0))
    }

    @Test func newLocalNoteOverAnOldTombstoneIsBasedOnIt() {
        #expect(Reconciler.decide(local: local(Self.a), base: nil, server: head(nil, tag: 9)) == .push(digest: Self.a, base: 9))
    }

    @Test func serverEditIsPulled() {
        let server = head(Self.b, tag: 7)
        #expect(Reconciler.decide(local: local(Self.a), base: base(Self.a), server: server) == .pull(server))
    }

    @Test func serverDeleteIsPulled() {
        let server = head(nil, tag: 7)
        #expect(Reconciler.decide(local: local(Self.a), base: base(Self.a), server: server) == .pull(server))
    }

    @Test func newServerNoteIsPulled() {
        let server = head(Self.a, tag: 7)
        #expect(Reconciler.decide(local: .absent, base: nil, server: server) == .pull(server))
    }

    @Test func bothChangedToTheSameContentIsAdopted() {
        let server = head(Self.b, tag: 7)
        #expect(Reconciler.decide(local: local(Self.b), base: base(Self.a), server: server) == .adopt(server))
        #expect(Reconciler.decide(local: local(Self.b), base: nil, server: server) == .adopt(server))
    }

    @Test func bothDeletedIsAdopted() {
        let server = head(nil, tag: 7)
        #expect(Reconciler.decide(local: .absent, base: base(Self.a), server: server) == .adopt(server))
    }

    @Test func editEditMergesWithTheBaseAsAncestor() {
        let server = head(Self.c, tag: 7)
        #expect(Reconciler.decide(local: local(Self.b), base: base(Self.a), server: server) == .merge(ancestor: Self.a, server: server))
    }

    @Test func newNewMergesWithAnEmptyAncestor() {
        let server = head(Self.c, tag: 7)
        #expect(Reconciler.decide(local: local(Self.b), base: nil, server: server) == .merge(ancestor: nil, server: server))
    }

    @Test func localEditBeatsServerDelete() {
        #expect(Reconciler.decide(local: local(Self.b), base: base(Self.a), server: head(nil, tag: 7)) == .resurrectLocal(base: 7))
    }

    @Test func serverEditBeatsLocalDelete() {
        let server = head(Self.b, tag: 7)
        #expect(Reconciler.decide(local: .absent, base: base(Self.a), server: server) == .restoreServer(server))
    }

    @Test func newerRecordVersionIsLeftAlone() {
        let server = head(Self.b, tag: 7, version: RecordChange.currentVersion + 1)
        #expect(Reconciler.decide(local: local(Self.a), base: base(Self.a), server: server) == .newerVersion(server))
    }

    @Test func unreadableLocalNoteIsNeverADelete() {
        #expect(Reconciler.decide(local: .unreadable, base: base(Self.a), server: head(Self.a, tag: 5)) == .unreadable)
        #expect(Reconciler.decide(local: .unreadable, base: base(Self.a), server: head(Self.b, tag: 6)) == .unreadable)
    }

    @Test func aServerThatLostTheRecordGetsItBack() {
        #expect(Reconciler.decide(local: local(Self.a), base: base(Self.a), server: nil) == .push(digest: Self.a, base: 0))
        #expect(Reconciler.decide(local: .absent, base: base(Self.a), server: nil) == .adopt(nil))
    }
}
