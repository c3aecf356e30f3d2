import Foundation
import Synchronization

/// A text over ``threshold`` bytes goes the streaming way, end to end: read a piece at a time
/// (``pieceBytes``), hashed, stored as it is (never compressed, never packed), sealed chunk by chunk on an
/// encrypted server, sent from a temp file, and on the way back opened, verified and written a piece at a time, with
/// holes where it is all zeros (docs/server-format.md, "Big texts"). So a sync holds a few pieces of it, whatever its
/// size; smaller texts are read whole, which is faster.
public enum BigText {
    /// A text up to this is read, encoded and written whole, which is faster and lets it be compressed and packed;
    /// two are read at once on two cores, so this bounds what the whole texts cost a sync.
    public static let defaultThreshold: Int64 = 8 << 20

    /// The size from which a text streams: ``defaultThreshold``, or `NOTESYNC_BIG_TEXT_BYTES` (the integration
    /// tests' knob), or what a unit test binds for its task.
    @TaskLocal public static var threshold: Int64 = fromEnvironment ?? defaultThreshold

    private static let fromEnvironment: Int64? = ProcessInfo.processInfo.environment["NOTESYNC_BIG_TEXT_BYTES"]
        .flatMap { Int64($0) }.flatMap { $0 > 0 ? $0 : nil }

    /// The biggest file the server takes, when a unit test binds one for its task (nil: the storage's own,
    /// ``ServerStorage/largestFile``).
    @TaskLocal public static var largestStored: Int64?

    /// How much of a big text is read, sealed, sent or written at once.
    package static let pieceBytes = 1 << 20

    /// Whether a text of `size` bytes streams.
    package static func streams(_ size: Int64, threshold: Int64 = threshold) -> Bool { size > threshold }

    /// The scratch folders (``NotesFolder/uploads``) this process has cleared of what a killed sync left there.
    private static let cleared = Mutex<Set<String>>([])

    /// Removes the files in `scratch` the first time this process stages a big text there: a sync of a folder runs
    /// in one process at a time (its lock), so what is there then was left by one that was killed.
    package static func clearLeftovers(in scratch: String) {
        guard cleared.withLock({ $0.insert(scratch).inserted }) else { return }
        for name in (try? FileIO.list(scratch)) ?? [] where name.hasSuffix(".asset") { unlink(scratch + "/" + name) }
    }
}
