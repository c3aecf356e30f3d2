import Foundation
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport

/// Fuzzes the reading of a log entry: the sealed-file header, the entry's JSON, and folding it into records.
///
/// Each input is tried twice: as a whole file, which exercises the header checks, and as the body of a file
/// sealed with a correct header, so that mutations reach the JSON decoder instead of failing the checksum.
enum EntryFuzz {
    static let kind = "entry"

    static func check(_ input: Data) throws(FuzzViolation) {
        let opened = try? SealedFile.open(input, kind: kind, as: LogEntry.self)
        if let entry = opened {
            try checkEntry(entry)
        }
        // Data slices keep their parent's indices: the same bytes at another offset must read the same.
        let slice = (Data([0x0A]) + input).dropFirst()
        try FuzzViolation.require(
            (try? SealedFile.open(slice, kind: kind, as: LogEntry.self)) == opened,
            "a file reads differently from a Data slice")
        let sealed = seal(body: input)
        let entry: LogEntry
        do {
            entry = try SealedFile.open(sealed, kind: kind, as: LogEntry.self)
        } catch {
            guard case .malformed = error else {
                throw FuzzViolation(message: "a correctly sealed body was refused: \(error)")
            }
            try FuzzViolation.require(
                FuzzViolation.isPrintable(error.description),
                "the refusal prints a control character: \(error.description)")
            return
        }
        try checkSealing(sealed)
        try checkEntry(entry)
    }

    /// `body` behind a header that matches it.
    static func seal(body: Data) -> Data {
        var data = Data("notesync-\(kind) \(SealedFile.format) \(body.count) \(ContentDigest(of: body).hex)\n".utf8)
        data.append(body)
        return data
    }

    /// A valid sealed file stops opening when it is cut, extended or given another kind.
    static func checkSealing(_ sealed: Data) throws(FuzzViolation) {
        try FuzzViolation.require(
            (try? SealedFile.verify(sealed.dropLast(), kind: kind)) == nil,
            "a file missing its last byte verifies")
        try FuzzViolation.require(
            (try? SealedFile.verify(sealed + Data([0x0A]), kind: kind)) == nil,
            "a file with a byte appended verifies")
        try FuzzViolation.require(
            (try? SealedFile.verify(sealed, kind: "snapshot")) == nil,
            "an entry file verifies as a snapshot")
    }

    /// A decoded entry re-encodes to bytes that decode to the same entry, and folds into records that hold
    /// only validated names, the last change of each.
    static func checkEntry(_ entry: LogEntry) throws(FuzzViolation) {
        let encoded: Data
        let again: LogEntry
        do {
            encoded = try SealedFile.seal(entry, kind: kind)
            again = try SealedFile.open(encoded, kind: kind, as: LogEntry.self)
        } catch {
            throw FuzzViolation(message: "a decoded entry does not re-encode and decode: \(error)")
        }
        try FuzzViolation.require(again == entry, "the entry changed through re-encoding: \(entry) became \(again)")
        let reencoded = try? SealedFile.seal(again, kind: kind)
        try FuzzViolation.require(reencoded == encoded, "encoding the entry is not deterministic")
        try checkFold(entry)
    }

    static func checkFold(_ entry: LogEntry) throws(FuzzViolation) {
        guard entry.seq > Int64.min else { return }
        var state = ZoneState(token: entry.seq - 1)
        state.apply(entry)
        try FuzzViolation.require(state.token == entry.seq, "the token is \(state.token) after entry \(entry.seq)")

        // The heads, computed independently: the last change of each valid name, unless it is a save without text.
        var expected: [String: RecordChange] = [:]
        var quarantined = 0
        for change in entry.changes {
            guard (try? RecordName(validating: change.name)) != nil, change.op == .delete || change.text != nil else {
                quarantined += 1
                continue
            }
            expected[change.name] = change
        }
        try FuzzViolation.require(
            state.quarantined.count == quarantined,
            "\(state.quarantined.count) changes quarantined, expected \(quarantined)")
        try FuzzViolation.require(
            state.heads.count == expected.count,
            "\(state.heads.count) heads, expected \(expected.count)")
        for (name, head) in state.heads {
            try NameFuzz.checkAccepted(name, from: name.string)
            guard let change = expected[name.string] else {
                throw FuzzViolation(message: "a head for \(FuzzViolation.show(name.string)), which no change saved")
            }
            try FuzzViolation.require(
                head.tag == entry.seq && head.deleted == (change.op == .delete)
                    && head.text == (head.deleted ? nil : change.text) && head.modified == change.modified
                    && head.version == change.version && head.device == entry.device,
                "the head of \(FuzzViolation.show(name.string)) is \(head), from change \(change)")
        }
        for record in state.quarantined + state.casViolations {
            try FuzzViolation.require(
                FuzzViolation.isPrintable(record.description),
                "a quarantine record prints a control character: \(record.description)")
        }
    }
}
