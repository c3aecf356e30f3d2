import Foundation
import NoteSyncDiff
import NoteSyncModel
import NoteSyncSupport

/// Which vanished notes became which new ones: the local half of rename detection, a pure and deterministic
/// function of the names, digests, inodes and (for a rename with an edit) a similarity the caller measures.
///
/// A *source* is a synced note gone from its name; a *target* a note with no base at a name the server does not hold
/// live. The rules, in order, each taking only what the ones before left:
/// 1. **Same text and same inode**: the file itself was renamed.
/// 2. **Same text**: paired by the longest common ending of their paths (a folder renamed keeps every note's path
///    below it: `work/x/a.md` goes with `job/x/a.md`, not `job/y/a.md`), then by byte order of the source's and the
///    target's names. In a group of more than 4,096 candidate pairs (thousands of empty notes), by file name, then
///    byte order.
/// 3. **Similar text** (a rename and an edit within one sync): a similarity of at least
///    ``minimumSimilarity``, highest first, then the same inode first, then byte order. Only for a few notes
///    (``maxSimilarityCandidates`` on each side), as it reads both texts.
///
/// The same inode alone proves nothing: ext4 gives a deleted file's inode to the next file made.
public enum MoveMatcher {
    public struct Source: Hashable, Sendable {
        public var name: RecordName
        public var digest: ContentDigest
        public var size: Int64
        public var inode: UInt64?

        public init(name: RecordName, digest: ContentDigest, size: Int64, inode: UInt64?) {
            self.name = name
            self.digest = digest
            self.size = size
            self.inode = inode
        }
    }

    public struct Target: Hashable, Sendable {
        public var name: RecordName
        public var digest: ContentDigest
        public var size: Int64
        public var inode: UInt64

        public init(name: RecordName, digest: ContentDigest, size: Int64, inode: UInt64) {
            self.name = name
            self.digest = digest
            self.size = size
            self.inode = inode
        }
    }

    public struct Pair: Hashable, Sendable, CustomStringConvertible {
        public var from: RecordName
        public var to: RecordName
        public var description: String { "\(from) → \(to)" }
    }

    /// The least similarity (``similarity(_:_:)``) at which a note gone and a new one are taken for a rename with an
    /// edit.
    public static let minimumSimilarity = 0.5
    /// At most this many unpaired sources, and as many targets, are compared by similarity.
    public static let maxSimilarityCandidates = 64
    /// Sizes further apart than this factor are never compared.
    static let maxSizeRatio: Int64 = 2

    /// The pairs, sorted by source name. `similarity` measures a source's text against a target's (0…1), or nil
    /// when it cannot; nil skips rule 3.
    ///
    /// Worked on indices into the two lists (sorted by name, as the planner makes them: not copied then), with a
    /// flag for each note taken, not with dictionaries of arrays by inode and by text and sets of the names each
    /// rule took: for the notes of a renamed folder those would add to the peak of their sync.
    public static func match(
        sources: [Source], targets: [Target], similarity: ((Source, Target) -> Double?)? = nil
    ) -> [Pair] {
        let sources = isSorted(sources, by: \.name) ? sources : sources.sorted { $0.name < $1.name }
        let targets = isSorted(targets, by: \.name) ? targets : targets.sorted { $0.name < $1.name }
        var sourceTaken = [Bool](repeating: false, count: sources.count)
        var targetTaken = [Bool](repeating: false, count: targets.count)
        var pairs: [Pair] = []
        func pair(_ source: Int, _ target: Int) {
            sourceTaken[source] = true
            targetTaken[target] = true
            pairs.append(Pair(from: sources[source].name, to: targets[target].name))
        }

        // 1. The same file: same text, same inode. The targets by inode, then name (their index): for each source
        // in name order, the first free target of its inode with its text.
        do {
            let byInode = targets.indices.sorted { (targets[$0].inode, $0) < (targets[$1].inode, $1) }
            for (index, source) in sources.enumerated() {
                guard let inode = source.inode else { continue }
                var position = BinarySearch.lowerBound(byInode.count) { targets[byInode[$0]].inode < inode }
                while position < byInode.count, targets[byInode[position]].inode == inode {
                    let target = byInode[position]
                    if !targetTaken[target] && targets[target].digest == source.digest {
                        pair(index, target)
                        break
                    }
                    position += 1
                }
            }
        }

        // 2. The same text: the notes left of each text, paired by path (``pairByPath(_:_:)``, both in name order).
        do {
            let freeSources = sources.indices.filter { !sourceTaken[$0] }.sorted {
                (sources[$0].digest, $0) < (sources[$1].digest, $1)
            }
            let freeTargets = targets.indices.filter { !targetTaken[$0] }.sorted {
                (targets[$0].digest, $0) < (targets[$1].digest, $1)
            }
            var next = 0
            var start = 0
            while start < freeSources.count {
                let digest = sources[freeSources[start]].digest
                var end = start + 1
                while end < freeSources.count, sources[freeSources[end]].digest == digest { end += 1 }
                while next < freeTargets.count, targets[freeTargets[next]].digest < digest { next += 1 }
                var last = next
                while last < freeTargets.count, targets[freeTargets[last]].digest == digest { last += 1 }
                if last > next {
                    let group = Array(freeSources[start..<end])
                    let candidates = Array(freeTargets[next..<last])
                    let found = pairByPath(group.map { sources[$0].name }, candidates.map { targets[$0].name })
                    if group.count == 1 && candidates.count == 1 {
                        if !found.isEmpty { pair(group[0], candidates[0]) }
                    } else {
                        let sourceAt = Dictionary(group.map { (sources[$0].name, $0) }, uniquingKeysWith: { first, _ in first })
                        let targetAt = Dictionary(candidates.map { (targets[$0].name, $0) }, uniquingKeysWith: { first, _ in first })
                        for found in found { pair(sourceAt[found.from]!, targetAt[found.to]!) }
                    }
                }
                start = end
                next = last
            }
        }

        // 3. Similar text: a rename and an edit.
        let restSources = sources.indices.filter { !sourceTaken[$0] }.map { sources[$0] }
        let restTargets = targets.indices.filter { !targetTaken[$0] }.map { targets[$0] }
        if let similarity, !restSources.isEmpty, !restTargets.isEmpty, restSources.count <= maxSimilarityCandidates,
            restTargets.count <= maxSimilarityCandidates
        {
            var scored: [(score: Double, sameInode: Bool, pair: Pair)] = []
            for source in restSources {
                for target in restTargets where comparableSizes(source.size, target.size) {
                    guard let score = similarity(source, target), score >= minimumSimilarity else { continue }
                    scored.append((score, source.inode == target.inode, Pair(from: source.name, to: target.name)))
                }
            }
            scored.sort { a, b in
                if a.score != b.score { return a.score > b.score }
                if a.sameInode != b.sameInode { return a.sameInode }
                if a.pair.from != b.pair.from { return a.pair.from < b.pair.from }
                return a.pair.to < b.pair.to
            }
            var from = Set<RecordName>()
            var to = Set<RecordName>()
            for candidate in scored where !from.contains(candidate.pair.from) && !to.contains(candidate.pair.to) {
                from.insert(candidate.pair.from)
                to.insert(candidate.pair.to)
                pairs.append(candidate.pair)
            }
        }
        return pairs.sorted { $0.from < $1.from }
    }

    /// Whether `elements` are in increasing order of `key`, none equal.
    static func isSorted<Element>(_ elements: [Element], by key: (Element) -> RecordName) -> Bool {
        guard elements.count > 1 else { return true }
        for index in 1..<elements.count where !(key(elements[index - 1]) < key(elements[index])) { return false }
        return true
    }

    /// Notes of the same text paired by the longest common ending of their paths, then byte order (both lists
    /// sorted).
    static func pairByPath(_ sources: [RecordName], _ targets: [RecordName]) -> [Pair] {
        if sources.count == 1 && targets.count == 1 { return [Pair(from: sources[0], to: targets[0])] }
        var pairs: [Pair] = []
        if sources.count * targets.count > 4096 {
            // Thousands of notes of one text (empty ones): by file name, then in order.
            // Each file name's targets in order, and how many of them are taken (taking one copies nothing).
            let buckets = Dictionary(grouping: targets) { $0.components.last.map(String.init) ?? "" }
            var taken: [String: Int] = [:]
            var rest: [RecordName] = []
            for source in sources {
                let key = source.components.last.map(String.init) ?? ""
                if let bucket = buckets[key], case let used = taken[key, default: 0], used < bucket.count {
                    pairs.append(Pair(from: source, to: bucket[used]))
                    taken[key] = used + 1
                } else {
                    rest.append(source)
                }
            }
            let remaining = buckets.flatMap { key, bucket in bucket[taken[key, default: 0]...] }.sorted()
            for (source, target) in zip(rest, remaining) { pairs.append(Pair(from: source, to: target)) }
            return pairs
        }
        var scored: [(common: Int, pair: Pair)] = []
        for source in sources {
            let sourceParts = source.components
            for target in targets {
                let common = zip(sourceParts.reversed(), target.components.reversed()).prefix { $0 == $1 }.count
                scored.append((common, Pair(from: source, to: target)))
            }
        }
        scored.sort { a, b in
            if a.common != b.common { return a.common > b.common }
            if a.pair.from != b.pair.from { return a.pair.from < b.pair.from }
            return a.pair.to < b.pair.to
        }
        var from = Set<RecordName>()
        var to = Set<RecordName>()
        for candidate in scored where !from.contains(candidate.pair.from) && !to.contains(candidate.pair.to) {
            from.insert(candidate.pair.from)
            to.insert(candidate.pair.to)
            pairs.append(candidate.pair)
        }
        return pairs
    }

    static func comparableSizes(_ a: Int64, _ b: Int64) -> Bool {
        let (small, large) = (min(a, b), max(a, b))
        return large <= max(small, 64) * maxSizeRatio
    }

    /// How alike two texts are, by lines: twice the lines they share (as multisets) over the lines of both; 1 for
    /// two empty texts.
    public static func similarity(_ a: Data, _ b: Data) -> Double {
        let left = LineText(a)
        let right = LineText(b)
        guard left.count + right.count > 0 else { return 1 }
        var counts: [ArraySlice<UInt8>: Int] = [:]
        for index in 0..<left.count { counts[left[index], default: 0] += 1 }
        var shared = 0
        for index in 0..<right.count {
            if let count = counts[right[index]], count > 0 {
                shared += 1
                counts[right[index]] = count - 1
            }
        }
        return Double(2 * shared) / Double(left.count + right.count)
    }
}
