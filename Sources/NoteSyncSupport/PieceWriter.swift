import Foundation

/// What a version written into the notes folder holds (``NoteApplier``): bytes in memory, or a big text
/// (``BigText``) written a piece at a time by `fill`, which throws (and the file is removed) when what it wrote is not
/// the text it must be: a damaged asset never reaches a note. The pieces go to the path with
/// ``PieceWriter/partialSuffix`` until the text is whole and verified: a process killed meanwhile leaves a file that
/// recovery knows for a version cut short, never one it could take for a user's edit.
public enum NoteContents {
    case bytes(Data)
    case pieces((PieceWriter) throws -> Void)

    /// Creates `path` exclusively with `mode` (exactly, with `exactMode`) holding the contents, fsynced unless `sync`
    /// is false; nothing is left at `path` when it throws.
    package func create(at path: String, mode: mode_t, exactMode: Bool, sync: Bool = true) throws {
        switch self {
        case .bytes(let data):
            try FileIO.createAndSync(path, data, mode: mode, exactMode: exactMode, sync: sync)
        case .pieces(let fill):
            let partial = path + PieceWriter.partialSuffix
            let writer = try PieceWriter(creating: partial, mode: mode, exactMode: exactMode)
            do {
                try fill(writer)
                try writer.finish(sync: sync)
                // `path` is a new temp's name, never a note's: a plain rename cannot replace anything there.
                guard rename(partial, path) == 0 else { throw NoteSyncError.posix("rename", path: path, errno: errno) }
            } catch {
                writer.discard()
                unlink(partial)
                throw error
            }
        }
    }
}

/// Writes a text a piece at a time into a file made for it (`O_CREAT|O_EXCL`, never through a link), with a hole
/// wherever a whole block of it is zeros: the block is skipped (`pwrite` at the next offset) and the file given its
/// size at the end (`ftruncate(2)`), so a sparse note stays sparse where it arrives. A filesystem without holes
/// fills them with zeros itself.
public final class PieceWriter {
    /// The unit of holes: a block of this many zeros, at a multiple of it, is not written.
    package static let block = 64 << 10
    /// Ends the name of a version still being written (``NoteContents/create(at:mode:exactMode:sync:)``).
    public static let partialSuffix = ".notesync-partial"
    package let path: String
    private var fd: Int32
    /// The bytes taken so far, and those of them not written yet (less than a piece).
    package private(set) var size: Int64 = 0
    private var pending = Data()

    package init(creating path: String, mode: mode_t, exactMode: Bool) throws {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        if fd < 0 { throw NoteSyncError.posix("create", path: path, errno: errno) }
        if let fixed = SimulatedFolders.personality(at: path)?.fixedMode {
            _ = fchmod(fd, fixed)
        } else if exactMode {
            FileIO.setModeExactly(fd, mode)
        }
    }

    deinit { discard() }

    /// Appends `bytes`.
    public func write(_ bytes: Data) throws {
        pending.append(bytes)
        size += Int64(bytes.count)
        if pending.count >= BigText.pieceBytes { try flush(whole: false) }
    }

    /// Writes what is left, gives the file its size, fsyncs (with `sync`) and closes it.
    package func finish(sync: Bool) throws {
        try flush(whole: true)
        if ftruncate(fd, off_t(size)) != 0 { throw NoteSyncError.posix("ftruncate", path: path, errno: errno) }
        if sync, fsync(fd) != 0 { throw NoteSyncError.posix("fsync", path: path, errno: errno) }
        close(fd)
        fd = -1
    }

    /// Closes and removes the file, unless it was finished.
    package func discard() {
        pending = Data()
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
        unlink(path)
    }

    /// Writes the pending blocks that are not all zeros, each run of them with one `pwrite`; unless `whole`, a
    /// last block not yet complete waits for more.
    private func flush(whole: Bool) throws {
        let start = size - Int64(pending.count)
        let count = whole ? pending.count : pending.count - pending.count % Self.block
        guard count > 0 else { return }
        try pending.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            var run: Int?
            var offset = 0
            while offset < count {
                let end = min(offset + Self.block, count)
                let zero = Self.isZero(UnsafeRawBufferPointer(rebasing: buffer[offset..<end]))
                if zero, let from = run {
                    try writeAll(UnsafeRawBufferPointer(rebasing: buffer[from..<offset]), at: start + Int64(from))
                    run = nil
                } else if !zero && run == nil {
                    run = offset
                }
                offset = end
            }
            if let from = run {
                try writeAll(UnsafeRawBufferPointer(rebasing: buffer[from..<count]), at: start + Int64(from))
            }
        }
        pending.removeSubrange(0..<count)
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var done = 0
        while done < bytes.count {
            let wrote = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if wrote < 0 {
                if errno == EINTR { continue }
                throw NoteSyncError.posix("write", path: path, errno: errno)
            }
            done += wrote
        }
    }

    /// Whether every byte is zero: the first is, and each equals the next.
    static func isZero(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return true }
        return bytes[0] == 0 && memcmp(base, base + 1, bytes.count - 1) == 0
    }
}
