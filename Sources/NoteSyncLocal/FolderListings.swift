import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// The entries of folders in the notes folder, each listed once and grouped by their names' NFC, for one partial
/// scan: finding a name's Unicode twins (``FolderScanner/twins(of:listings:)``) is then a lookup, and a scan of many
/// paths in one folder lists it once, not once per path.
///
/// Held for one scan only, so that it never answers for a folder changed since (a scan reads, it writes nothing).
struct FolderListings {
    package let root: String
    /// Per folder (relative, "" for the root): its entries' names by their NFC's bytes, or nil when it could not be
    /// listed. By bytes: `String` keys compare canonical equivalence.
    private var folders: [String: [[UInt8]: [String]]?] = [:]
    /// How many folders were listed: one per folder asked about.
    package private(set) var listed = 0

    package init(root: String) { self.root = root }

    /// The entries of `folder` whose names are `form` (in NFC) in some Unicode form; nil when the folder cannot be
    /// listed (gone, or unreadable).
    package mutating func entries(in folder: String, named form: String) -> [String]? {
        if let known = folders[folder] { return known.map { $0[Array(form.utf8)] ?? [] } }
        listed += 1
        guard let entries = try? FileIO.listEntries(folder.isEmpty ? root : root + "/" + folder) else {
            folders[folder] = .some(nil)
            return nil
        }
        var byForm: [[UInt8]: [String]] = [:]
        for entry in entries where entry.isValidUTF8 { byForm[Array(RecordName.nfc(entry.name).utf8), default: []].append(entry.name) }
        folders[folder] = .some(byForm)
        return byForm[Array(form.utf8)] ?? []
    }
}
