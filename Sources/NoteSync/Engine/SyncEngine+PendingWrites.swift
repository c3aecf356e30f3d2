import Foundation

/// The versions a sync writes into notes, recorded before it writes them (`MetaKey.pendingWrites`).
///
/// A process killed between writing a note and recording its base leaves a note that holds a server version with no
/// base (or an older one). Taken as the user's, such a note undid a delete made meanwhile by another device, or was
/// merged against the wrong ancestor. ``SyncEngine/historyBase(_:local:head:base:knownBefore:store:)`` finds the
/// version in the log; once gc has compacted the log past it (and the policy thinned it from the snapshot's history)
/// only this device can know. So the versions are recorded locally first, and the next sync adopts each as the base
/// of a note that holds exactly it: the same text and the same mtime (a pull gives the note the record's).
struct PendingWrite: Codable, Hashable, Sendable {
    var name: RecordName
    var tag: Int64
    var text: AssetRef
    var modified: Int64

    init?(_ name: RecordName, _ head: RecordHead) {
        guard !head.deleted, let text = head.text else { return nil }
        self.name = name
        self.tag = head.tag
        self.text = text
        self.modified = head.modified
    }

    /// The base of `file` when it holds exactly this version. Without the note's fingerprint: the write may have
    /// displaced a save of the user's into a temp file, which is then kept as a conflict copy; with the fingerprint
    /// the note would pass for the very file its base recorded, never swapped in, and the temp for a stale one.
    func base(of file: LocalFile) -> BaseRecord? {
        guard file.digest == text.sha256, file.modified == modified else { return nil }
        return BaseRecord(name: name, tag: tag, digest: text.sha256, size: text.size, modified: modified, fingerprint: nil)
    }
}

extension SyncEngine {
    /// The server versions `plan` writes into notes under their own names: pulls and the server's side of a conflict
    /// (a conflict copy of a server version is a note new here, found again by ``unsyncedNotes(scan:bases:zone:renamed:)``).
    static func pendingWrites(_ plan: [Step]) -> [PendingWrite] {
        plan.compactMap { step in
            switch step.action {
            case .write(let head, _): PendingWrite(step.name, head)
            case .conflict(let conflict) where !conflict.madeBefore && !conflict.localWins:
                PendingWrite(step.name, conflict.server)
            default: nil
            }
        }
    }

    /// Records `writes` before any is written, after those of a killed sync still unread (none, normally: the next
    /// sync adopts them first). No fault point of its own: a crash right after it is one before the first write.
    func recordPendingWrites(_ writes: [PendingWrite]) throws {
        guard !writes.isEmpty else { return }
        let earlier = try readPendingWrites()
        let encoded = Self.encodePendingWrites(earlier.isEmpty ? writes : earlier + writes)
        try state.updateQuietly { try $0.setMeta(.pendingWrites, encoded) }
    }

    /// The JSON array `JSONEncoder` makes of `writes` (and ``decodePendingWrites(_:)`` reads), written straight into
    /// one string: a first sync records 100,000 writes, and `JSONEncoder`'s tree of them held over 100 MB for a moment
    /// (B's first sync at 100,000 notes peaked at 326 MB).
    static func encodePendingWrites(_ writes: [PendingWrite]) -> String {
        var json = "["
        json.reserveCapacity(2 + writes.count * 200)
        for (index, write) in writes.enumerated() {
            if index > 0 { json += "," }
            json += "{\"name\":"
            appendJSONString(write.name.string, to: &json)
            json += ",\"tag\":\(write.tag),\"text\":{\"sha256\":\"\(write.text.sha256.hex)\",\"size\":\(write.text.size)}"
            json += ",\"modified\":\(write.modified)}"
        }
        json += "]"
        return json
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped, the rest as it is (UTF-8).
    private static func appendJSONString(_ text: String, to json: inout String) {
        json += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": json += "\\\""
            case "\\": json += "\\\\"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                json += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: json.unicodeScalars.append(scalar)
            }
        }
        json += "\""
    }

    private func readPendingWrites() throws -> [PendingWrite] {
        try state.meta(.pendingWrites).map(Self.decodePendingWrites) ?? []
    }

    /// An unreadable record only loses this recovery (the log's history is the other one): never the sync.
    static func decodePendingWrites(_ stored: String) -> [PendingWrite] {
        (try? JSONDecoder().decode([PendingWrite].self, from: Data(stored.utf8))) ?? []
    }

    /// Once the server can be read and the temp files a killed write left are settled (a save it displaced is kept
    /// as a conflict copy, judged against the old base): a note holding exactly a version a killed sync wrote takes
    /// it as its base (the newest such version, if newer than the base it has), and the record is cleared. Offline,
    /// the record waits with the temps. A dry run adopts them in memory only.
    func adoptPendingWrites(_ scan: inout ScanResult, bases: inout RecordTable<BaseRecord>, dryRun: Bool) throws {
        guard let stored = try state.meta(.pendingWrites) else { return }
        let writes = Self.decodePendingWrites(stored)
        var adopted: RecordTable<BaseRecord> = [:]
        for write in writes {
            guard let file = scan.files[write.name], let base = write.base(of: file),
                base.tag > (adopted[write.name]?.tag ?? bases[write.name]?.tag ?? 0)
            else { continue }
            adopted[write.name] = base
        }
        for (name, base) in adopted {
            scan.rebase(name, from: bases[name], to: base)
            bases[name] = base
        }
        guard !dryRun else { return }
        try state.updateQuietly { batch in
            for base in adopted.values { try batch.setBase(base) }
            try batch.setMeta(.pendingWrites, nil)
        }
    }
}
