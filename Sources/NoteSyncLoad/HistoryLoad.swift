import ArgumentParser
import Foundation
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport

/// A server's history written in simulated time, then gc: the benchmark's "server over time" figures (scripts/bench).
/// An hour of autosave, a year of daily writing, or a big log for gc's time, written through the library with each
/// commit's time simulated (nobody waits an hour or a year). Prints JSON.
struct HistoryLoad: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "history-load")

    enum Scenario: String, ExpressibleByArgument { case autosave, year, scale }

    @OptionGroup var global: LoadOptions
    @Option var server: String
    @Option var scenario: Scenario
    /// The agent's pace (seconds): a save within it of the note's last commit waits (0: every save is a commit).
    @Option var pace: Double = 5
    @Option var seed: UInt64 = 1
    /// scale: notes, and entries after them.
    @Option var notes: Int = 100_000
    @Option var entries: Int = 100_000
    /// scale: gc's grace period in seconds. 0 removes the log entries the snapshot replaces; a longer one keeps them,
    /// with the snapshot at the end of the log (as for a week after each gc).
    @Option var grace: Int64 = 0

    static let second: Int64 = 1_000_000_000

    func run() throws {
        let logger = global.makeLogger()
        let store = try ServerStore(root: server, device: "load", logger: logger)
        var rng = SplitMix(seed: seed)
        var result: [String: Any] = ["scenario": scenario.rawValue, "format": store.marker.format, "pace": pace]
        switch scenario {
        case .autosave: try autosave(store, &rng, &result)
        case .year: try year(store, &rng, &result)
        case .scale: try scale(store, &rng, &result)
        }
        let data = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }

    // MARK: scenarios

    /// A 22 KB note saved every 0.5 s for an hour (a few words changed each time), committed as the agent paces it;
    /// then gc with the default policy at the end of the hour, with every version younger than an hour no longer
    /// kept (`--all 0`), and with the default policy a day later.
    private func autosave(_ store: ServerStore, _ rng: inout SplitMix, _ result: inout [String: Any]) throws {
        let start = Clock.nowNanoseconds() - 3600 * Self.second
        var words = Self.prose(words: 4_300, &rng)
        var state = ZoneState()
        let name = try RecordName(validating: "journal/today.md")
        var pacer = Pacer(pace: Int64(pace * 1e9))
        var saves = 0
        var commits = 0
        var text = Data()
        func commit(at time: Int64) throws {
            let ref = try store.putAsset(text)
            _ = try store.commit([.save(name, base: state.tag(of: name), text: ref, modified: time)], into: &state, time: time)
            commits += 1
        }
        for step in 0..<7_200 {
            let time = start + Int64(step) * Self.second / 2
            if let due = pacer.due(before: time) { try commit(at: due) }
            for _ in 0..<3 {
                words[Int(rng.next() % UInt64(words.count))] = Self.vocabulary[Int(rng.next() % UInt64(Self.vocabulary.count))]
            }
            text = Data(words.joined(separator: " ").utf8)
            saves += 1
            if pacer.saved(at: time) { try commit(at: time) }
        }
        if let due = pacer.flush() { try commit(at: due) }
        let end = start + 3600 * Self.second
        result["saves"] = saves
        result["commits"] = commits
        result["noteBytes"] = text.count
        result["before"] = Self.usage(store)
        if store.hasRetention {
            var report = try store.collectGarbage(grace: 0, dryRun: false, policy: .default, now: end)
            result["afterDefault"] = Self.usage(store)
            result["gcSeconds"] = report.seconds
            var noAll = RetentionPolicy.default
            noAll.all = 0
            report = try store.collectGarbage(grace: 0, dryRun: false, policy: noAll, now: end)
            result["afterAll0"] = Self.usage(store)
            report = try store.collectGarbage(grace: 0, dryRun: false, policy: .default, now: end + RetentionPolicy.day * Self.second)
            result["afterDefaultNextDay"] = Self.usage(store)
            _ = report
        }
    }

    /// A year of daily writing: 300 notes of 1–8 KB in nested folders; each day one to three writing sessions of
    /// 10–20 minutes on one note (a sentence added or a word changed every 10 s, committed as paced), about one new
    /// note a day and a delete every ten days; gc once a day with the default policy.
    private func year(_ store: ServerStore, _ rng: inout SplitMix, _ result: inout [String: Any]) throws {
        let start = Clock.nowNanoseconds() - 366 * RetentionPolicy.day * Self.second
        var state = ZoneState()
        var texts: [RecordName: [String]] = [:]
        var changes: [RecordChange] = []
        for index in 0..<300 {
            let name = try RecordName(validating: "area\(index % 6)/topic\(index % 23)/note\(index).md")
            texts[name] = Self.prose(words: 150 + Int(rng.next() % 1_000), &rng)
            let ref = try store.putAsset(Data(texts[name]!.joined(separator: " ").utf8))
            changes.append(.save(name, base: 0, text: ref, modified: start))
        }
        _ = try store.commit(changes, into: &state, time: start)
        var commits = 1
        var checkpoints: [[String: Any]] = []
        var gcSeconds: [Double] = []
        var created = 300
        for day in 0..<365 {
            let dayStart = start + Int64(day) * RetentionPolicy.day * Self.second
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                let live = texts.keys.sorted()
                let name = live[Int(rng.next() % UInt64(live.count))]
                var time = dayStart + Int64(8 * 3600 + Int(rng.next() % (12 * 3600))) * Self.second
                var pacer = Pacer(pace: Int64(pace * 1e9))
                func commit(at moment: Int64) throws {
                    let ref = try store.putAsset(Data(texts[name]!.joined(separator: " ").utf8))
                    _ = try store.commit(
                        [.save(name, base: state.tag(of: name), text: ref, modified: moment)], into: &state, time: moment)
                    commits += 1
                }
                for _ in 0..<(60 + Int(rng.next() % 61)) {
                    if let due = pacer.due(before: time) { try commit(at: due) }
                    if rng.next() % 3 == 0 {
                        let index = Int(rng.next() % UInt64(texts[name]!.count))
                        texts[name]![index] = Self.vocabulary[Int(rng.next() % UInt64(Self.vocabulary.count))]
                    } else {
                        texts[name]! += Self.prose(words: 12, &rng)
                    }
                    if pacer.saved(at: time) { try commit(at: time) }
                    time += 10 * Self.second
                }
                if let due = pacer.flush() { try commit(at: due) }
            }
            do {
                created += 1
                let name = try RecordName(validating: "area\(created % 6)/inbox/new\(created).md")
                texts[name] = Self.prose(words: 100 + Int(rng.next() % 400), &rng)
                let time = dayStart + 20 * 3600 * Self.second
                let ref = try store.putAsset(Data(texts[name]!.joined(separator: " ").utf8))
                _ = try store.commit([.save(name, base: 0, text: ref, modified: time)], into: &state, time: time)
                commits += 1
            }
            if day % 10 == 9, let gone = texts.keys.sorted().dropFirst(Int(rng.next() % 50)).first {
                let time = dayStart + 21 * 3600 * Self.second
                _ = try store.commit([.delete(gone, base: state.tag(of: gone), modified: time)], into: &state, time: time)
                texts[gone] = nil
                commits += 1
            }
            let night = dayStart + 23 * 3600 * Self.second
            if store.hasRetention {
                gcSeconds.append(try store.collectGarbage(grace: 0, dryRun: false, policy: .default, now: night).seconds)
            }
            if [29, 89, 179, 364].contains(day) {
                var usage = Self.usage(store)
                let live = texts.values.reduce(0) { $0 + Int64(Data($1.joined(separator: " ").utf8).count) }
                usage["day"] = day + 1
                usage["liveTextBytes"] = live
                usage["ratio"] = Double(usage["bytes"] as? Int64 ?? 0) / Double(live)
                checkpoints.append(usage)
            }
        }
        result["commits"] = commits
        result["notes"] = texts.count
        result["checkpoints"] = checkpoints
        result["gcSecondsMax"] = gcSeconds.max() ?? 0
    }

    /// `notes` notes, then `entries` entries each saving one of them, over eight weeks of simulated time (written
    /// without flushes: a fixture, not a sync), then one gc with the default policy and `grace`, timed.
    private func scale(_ store: ServerStore, _ rng: inout SplitMix, _ result: inout [String: Any]) throws {
        let start = Clock.nowNanoseconds() - 56 * RetentionPolicy.day * Self.second
        let layout = store.layout
        var prev: ContentDigest?
        var seq: Int64 = 0
        func write(_ changes: [RecordChange], at time: Int64) throws {
            seq += 1
            var entry = LogEntry(seq: seq, commit: UUID().uuidString.lowercased(), device: "load", time: time, changes: changes, prev: prev)
            let data = try SealedFile.seal(entry, kind: "entry")
            entry.digest = ContentDigest(of: data)
            try FileIO.makeDirectory(layout.shardDirectory(of: seq))
            try FileIO.createAndSync(layout.entryPath(seq), data, sync: false)
            prev = entry.digest
        }
        let names = try (0..<notes).map { try RecordName(validating: "d\($0 % 100)/n\($0).md") }
        var tags = [Int64](repeating: 0, count: notes)
        let written = ContinuousClock.now
        for batch in stride(from: 0, to: notes, by: 1_000) {
            let range = batch..<min(batch + 1_000, notes)
            let refs = try store.putAssets(range.map { Data("note \($0)\n\(String(repeating: "text of the note ", count: 20))".utf8) })
            try write(zip(range, refs).map { .save(names[$0], base: 0, text: $1, modified: start) }, at: start)
            for index in range { tags[index] = seq }
        }
        let span = 56 * RetentionPolicy.day * Self.second
        var pending: [Data] = []
        var picks: [Int] = []
        for step in 0..<entries {
            let index = Int(rng.next() % UInt64(notes))
            picks.append(index)
            pending.append(Data("note \(index) edit \(step)\n\(String(repeating: "text of the note ", count: 20))".utf8))
            if pending.count == 1_000 || step == entries - 1 {
                let refs = try store.putAssets(pending)
                for (offset, ref) in refs.enumerated() {
                    let at = start + span / Int64(entries) * Int64(step - refs.count + 1 + offset)
                    try write([.save(names[picks[offset]], base: tags[picks[offset]], text: ref, modified: at)], at: at)
                    tags[picks[offset]] = seq
                }
                pending.removeAll(keepingCapacity: true)
                picks.removeAll(keepingCapacity: true)
            }
        }
        try FileIO.syncFilesystem(layout.logDirectory)
        let elapsed = (ContinuousClock.now - written).components
        result["writeSeconds"] = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        result["notes"] = notes
        result["entries"] = Int(seq)
        result["before"] = Self.usage(store)
        let report = try store.collectGarbage(grace: grace, dryRun: false, policy: .default, now: start + span)
        result["gcSeconds"] = report.seconds
        result["versionsKept"] = report.versionsKept
        result["versionsDropped"] = report.versionsDropped
        result["after"] = Self.usage(store)
        result["peakResidentMB"] = Self.peakResidentMB()
    }

    // MARK: helpers

    /// The agent's pacing (Agent/CommitPacer.swift), on simulated times: a save within `pace` of the last commit
    /// waits until the pace has passed, and then goes with the note as it is by then.
    struct Pacer {
        let pace: Int64
        var last: Int64?
        var waiting: Int64?

        init(pace: Int64) { self.pace = pace }

        /// A save at `time`: true when it is committed now.
        mutating func saved(at time: Int64) -> Bool {
            if waiting != nil { return false }
            if let last, time - last < pace {
                waiting = last + pace
                return false
            }
            last = time
            return true
        }

        /// A waiting save due before `time`: its commit time.
        mutating func due(before time: Int64) -> Int64? {
            guard let due = waiting, due <= time else { return nil }
            waiting = nil
            last = due
            return due
        }

        mutating func flush() -> Int64? {
            defer { waiting = nil }
            return waiting
        }
    }

    static let vocabulary =
        ("the of and to in a is that for it as was with be by on not he this are or his from at which but have an they "
        + "you were her she there been one all we their has would when if so no will more about can out up what "
        + "sync note server device folder retention history version merge conflict offline commit snapshot meeting "
        + "project draft idea garden recipe travel budget review plan weekly notes reading book chapter").split(separator: " ").map(
            String.init)

    static func prose(words: Int, _ rng: inout SplitMix) -> [String] {
        (0..<words).map { index in
            let word = vocabulary[Int(rng.next() % UInt64(vocabulary.count))]
            return index % 17 == 16 ? word + ".\n" : word
        }
    }

    /// Bytes and files under the server, temps left out.
    static func usage(_ store: ServerStore) -> [String: Any] {
        var bytes: Int64 = 0
        var files = 0
        let root = store.layout.root
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let path = enumerator?.nextObject() as? String {
            guard !path.contains("/tmp/"), let info = FileIO.lstatInfo(root + "/" + path), (info.st_mode & S_IFMT) == S_IFREG else {
                continue
            }
            bytes += Int64(info.st_size)
            files += 1
        }
        return ["bytes": bytes, "files": files]
    }

    static func peakResidentMB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kb = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kb / 1024
    }
}
