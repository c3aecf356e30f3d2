import NoteSyncCrypto
import NoteSyncSupport

/// Records by name with a dictionary's interface, stored densely: the names and the values in two arrays of exactly
/// the rows there are, found through an open-addressing index of one word per bucket.
///
/// A `Dictionary` stores keys and values in its buckets, and keeps at most three buckets in four full: past 98,304
/// records it doubles to 262,144 buckets of a whole record each. Here a bucket is 8 bytes and the rows take what
/// they hold: the agent keeps every base and head in memory, so this is most of what it holds (docs/agent.md,
/// "Memory").
///
/// Each bucket holds the low 32 bits of the name's hash and the row number plus one (0: empty), so a probe compares
/// names only when their hashes agree, and growing the index hashes no name again. Collisions probe linearly and
/// a removal shifts the run after it back (no tombstones); the last row moves into a removed row's place. The order
/// of iteration is the order of the rows: insertion order until a removal, and never meaningful to callers (as
/// with a `Dictionary`).
///
/// Its lookups and updates are `@inlinable`: the table is generic and is used from other modules (the local state,
/// the reconciler, the engine), where only inlinable code is specialized for their `Value`; unspecialized, every
/// probe copies and compares through the value's witness table.
public struct RecordTable<Value> {
    public typealias Element = (key: RecordName, value: Value)

    @usableFromInline var names: ContiguousArray<RecordName> = []
    @usableFromInline var rows: ContiguousArray<Value> = []
    /// `hash32 << 32 | (row + 1)`, 0 for an empty bucket; a power of two long, at most three quarters full.
    @usableFromInline var buckets: ContiguousArray<UInt64> = []

    @inlinable public init() {}

    @inlinable public init(minimumCapacity: Int) {
        reserveCapacity(minimumCapacity)
    }

    public init<S: Sequence>(uniqueKeysWithValues elements: S) where S.Element == (RecordName, Value) {
        for (name, value) in elements {
            precondition(self.updateValue(value, forKey: name) == nil, "duplicate name \(name) in a record table")
        }
    }

    @inlinable public var count: Int { rows.count }
    @inlinable public var isEmpty: Bool { rows.isEmpty }

    /// Room for `capacity` records without growing (the rows' arrays and the index).
    @inlinable public mutating func reserveCapacity(_ capacity: Int) {
        names.reserveCapacity(capacity)
        rows.reserveCapacity(capacity)
        let needed = Self.bucketCount(for: capacity)
        if needed > buckets.count { rebuild(bucketCount: needed) }
    }

    /// The records the rows' storage holds without growing.
    package var capacity: Int { rows.capacity }

    /// Room for `added` more records, made at once when the rows would outgrow their storage, and at least half as
    /// many again as there are, so that a run of small additions still grows it geometrically: appended one by one,
    /// a table of 131,072 rows that takes 20,000 more grows to 262,144.
    @inlinable package mutating func reserveRoom(forAdding added: Int) {
        let needed = count + added
        guard needed > rows.capacity else { return }
        reserveCapacity(Swift.max(needed, count + count / 2))
    }

    @inlinable public subscript(name: RecordName) -> Value? {
        get { row(of: name).map { rows[$0] } }
        set {
            if let newValue {
                updateValue(newValue, forKey: name)
            } else {
                removeValue(forKey: name)
            }
        }
    }

    /// Sets the value of `name`; the value it replaced, nil when it is new.
    @discardableResult @inlinable
    public mutating func updateValue(_ value: Value, forKey name: RecordName) -> Value? {
        updateValue(value, forKey: name, hash: NameHash(name))
    }

    /// ``updateValue(_:forKey:)`` with `name`'s hash computed already (``NameHash``): a name looked up in one table and
    /// put in another is hashed once.
    @discardableResult @inlinable
    package mutating func updateValue(_ value: Value, forKey name: RecordName, hash nameHash: NameHash) -> Value? {
        let hash = nameHash.value
        if let (_, row) = find(name, hash: hash) {
            let old = rows[row]
            rows[row] = value
            return old
        }
        if (rows.count + 1) * 4 > buckets.count * 3 {
            rebuild(bucketCount: Swift.max(Self.bucketCount(for: rows.count + 1), buckets.count * 2))
        }
        let mask = buckets.count - 1
        var bucket = Int(hash) & mask
        while buckets[bucket] != 0 { bucket = (bucket + 1) & mask }
        buckets[bucket] = UInt64(hash) << 32 | UInt64(rows.count + 1)
        names.append(name)
        rows.append(value)
        return nil
    }

    /// Removes `name`; its value, nil when there was none. The last row takes its place.
    @discardableResult @inlinable
    public mutating func removeValue(forKey name: RecordName) -> Value? {
        guard let (bucket, row) = find(name, hash: Self.hash32(name)) else { return nil }
        let old = rows[row]
        vacate(bucket)
        let last = rows.count - 1
        if row != last {
            // The last row moves into the hole: its bucket is repointed.
            let (lastBucket, _) = find(names[last], hash: Self.hash32(names[last]))!
            buckets[lastBucket] = buckets[lastBucket] & ~0xFFFF_FFFF | UInt64(row + 1)
            names.swapAt(row, last)
            rows.swapAt(row, last)
        }
        names.removeLast()
        rows.removeLast()
        return old
    }

    /// The table's own copy of `name`, when it has a record: another table can share its string.
    @inlinable public func storedName(_ name: RecordName) -> RecordName? { row(of: name).map { names[$0] } }

    /// ``storedName(_:)`` with `name`'s hash computed already.
    @inlinable package func storedName(_ name: RecordName, hash: NameHash) -> RecordName? {
        find(name, hash: hash.value).map { names[$0.row] }
    }

    /// ``storedName(_:hash:)`` for names asked in about the order of this table's rows (another table loaded from
    /// rows written in the same order): the row at `next` is compared first, without the index, and `next` moves
    /// past the row found.
    @inlinable package func storedName(_ name: RecordName, hash: NameHash, next: inout Int) -> RecordName? {
        if next < names.count, names[next] == name {
            next += 1
            return names[next - 1]
        }
        guard let row = find(name, hash: hash.value)?.row else { return nil }
        next = row + 1
        return names[row]
    }

    /// The row of `name`'s record, an index into ``values``: for a caller that looks many names up at once and keeps
    /// only where each was found. Valid until the table changes.
    @inlinable public func rowIndex(of name: RecordName) -> Int? { row(of: name) }

    /// ``rowIndex(of:)`` with `name`'s hash computed already.
    @inlinable package func rowIndex(of name: RecordName, hash: NameHash) -> Int? { find(name, hash: hash.value)?.row }

    /// Whether `name` has a record.
    @inlinable public func contains(_ name: RecordName) -> Bool { row(of: name) != nil }

    /// The value at `row` (an index into ``values``), read without a lookup.
    @inlinable package func value(atRow row: Int) -> Value { rows[row] }

    /// Changes the value at `row` in place (its name, and so the index, stay as they are).
    @inlinable package mutating func modifyValue(atRow row: Int, _ body: (inout Value) -> Void) { body(&rows[row]) }

    /// The names, in the order of the rows (`contains` looks the name up).
    @inlinable public var keys: Keys { Keys(table: self) }
    /// The values, in the order of the rows.
    @inlinable public var values: ContiguousArray<Value> { rows }

    // MARK: the index

    @inlinable func row(of name: RecordName) -> Int? {
        find(name, hash: Self.hash32(name))?.row
    }

    /// The bucket and row of `name`.
    @inlinable func find(_ name: RecordName, hash: UInt32) -> (bucket: Int, row: Int)? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count - 1
        var bucket = Int(hash) & mask
        while true {
            let slot = buckets[bucket]
            if slot == 0 { return nil }
            if UInt32(truncatingIfNeeded: slot >> 32) == hash {
                let row = Int(truncatingIfNeeded: slot & 0xFFFF_FFFF) - 1
                if names[row] == name { return (bucket, row) }
            }
            bucket = (bucket + 1) & mask
        }
    }

    /// Empties `bucket` and shifts back the buckets after it that would no longer be found (backward-shift deletion).
    @inlinable mutating func vacate(_ bucket: Int) {
        let mask = buckets.count - 1
        var hole = bucket
        var next = (bucket + 1) & mask
        buckets[hole] = 0
        while buckets[next] != 0 {
            let home = Int(truncatingIfNeeded: buckets[next] >> 32) & mask
            // The entry at `next` may fill the hole if the hole lies on its probe path, from home to next.
            if (next &- home) & mask >= (next &- hole) & mask {
                buckets[hole] = buckets[next]
                buckets[next] = 0
                hole = next
            }
            next = (next + 1) & mask
        }
    }

    @inlinable mutating func rebuild(bucketCount: Int) {
        var rebuilt = ContiguousArray<UInt64>(repeating: 0, count: bucketCount)
        let mask = bucketCount - 1
        for slot in buckets where slot != 0 {
            var bucket = Int(truncatingIfNeeded: slot >> 32) & mask
            while rebuilt[bucket] != 0 { bucket = (bucket + 1) & mask }
            rebuilt[bucket] = slot
        }
        buckets = rebuilt
    }

    /// The smallest power of two that holds `count` records at most three quarters full (at least 8).
    @inlinable static func bucketCount(for count: Int) -> Int {
        var buckets = 8
        while count * 4 > buckets * 3 { buckets *= 2 }
        return buckets
    }

    @inlinable static func hash32(_ name: RecordName) -> UInt32 {
        NameHash(name).value
    }
}

/// A name's hash as every ``RecordTable`` indexes it (the low 32 bits of its `hashValue`, fixed for the process): a
/// caller that looks a name up in one table and puts it in another, or checks it against the bases and then adds it
/// to the scan's table, computes it once.
@usableFromInline package struct NameHash: Sendable {
    @usableFromInline package let value: UInt32

    @inlinable package init(_ name: RecordName) {
        value = UInt32(truncatingIfNeeded: name.hashValue)
    }
}

extension RecordTable: Sequence {
    public struct Iterator: IteratorProtocol {
        @usableFromInline let names: ContiguousArray<RecordName>
        @usableFromInline let rows: ContiguousArray<Value>
        @usableFromInline var position = 0

        @inlinable init(names: ContiguousArray<RecordName>, rows: ContiguousArray<Value>) {
            self.names = names
            self.rows = rows
        }

        @inlinable public mutating func next() -> Element? {
            guard position < rows.count else { return nil }
            defer { position += 1 }
            return (names[position], rows[position])
        }
    }

    @inlinable public func makeIterator() -> Iterator { Iterator(names: names, rows: rows) }
    @inlinable public var underestimatedCount: Int { rows.count }
}

extension RecordTable {
    /// The names of a table: a collection in row order whose `contains` is a lookup.
    public struct Keys: RandomAccessCollection {
        @usableFromInline let table: RecordTable
        @inlinable init(table: RecordTable) { self.table = table }
        @inlinable public var startIndex: Int { 0 }
        @inlinable public var endIndex: Int { table.names.count }
        @inlinable public subscript(position: Int) -> RecordName { table.names[position] }

        @inlinable public func contains(_ name: RecordName) -> Bool { table.contains(name) }
        @inlinable public func _customContainsEquatableElement(_ element: RecordName) -> Bool? { table.contains(element) }
    }
}

extension RecordTable: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (RecordName, Value)...) {
        self.init(uniqueKeysWithValues: elements)
    }
}

extension RecordTable: Equatable where Value: Equatable {
    /// The same names with equal values, in whatever order.
    public static func == (a: RecordTable, b: RecordTable) -> Bool {
        guard a.count == b.count else { return false }
        for (name, value) in a {
            guard let other = b[name], other == value else { return false }
        }
        return true
    }
}

extension RecordTable: Hashable where Value: Hashable {
    /// Independent of the order, as equality is.
    public func hash(into hasher: inout Hasher) {
        var combined = 0
        for (name, value) in self {
            var element = Hasher()
            element.combine(name)
            element.combine(value)
            combined ^= element.finalize()
        }
        hasher.combine(count)
        hasher.combine(combined)
    }
}

extension RecordTable: Sendable where Value: Sendable {}

extension RecordTable: CustomStringConvertible {
    public var description: String {
        "[" + map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "]"
    }
}
