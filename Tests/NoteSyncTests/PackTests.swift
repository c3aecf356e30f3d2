import Foundation
import Synchronization
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

/// Packs (formats 5 and 6, ``AssetPack``): a batch's texts in a few files, read, reused, checked and collected as loose
/// assets are.
@Suite struct PackTests {
    /// Texts of `count` notes, each different, about `size` bytes.
    static func texts(_ count: Int, tag: String = "", size: Int = 600) -> [Data] {
        (0..<count).map { index in
            Data("note \(tag)\(index)\n".utf8 + Data(String(repeating: "word\(index % 97) ", count: size / 8).utf8))
        }
    }

    static func packNames(_ store: ServerStore) throws -> [String] {
        try ServerFiles(store).names(in: store.layout.packsDirectory).filter(AssetPack.isPackName).sorted()
    }

    static func looseCount(_ store: ServerStore) throws -> Int {
        let assets = store.layout.assetsDirectory.dropFirst(store.layout.root.count + 1) + "/"
        return try ServerFiles(store).listing().keys.filter { $0.hasPrefix(assets) && !$0.hasSuffix("/") }.count
    }

    /// Commits a save of each text as `prefix<index>.md`.
    static func commit(_ store: ServerStore, _ state: inout ZoneState, _ refs: [AssetRef], prefix: String) throws {
        var changes: [RecordChange] = []
        for (index, ref) in refs.enumerated() {
            let name = try RecordName(validating: "\(prefix)\(index).md")
            changes.append(.save(name, base: state.tag(of: name), text: ref, modified: 1))
        }
        guard case .committed = try store.commit(changes, into: &state) else { throw NoteSyncError(.conflict, "lost the race") }
    }

    /// Texts encoded as a first sync reads them (``AssetPreparer/encoded(_:)``), or only named as a moved note's
    /// (``AssetPreparer/named(_:)``), are stored as ``ServerStore/putAssets(_:)`` stores them: packed, loose under 16,
    /// loose when too big for a pack, a text given twice once; each reads back as it was, on another device too.
    @Test func textsEncodedAsTheyAreReadAreStoredAsAnyOther() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let preparer = try AssetPreparer(store)
        var noise = SystemRandomNumberGenerator()
        let big = Data((0..<(AssetPack.largestBlob + 10)).map { _ in UInt8.random(in: 0...255, using: &noise) })
        let short = Data("a short note\n".utf8)
        let texts = Self.texts(40, tag: "read") + [big, short, Self.texts(1, tag: "read")[0]]
        let prepared = texts.enumerated().map { index, text in
            index % 3 == 0 ? preparer.named(text) : preparer.encoded(text)
        }
        #expect(prepared.map(\.ref) == texts.map(AssetRef.init(of:)))
        #expect(prepared.map(\.name) == texts.map { store.storedName(AssetRef(of: $0).sha256) })
        for (item, text) in zip(prepared, texts) where item.isEncoded {
            #expect(store.decodeAsset(item.bytes, item.ref, name: item.name) == text)
            #expect(item.bytes == store.encodeAsset(text, name: item.name, vault: preparer.vault) || TestServer.isEncrypted)
        }
        let refs = try store.publish(store.stage(prepared))
        #expect(refs == texts.map(AssetRef.init(of:)))
        #expect(try Self.packNames(store).count == 1 && Self.looseCount(store) == 1)
        let other = try makeServer(dir, device: "dev-b")
        for (ref, text) in zip(refs, texts) {
            #expect(try store.readAsset(ref) == text)
            #expect(try other.readAsset(ref) == text)
        }
        // Under 16 texts the server lacks: loose, encoded or not.
        let few = Self.texts(9, tag: "few", size: 4000)
        let fewRefs = try store.publish(store.stage(few.enumerated().map { $0 % 2 == 0 ? preparer.encoded($1) : preparer.named($1) }))
        #expect(try Self.packNames(store).count == 1 && Self.looseCount(store) == 10)
        for (ref, text) in zip(fewRefs, few) {
            #expect(try other.readAsset(ref) == text)
            // Stored as encoded once: compressed (and sealed) whether it came encoded or only named.
            let name = store.storedName(ref.sha256)
            let size = store.storage.info(store.layout.assetPath(name))?.size
            #expect(size == Int64(store.encodeAsset(text, name: name, vault: preparer.vault).count) && size! < ref.size)
        }
    }

    /// Bytes encoded to be held a while are the same bytes, at their size.
    @Test func compactEncodingIsTheSameBytes() throws {
        for text in Self.texts(5, size: 4000) + [Data(repeating: 7, count: 100), Data()] {
            let compact = AssetCodec.encode(text, pool: nil, compact: true)
            #expect(compact == AssetCodec.encode(text))
            #expect(AssetCodec.decode(compact, digest: AssetRef(of: text).sha256, size: Int64(text.count)) == text)
        }
    }

    /// A batch of new texts becomes one pack, no loose file and no temp; each text reads back verified, from this
    /// store and from another device's; a batch under 16 texts and a text too big for a pack stay loose.
    @Test func aBatchBecomesAPack() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        #expect(store.marker.format == (TestServer.isEncrypted ? 6 : 5) && store.hasPacks)
        let texts = Self.texts(300) + [Self.texts(1)[0]]
        let refs = try store.putAssets(texts)
        #expect(try Self.packNames(store).count == 1)
        #expect(try Self.looseCount(store) == 0)
        #expect(try ServerFiles(store).names(in: store.layout.tmpDirectory).isEmpty)
        for (ref, text) in zip(refs, texts) { #expect(try store.readAsset(ref) == text) }
        let other = try makeServer(dir, device: "dev-b")
        for (ref, text) in zip(refs, texts) { #expect(try other.readAsset(ref) == text) }
        #expect(other.missingAssets(refs).isEmpty && other.hasAsset(refs[7].sha256))
        // Fifteen new texts: loose. A big text that does not compress: loose, with the rest packed.
        let few = try store.putAssets(Self.texts(15, tag: "few"))
        #expect(try Self.looseCount(store) == 15 && Self.packNames(store).count == 1)
        var noise = SystemRandomNumberGenerator()
        let big = Data((0..<(AssetPack.largestBlob + 10)).map { _ in UInt8.random(in: 0...255, using: &noise) })
        let mixed = Self.texts(20, tag: "mixed") + [big]
        let mixedRefs = try store.putAssets(mixed)
        #expect(try Self.looseCount(store) == 16 && Self.packNames(store).count == 2)
        for (ref, text) in zip(few + mixedRefs, Self.texts(15, tag: "few") + mixed) { #expect(try store.readAsset(ref) == text) }
    }

    /// Texts already packed are not written again by a batch big enough to read the packs' indexes (another device's
    /// first sync of the same notes): it writes nothing and touches the pack (gc never removes a pack reused after
    /// its mark); a batch with a few new texts packs only those. A small batch of a store that has not read the
    /// indexes writes its texts (twice on the server, which costs only room); once it has, it finds them.
    @Test func packedTextsAreReusedAndTouched() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let texts = Self.texts(AssetPack.lookupBatch + 20, size: 200)
        _ = try store.putAssets(texts)
        let pack = store.layout.packsDirectory + "/" + (try #require(try Self.packNames(store).first))
        let before = try #require(ServerFiles(store).storage.info(pack))
        TestServer.waitForTheServersClock()
        // Another device, whose store has read no index yet.
        let other = try makeServer(dir, device: "dev-b")
        _ = try other.putAssets(texts)
        #expect(try Self.packNames(store).count == 1 && Self.looseCount(store) == 0)
        let after = try #require(ServerFiles(store).storage.info(pack))
        #expect(after.mtime > before.mtime, "the reused pack is touched")
        _ = try other.putAssets(texts + Self.texts(30, tag: "new"))
        let names = try Self.packNames(store)
        #expect(names.count == 2)
        let newPack = try #require(names.first { pack.hasSuffix($0) == false })
        let index = try #require(try store.readPackIndex(newPack))
        #expect(index.count == 30)
        // A small batch: written by a store that read no index, found by one that did.
        let third = try makeServer(dir, device: "dev-c")
        _ = try third.putAssets(Array(texts.prefix(20)))
        #expect(try Self.packNames(store).count == 3)
        _ = try other.putAssets(Array(texts.suffix(20)))
        try other.putAsset(texts[100])
        #expect(try Self.packNames(store).count == 3 && Self.looseCount(store) == 0)
    }

    /// A store that read the packs' indexes finds a pack another device published later.
    @Test func aPackPublishedLaterIsFound() throws {
        let dir = try TempDirectory()
        let reader = try makeServer(dir)
        _ = try reader.putAssets(Self.texts(20, tag: "first"))
        #expect(reader.refreshPacks().packs.count == 1)
        let writer = try makeServer(dir, device: "dev-b")
        let later = Self.texts(40, tag: "later")
        let refs = try writer.putAssets(later)
        #expect(try reader.readAsset(refs[3]) == later[3])
        #expect(reader.missingAssets(refs).isEmpty)
    }

    /// A pack's header, index and name are checked before any text in it is used.
    @Test func damagedPacksAreToldApart() throws {
        let blobs = (0..<20).map { index in (name: ContentDigest(of: Data("\(index)".utf8)), blob: Data("blob \(index)".utf8)) }
        let pack = AssetPack.bytes(blobs)
        let name = pack.name + ".pack"
        let index = try AssetPack.index(of: pack.data, fileName: name)
        #expect(index.count == 20)
        for item in blobs {
            let entry = try #require(index.find(item.name))
            #expect(pack.data[Int(entry.offset)..<Int(entry.offset + entry.length)] == item.blob)
        }
        #expect(index.find(ContentDigest(of: Data("absent".utf8))) == nil)
        func reason(_ data: Data, _ fileName: String = name) -> String? {
            do {
                _ = try AssetPack.index(of: data, fileName: fileName)
                return nil
            } catch { return error.reason }
        }
        #expect(reason(pack.data, String(repeating: "0", count: 64) + ".pack")?.contains("not named by") == true)
        #expect(reason(pack.data.prefix(100))?.contains("header") == true)
        #expect(reason(pack.data.dropLast(5))?.contains("shorter") == true)
        #expect(reason(pack.data + Data("x".utf8))?.contains("after its index") == true)
        #expect(reason(Data("hello\n".utf8) + pack.data)?.contains("header") == true)
        var flipped = pack.data
        flipped[flipped.count - 20] ^= 1
        #expect(reason(flipped)?.contains("does not match its header") == true)
        var newer = pack.data
        newer[14] = UInt8(ascii: "2")
        #expect(reason(newer)?.contains("version 2") == true)
        // An index whose digest matches but whose entries are out of order, overlap or point outside the texts:
        // made by hand, with the header and the name that fit it.
        func forged(_ entries: [(ContentDigest, Int64, Int64)], size: Int) -> (Data, String) {
            var raw = Data()
            for (name, offset, length) in entries {
                raw.append(name.bytes)
                for word in [offset, length] { withUnsafeBytes(of: UInt64(word).bigEndian) { raw.append(contentsOf: $0) } }
            }
            let digest = ContentDigest(of: raw).hex
            var data = AssetPack.header(
                count: entries.count, indexOffset: Int64(AssetPack.headerSize + size), indexLength: raw.count, digest: digest)
            data.append(Data(count: size))
            data.append(raw)
            return (data, digest + ".pack")
        }
        let (a, b) = (ContentDigest(of: Data("a".utf8)), ContentDigest(of: Data("b".utf8)))
        let (low, high) = a < b ? (a, b) : (b, a)
        let start = Int64(AssetPack.headerSize)
        let outOfOrder = forged([(high, start, 1), (low, start + 1, 1)], size: 2)
        #expect(reason(outOfOrder.0, outOfOrder.1)?.contains("out of order") == true)
        let outside = forged([(low, start, 1), (high, start + 1, 50)], size: 2)
        #expect(reason(outside.0, outside.1)?.contains("outside") == true)
        let inHeader = forged([(low, 5, 1), (high, start + 1, 1)], size: 2)
        #expect(reason(inHeader.0, inHeader.1)?.contains("outside") == true)
        let overlapping = forged([(low, start, 2), (high, start + 1, 1)], size: 2)
        #expect(reason(overlapping.0, overlapping.1)?.contains("overlap") == true)
        let whole = forged([(low, start, 1), (high, start + 1, 1)], size: 2)
        #expect(reason(whole.0, whole.1) == nil)
        // A header whose index offset is the largest number there is: refused, nothing computed from it.
        var hostile = AssetPack.header(count: 1, indexOffset: Int64.max, indexLength: 48, digest: String(repeating: "a", count: 64))
        hostile.append(Data(count: 48))
        #expect(reason(hostile, String(repeating: "a", count: 64) + ".pack")?.contains("damaged pack header") == true)
        // Texts in another order than their names: whole.
        let reordered = forged([(low, start + 1, 1), (high, start, 1)], size: 2)
        #expect(reason(reordered.0, reordered.1) == nil)
        // An empty text where the next one starts, whichever name sorts first: whole (CI found a first sync's
        // pack refused for it, and every text in it unread).
        for (empty, next) in [(high, low), (low, high)] {
            let pack = AssetPack.bytes([(empty, Data()), (next, Data("text".utf8))])
            let index = try AssetPack.index(of: pack.data, fileName: pack.name + ".pack")
            #expect(index.find(empty)?.length == 0 && index.find(next)?.offset == start)
        }
        let emptyInside = forged([(low, start, 2), (high, start + 1, 0)], size: 2)
        #expect(reason(emptyInside.0, emptyInside.1) == nil)
    }

    /// The folder's pack temp gathers the writes that follow one another: whatever their sizes, and with the
    /// header written last at the start, the file holds exactly what a pack in memory holds.
    @Test func aPackTempHoldsWhatWasWritten() throws {
        let dir = try TempDirectory()
        var noise = SystemRandomNumberGenerator()
        let sizes = [0, 1, 300, FileIO.WriteFile.gather - 1, 7, FileIO.WriteFile.gather + 5, 2, 64 << 10, 0, 5]
        let blobs = sizes.enumerated().map { index, size in
            (
                name: ContentDigest(of: Data("blob \(index)".utf8)),
                blob: Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &noise) })
            )
        }
        let expected = AssetPack.bytes(blobs)
        let file = try FileIO.WriteFile(dir.sub("pack.tmp"))
        var builder = AssetPack.Builder(sink: file)
        for item in blobs { try builder.add(item.name, item.blob) }
        let (name, staged) = try builder.finish()
        #expect(name == expected.name)
        #expect(try Data(contentsOf: URL(fileURLWithPath: try #require(staged.temp))) == expected.data)
    }

    /// A note saved empty, in a batch with others: its pack reads whole on another device, whatever its place in
    /// the batch; fsck finds nothing. (The writer took a note the moment its editor had created it, empty.)
    @Test func anEmptyTextInAPackReads() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let reader = try makeServer(dir, device: "dev-b")
        var state = ZoneState()
        for position in [0, 1, 10, 20] {
            var texts = Self.texts(20, tag: "empty\(position)-", size: 40)
            texts.insert(Data(), at: position)
            let refs = try store.putAssets(texts)
            try Self.commit(store, &state, refs, prefix: "at\(position)-")
            reader.releasePackIndexes()
            for (ref, text) in zip(refs, texts) { #expect(try reader.readAsset(ref) == text) }
            #expect(reader.missingAssets(refs).isEmpty)
        }
        #expect(try Self.packNames(store).count >= 1)
        let report = try ServerFsck(store: reader).run(repair: false)
        #expect(report.findings.isEmpty, "\(report.findings)")
    }

    /// A text in a pack that does not match its digest is never returned; fsck names the pack, and --repair
    /// publishes the pack's whole texts loose before moving it to quarantine/: every other text still reads.
    @Test(.plainOnly("damages a text by its plain bytes"))
    func aDamagedTextInAPackIsRepairedAround() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        let texts = Self.texts(40)
        let refs = try store.putAssets(texts)
        try Self.commit(store, &state, refs, prefix: "n")
        let packName = try #require(try Self.packNames(store).first)
        let path = store.layout.packsDirectory + "/" + packName
        let files = ServerFiles(store)
        var data = try #require(try files.read(path))
        let victim = try #require(try store.readPackIndex(packName)?.find(store.storedName(refs[9].sha256)))
        data[Int(victim.offset + victim.length) - 1] ^= 0x55
        try files.write(path, data)
        let fresh = try makeServer(dir, device: "dev-b")
        #expect {
            try fresh.readAsset(refs[9])
        } throws: { error in
            let error = error as? NoteSyncError
            return error?.path == path && error?.fix?.contains("fsck --repair") == true
        }
        let check = try ServerFsck(store: fresh).run(repair: false)
        #expect(check.findings.contains { $0.kind == .corruptAsset && $0.path == path })
        #expect(check.findings.contains { $0.kind == .missingAsset })
        let repaired = try ServerFsck(store: fresh).run(repair: true)
        #expect(repaired.findings.contains { $0.kind == .corruptAsset && $0.repaired?.contains("39 whole texts") == true })
        #expect(try Self.packNames(store).isEmpty)
        let after = try makeServer(dir, device: "dev-c")
        for (index, ref) in refs.enumerated() where index != 9 { #expect(try after.readAsset(ref) == texts[index]) }
        let again = try ServerFsck(store: after).run(repair: false)
        #expect(again.findings.map(\.kind) == [.missingAsset], "\(again.findings)")
    }

    /// A pack whose index is damaged is reported and, with --repair, moved aside; its texts are reported missing.
    @Test func aPackWithADamagedIndexIsQuarantined() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        var state = ZoneState()
        let refs = try store.putAssets(Self.texts(20))
        try Self.commit(store, &state, refs, prefix: "n")
        let packName = try #require(try Self.packNames(store).first)
        let path = store.layout.packsDirectory + "/" + packName
        let files = ServerFiles(store)
        var data = try #require(try files.read(path))
        data[data.count - 30] ^= 1
        try files.write(path, data)
        let fresh = try makeServer(dir, device: "dev-b")
        #expect(throws: NoteSyncError.self) { try fresh.readAsset(refs[0]) }
        let repaired = try ServerFsck(store: fresh).run(repair: true)
        #expect(repaired.findings.contains { $0.kind == .corruptAsset && $0.path == path && $0.repaired != nil })
        #expect(repaired.findings.filter { $0.kind == .missingAsset }.count == 20)
        #expect(try Self.packNames(store).isEmpty)
    }

    /// gc removes a pack whose texts are all unreferenced, rewrites one that is mostly unreferenced (its other texts
    /// loose first), and keeps one a writer reused after the mark; everything still referenced reads, and fsck is
    /// clean.
    @Test func gcRemovesAndRewritesPacks() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        try store.setRetentionPolicy(RetentionPolicy(all: 0, hourly: 0, daily: 0, weekly: 0))
        var state = ZoneState()
        let first = Self.texts(40, tag: "first")
        let second = Self.texts(40, tag: "second")
        let firstRefs = try store.putAssets(first)
        try Self.commit(store, &state, firstRefs, prefix: "a")
        let secondRefs = try store.putAssets(second)
        try Self.commit(store, &state, secondRefs, prefix: "b")
        let packs = try Self.packNames(store)
        #expect(packs.count == 2)
        // Every a-note saved again (so the first pack is dead), and 30 of the 40 b-notes (the second mostly dead).
        let third = Self.texts(40, tag: "third")
        try Self.commit(store, &state, try store.putAssets(third), prefix: "a")
        let fourth = Self.texts(30, tag: "fourth")
        try Self.commit(store, &state, try store.putAssets(fourth), prefix: "b")
        TestServer.waitForTheServersClock()
        let preview = try store.collectGarbage(grace: 0, dryRun: true)
        #expect(preview.packsRemoved == 1 && preview.packsRewritten == 1, "\(preview)")
        #expect(try Self.packNames(store).count == 4, "a dry run changes nothing")
        let report = try store.collectGarbage(grace: 0, dryRun: false)
        #expect(report.packsRemoved == 1 && report.packsRewritten == 1, "\(report)")
        #expect(report.assetsRemoved == 70, "\(report)")
        let left = try Self.packNames(store)
        #expect(left.count == 2 && !left.contains(packs[0]) && !left.contains(packs[1]))
        #expect(try Self.looseCount(store) == 10)
        let reader = try makeServer(dir, device: "dev-b")
        for (ref, text) in zip(secondRefs[30...], second[30...]) { #expect(try reader.readAsset(ref) == text) }
        for (ref, text) in zip(try store.putAssets(third), third) { #expect(try reader.readAsset(ref) == text) }
        let fsck = try ServerFsck(store: reader).run(repair: false)
        #expect(fsck.isClean, "\(fsck.findings)")
    }

    /// A pack a writer reuses after gc marked it stays: the touch, as for a loose asset.
    @Test func aPackReusedAfterTheMarkStays() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        try store.setRetentionPolicy(RetentionPolicy(all: 0, hourly: 0, daily: 0, weekly: 0))
        var state = ZoneState()
        let old = Self.texts(30, tag: "old")
        try Self.commit(store, &state, try store.putAssets(old), prefix: "n")
        try Self.commit(store, &state, try store.putAssets(Self.texts(30, tag: "new")), prefix: "n")
        TestServer.waitForTheServersClock()
        // The mark (a long grace: nothing swept), then a writer that reuses the old texts, then the sweep.
        let marked = try store.collectGarbage(grace: 3600, dryRun: false)
        #expect(marked.assetsMarked == 30 && marked.packsRemoved == 0)
        TestServer.waitForTheServersClock()
        // A writer that has read the packs' indexes (it read a text) reuses the old texts.
        let writer = try makeServer(dir, device: "dev-b")
        #expect(try writer.readAsset(AssetRef(of: old[0])) == old[0])
        let reused = try writer.putAssets(old)
        #expect(try Self.packNames(store).count == 2, "nothing written")
        // The sweep of that mark alone (a gc run now would mark the texts again, after the touch).
        var swept = GCReport(dryRun: false, policy: "", end: 0)
        try store.sweep(grace: 0, now: Clock.nowNanoseconds(), dryRun: false, pending: nil, report: &swept)
        #expect(swept.packsRemoved == 0 && swept.packsRewritten == 0 && swept.assetsRemoved == 0, "\(swept)")
        #expect(try Self.packNames(store).count == 2)
        for (ref, text) in zip(reused, old) { #expect(try writer.readAsset(ref) == text) }
    }

    /// A store that read a pack's index before gc rewrote it reads the pack's texts loose afterwards.
    @Test func aReaderFindsTextsMovedOutOfARewrittenPack() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        try store.setRetentionPolicy(RetentionPolicy(all: 0, hourly: 0, daily: 0, weekly: 0))
        var state = ZoneState()
        let texts = Self.texts(40)
        let refs = try store.putAssets(texts)
        try Self.commit(store, &state, refs, prefix: "n")
        let reader = try makeServer(dir, device: "dev-b")
        #expect(try reader.readAsset(refs[39]) == texts[39])
        try Self.commit(store, &state, try store.putAssets(Self.texts(30, tag: "again")), prefix: "n")
        TestServer.waitForTheServersClock()
        let report = try store.collectGarbage(grace: 0, dryRun: false)
        #expect(report.packsRewritten == 1, "\(report)")
        #expect(try reader.readAsset(refs[35]) == texts[35])
    }

    /// The pack goes between a reader's miss on the loose file and its read of the pack's index, or of the text
    /// itself after the index (gc rewrote it: the text is loose now): the reader looks loose again and reads it.
    @Test(.folderOnly("moves files in the middle of a read"), arguments: [true, false])
    func aPackGoneInTheMiddleOfAReadSendsTheReaderBackToTheLooseFile(atTheIndex: Bool) throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let texts = Self.texts(20)
        let refs = try store.putAssets(texts)
        let pack = store.layout.packsDirectory + "/" + (try #require(try Self.packNames(store).first))
        let indexOffset = try #require(try store.readPackIndex(String(pack.split(separator: "/").last!))).blobsEnd
        let moved = Mutex(false)
        let storage = RacingStorage(store.storage) { path, offset in
            guard path == pack, offset > Int64(AssetPack.headerSize), (offset == indexOffset) == atTheIndex,
                !moved.withLock({ $0 })
            else { return }
            moved.withLock { $0 = true }
            // What gc's rewrite does: every text loose, then the pack removed.
            let index = try! store.readPackIndex(String(pack.split(separator: "/").last!))!
            let data = try! FileIO.read(pack)!
            for entry in index.entries {
                try! FileIO.makeDirectories(store.layout.assetShard(entry.name))
                try! FileIO.createAndSync(
                    store.layout.assetPath(entry.name), data[Int(entry.offset)..<Int(entry.offset + entry.length)])
            }
            unlink(pack)
        }
        let reader = try ServerStore(storage: storage, device: "dev-b", logger: testLogger, vault: TestServer.vault)
        #expect(try reader.readAsset(refs[4]) == texts[4])
        #expect(moved.withLock { $0 }, "the pack was read, and went in the middle")
        #expect(try reader.readAsset(refs[5]) == texts[5])
    }

    /// A text whose pack gc removed after a store read its index is not taken as on the server: a single text, a
    /// batch and the check after a commit all find it missing, and it is written again.
    @Test func aTextInAPackGoneSinceItsIndexWasReadIsWrittenAgain() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let texts = Self.texts(20)
        let refs = try store.putAssets(texts)
        let packName = try #require(try Self.packNames(store).first)
        let writer = try makeServer(dir, device: "dev-b")
        #expect(try writer.readAsset(refs[0]) == texts[0])
        let staged = try writer.stageAssets(texts)
        _ = try writer.publish(staged)
        #expect(try Self.packNames(store) == [packName] && Self.looseCount(store) == 0, "found in the pack: not written")
        // The pack goes (as a sweep would, after the touch and before the commit's check).
        try ServerFiles(store).remove(store.layout.packsDirectory + "/" + packName)
        #expect(writer.missingAssets(refs, staged: staged).count == 20)
        // One text, through a table that still names the pack: written loose.
        try writer.putAsset(texts[3])
        #expect(try Self.looseCount(store) == 1)
        // A batch: packed again.
        _ = try writer.putAssets(texts)
        let fresh = try makeServer(dir, device: "dev-c")
        for (ref, text) in zip(refs, texts) { #expect(try fresh.readAsset(ref) == text) }
        #expect(fresh.missingAssets(refs).isEmpty)
    }

    /// A batch that gives a text twice: both are in the pack the batch wrote, or found the text in, for the check
    /// after the commit. A batch of texts found in one pack and texts packed anew: once the first pack is gone, its
    /// texts (and only they) are missing, whatever the order the check is given them in (a text's pack is never
    /// taken from the place of another).
    @Test func aTextGivenTwiceInABatchIsInItsPackBothTimes() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let texts = Self.texts(20)
        let batch = texts + [texts[3], texts[3], texts[17]]
        let staged = try store.stageAssets(batch)
        let published = try store.publish(staged)
        #expect(try Self.packNames(store).count == 1 && Self.looseCount(store) == 0)
        #expect(staged.packPaths.count == 1 && staged.packOf == Array(repeating: 0, count: batch.count))
        #expect(store.missingAssets(published, staged: staged).isEmpty)
        #expect(store.missingAssets(published.reversed(), staged: staged).isEmpty)

        let writer = try makeServer(dir, device: "dev-b")
        #expect(try writer.readAsset(published[0]) == texts[0])
        let mixed = batch + Self.texts(20, tag: "new ")
        let found = try writer.stageAssets(mixed)
        let again = try writer.publish(found)
        #expect(try Self.packNames(store).count == 2, "the texts found are not written again, the new ones are packed")
        #expect(found.packPaths.count == 2 && found.packOf.allSatisfy { $0 >= 0 })
        #expect(Set(found.packOf[..<batch.count]).count == 1 && found.packOf[3] == found.packOf[21])
        #expect(writer.missingAssets(again, staged: found).isEmpty)
        try ServerFiles(store).remove(found.packPaths[Int(found.packOf[0])])
        let gone = Set(published.map(\.sha256))
        var random = SplitMix(seed: 48)
        for refs in [again, again.reversed(), again.shuffled(using: &random)] {
            let missing = writer.missingAssets(refs, staged: found)
            #expect(missing.count == batch.count && Set(missing.map(\.sha256)) == gone)
        }
        #expect(writer.missingAssets(Array(again.suffix(5)), staged: found).isEmpty)
        #expect(writer.missingAssets(Array(again.prefix(5)), staged: found).count == 5)
    }

    /// Formats 4 and 6 are only ever encrypted servers, 5 only a plain one.
    @Test func formatsAndEncryptionMustAgree() throws {
        let layout = ServerLayout(root: "/nowhere")
        func marker(_ format: Int, encrypted: Bool) -> Data {
            let encryption = encrypted ? #", "encryption" : {"keys" : "keys/", "scheme" : "notesync-e1"}"# : ""
            return Data(
                #"{"created" : 1, "format" : \#(format), "id" : "8b56cf21-42f5-4890-8c0b-c5445b0d6ee8", "zones" : ["notes"]\#(encryption)}"#
                    .utf8)
        }
        #expect(throws: NoteSyncError.self) { try ServerStore.usableMarker(marker(6, encrypted: false), layout) }
        #expect(throws: NoteSyncError.self) { try ServerStore.usableMarker(marker(4, encrypted: false), layout) }
        #expect(throws: NoteSyncError.self) { try ServerStore.usableMarker(marker(5, encrypted: true), layout) }
        #expect(throws: NoteSyncError.self) { try ServerStore.usableMarker(marker(3, encrypted: true), layout) }
        #expect(try ServerStore.usableMarker(marker(5, encrypted: false), layout).upgradedFormat == 5)
        #expect(try ServerStore.usableMarker(marker(3, encrypted: false), layout).upgradedFormat == 5)
        #expect(try ServerStore.usableMarker(marker(4, encrypted: true), layout).upgradedFormat == 6)
        #expect(try ServerStore.usableMarker(marker(6, encrypted: true), layout).upgradedFormat == 6)
        // A newer format, plain or encrypted, is kept as it is (read only).
        #expect(try ServerStore.usableMarker(marker(7, encrypted: false), layout).upgradedFormat == 7)
    }

    /// `server upgrade` moves format 3 to 5 and 4 to 6 (the marker only); a format-3 store writes no pack, and
    /// after the upgrade it does. A marker of a format after this build's only reads.
    @Test(.folderOnly("rewrites the marker file by hand"))
    func upgradeAllowsPacks() throws {
        let dir = try TempDirectory()
        let store = try makeServer(dir)
        let markerPath = store.layout.marker
        let text = try String(contentsOfFile: markerPath, encoding: .utf8)
        let (now, old) = TestServer.isEncrypted ? (6, 4) : (5, 3)
        try Data(text.replacingOccurrences(of: "\"format\" : \(now)", with: "\"format\" : \(old)").utf8).write(
            to: URL(fileURLWithPath: markerPath))
        let older = try makeServer(dir)
        #expect(older.marker.format == old && !older.hasPacks && !older.isReadOnly)
        let refs = try older.putAssets(Self.texts(40))
        #expect(try Self.packNames(older).isEmpty && Self.looseCount(older) == 40)
        try older.upgradeMarker()
        let upgraded = try makeServer(dir)
        #expect(upgraded.marker.format == now && upgraded.hasPacks)
        _ = try upgraded.putAssets(Self.texts(40, tag: "after"))
        #expect(try Self.packNames(upgraded).count == 1)
        for ref in refs { _ = try upgraded.readAsset(ref) }
        try Data(text.replacingOccurrences(of: "\"format\" : \(now)", with: "\"format\" : 7").utf8).write(
            to: URL(fileURLWithPath: markerPath))
        #expect(try makeServer(dir).isReadOnly)
    }
}

/// A folder's storage whose reads of a range call `before(path, offset)` first: a test makes something happen in the
/// middle of a read. Each staging sink made is told to `sinking(suffix)`.
final class RacingStorage: ServerStorage, @unchecked Sendable {
    let base: any ServerStorage
    let before: @Sendable (String, Int64) -> Void
    let sinking: @Sendable (String) -> Void

    init(
        _ base: any ServerStorage, before: @escaping @Sendable (String, Int64) -> Void = { _, _ in },
        sinking: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.base = base
        self.before = before
        self.sinking = sinking
    }

    var root: String { base.root }
    var isNetwork: Bool { base.isNetwork }
    var hasDirectories: Bool { base.hasDirectories }
    var hasLocalPaths: Bool { base.hasLocalPaths }
    var stagesTempFiles: Bool { base.stagesTempFiles }
    var billsRequests: Bool { base.billsRequests }
    var probeNamePrefix: String? { base.probeNamePrefix }
    var largestFile: Int64? { base.largestFile }
    var packSize: Int64 { base.packSize }
    func info(_ path: String) -> StorageInfo? { base.info(path) }
    func hasEntry(_ path: String) -> Bool { base.hasEntry(path) }
    func read(_ path: String, limit: Int) throws -> Data? { try base.read(path, limit: limit) }
    func readRange(_ path: String, offset: Int64, length: Int) throws -> Data? {
        before(path, offset)
        return try base.readRange(path, offset: offset, length: length)
    }
    func list(_ directory: String) throws -> [String]? { try base.list(directory) }
    func listWithInfo(_ directory: String) throws -> [(name: String, info: StorageInfo?)]? { try base.listWithInfo(directory) }
    func makeDirectory(_ directory: String) throws { try base.makeDirectory(directory) }
    func removeEmptyDirectory(_ directory: String) { base.removeEmptyDirectory(directory) }
    func noServer(marker: String) -> NoteSyncError { base.noServer(marker: marker) }
    func syncDirectory(_ directory: String) throws { try base.syncDirectory(directory) }
    func syncStaged() throws { try base.syncStaged() }
    func stage(_ data: Data, device: String, suffix: String, sync: Bool) throws -> StagedFile {
        try base.stage(data, device: device, suffix: suffix, sync: sync)
    }
    func packSink(device: String) throws -> any StagingSink { try base.packSink(device: device) }
    func stagingSink(device: String, suffix: String) throws -> any StagingSink {
        sinking(suffix)
        return try base.stagingSink(device: device, suffix: suffix)
    }
    func publish(_ staged: StagedFile, as path: String) throws -> AtomicPublish.Outcome { try base.publish(staged, as: path) }
    func discard(_ staged: StagedFile) { base.discard(staged) }
    func replace(_ path: String, with data: Data, device: String) throws { try base.replace(path, with: data, device: device) }
    func remove(_ path: String) throws -> Bool { try base.remove(path) }
    func move(_ path: String, to target: String) throws -> Bool { try base.move(path, to: target) }
    func touch(_ path: String) { base.touch(path) }
    func map<T>(_ count: Int, _ body: (Int) -> Result<T, any Error>) -> [Result<T, any Error>?] { base.map(count, body) }
}
