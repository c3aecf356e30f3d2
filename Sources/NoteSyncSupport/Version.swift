import CSyscalls

public enum NoteSyncVersion {
    public static let string = "0.2.0"

    /// The git commit this binary was built from (`NOTESYNC_COMMIT` at build time), or nil for a plain `swift build`.
    public static var commit: String? {
        let commit = String(cString: ns_build_commit())
        return commit.isEmpty ? nil : commit
    }

    /// What `notesync --version` prints: `0.2.0 (commit 1e75e5e)`, or `0.2.0 (unknown commit)`.
    public static var full: String { "\(string) (\(commit.map { "commit \($0)" } ?? "unknown commit"))" }
}
