import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

extension IgnoreRules {
    /// A built-in rule for a shape of name that no glob says exactly.
    enum BuiltInCheck: Sendable, Equatable {
        /// vim/neovim's "can I create files here" probe: `4913`, then `+123` while the name is taken
        /// (vim `bufwrite.c`). Only this sequence, so a note named `2024` is still a note.
        case vimWriteProbe
        /// `#` and digits: the name inotify reports for an `O_TMPFILE` file, which no listing shows.
        case inotifyPhantom
        /// `mkstemp` temps: `prefix` then exactly six of `[A-Za-z0-9]`, at least one of them not a
        /// lowercase letter, so that a word such as `sedentary` stays a note.
        case mkstempTemp(prefix: String)

        package func matches(_ name: [Unicode.Scalar], isDirectory: Bool) -> Bool {
            guard !isDirectory else { return false }
            switch self {
            case .vimWriteProbe:
                guard (4...18).contains(name.count), name.first != "0", name.allSatisfy(Self.isDigit),
                    let value = Int(String(String.UnicodeScalarView(name)))
                else { return false }
                return value >= 4913 && (value - 4913) % 123 == 0
            case .inotifyPhantom:
                return name.count > 1 && name.first == "#" && name.dropFirst().allSatisfy(Self.isDigit)
            case .mkstempTemp(let prefix):
                let prefixLength = prefix.unicodeScalars.count
                guard name.count == prefixLength + 6, name.starts(with: prefix.unicodeScalars) else { return false }
                let random = name.dropFirst(prefixLength)
                return random.allSatisfy { $0.isASCII && $0.properties.isAlphabetic || Self.isDigit($0) }
                    && random.contains { !("a"..."z").contains($0) }
            }
        }

        private static func isDigit(_ scalar: Unicode.Scalar) -> Bool {
            ("0"..."9").contains(scalar)
        }
    }

    private struct BuiltInEntry {
        let pattern: String
        let madeBy: String
        var check: BuiltInCheck?
    }

    /// The shipped list: editor, OS and sync-tool litter. A name that could be a real note (`*.save`, `*.part`,
    /// Qt's `note.md.XXXXXX`, any all-digit name) is left out: settling covers short-lived temps, and
    /// syncing litter loses nothing while ignoring a note would.
    private static let builtInEntries: [BuiltInEntry] = [
        // Editors
        BuiltInEntry(pattern: ".*.sw?", madeBy: "vim/neovim swap files and their .swx probe, nano lock files"),
        BuiltInEntry(pattern: "*~", madeBy: "backups of vim, emacs, nano, gedit and Kate"),
        BuiltInEntry(pattern: "*.un~", madeBy: "vim persistent undo files"),
        BuiltInEntry(
            pattern: "4913 5036 5159 … (4913 + 123·k)", madeBy: "vim/neovim write probe", check: .vimWriteProbe
        ),
        BuiltInEntry(pattern: ".#*", madeBy: "emacs lock symlinks"),
        BuiltInEntry(pattern: "#*#", madeBy: "emacs auto-save files"),
        BuiltInEntry(pattern: ".goutputstream-*", madeBy: "GIO temps of gedit and other GNOME apps"),
        BuiltInEntry(
            pattern: "#<digits>", madeBy: "O_TMPFILE names seen by inotify: Qt QSaveFile, Kate",
            check: .inotifyPhantom
        ),
        BuiltInEntry(pattern: "*.kate-swp", madeBy: "Kate/KTextEditor swap files"),
        BuiltInEntry(pattern: "*___jb_tmp___", madeBy: "JetBrains IDEs' safe write"),
        BuiltInEntry(pattern: "*___jb_old___", madeBy: "JetBrains IDEs' safe write"),
        BuiltInEntry(pattern: "*___jb_bak___", madeBy: "JetBrains IDEs' safe write"),
        BuiltInEntry(pattern: "*.vsctmp", madeBy: "VS Code atomic-write temps"),
        BuiltInEntry(pattern: "sedXXXXXX", madeBy: "sed -i temps", check: .mkstempTemp(prefix: "sed")),
        BuiltInEntry(
            pattern: "tmpXXXXXX", madeBy: "emacs file-precious-flag temps", check: .mkstempTemp(prefix: "tmp")
        ),
        BuiltInEntry(pattern: ".dat.nosync*", madeBy: "Swift Foundation atomic-write temps"),
        BuiltInEntry(pattern: ".~lock.*#", madeBy: "LibreOffice lock files"),
        BuiltInEntry(pattern: "~$*", madeBy: "Microsoft Office owner files"),
        // Sync tools (their conflict copies are reported instead: ForeignConflictCopy)
        BuiltInEntry(pattern: ".stfolder", madeBy: "Syncthing folder marker"),
        BuiltInEntry(pattern: ".stignore", madeBy: "Syncthing ignore file"),
        BuiltInEntry(pattern: ".stversions", madeBy: "Syncthing file versions"),
        BuiltInEntry(pattern: ".syncthing.*.tmp", madeBy: "Syncthing temps"),
        BuiltInEntry(pattern: "~syncthing~*.tmp", madeBy: "Syncthing temps on Windows"),
        BuiltInEntry(pattern: ".dropbox", madeBy: "Dropbox folder marker"),
        BuiltInEntry(pattern: ".dropbox.attr", madeBy: "Dropbox attributes"),
        BuiltInEntry(pattern: ".dropbox.cache", madeBy: "Dropbox cache"),
        BuiltInEntry(pattern: ".~*", madeBy: "Dropbox and Nextcloud temps, office locks"),
        BuiltInEntry(pattern: ".*.~*", madeBy: "Nextcloud/ownCloud download temps"),
        BuiltInEntry(pattern: ".owncloudsync.log*", madeBy: "Nextcloud/ownCloud sync log"),
        BuiltInEntry(pattern: ".sync_*.db*", madeBy: "Nextcloud/ownCloud sync journal"),
        BuiltInEntry(pattern: "._sync_*.db*", madeBy: "Nextcloud/ownCloud sync journal"),
        BuiltInEntry(pattern: "*.filepart", madeBy: "Nextcloud/ownCloud and WinSCP partial transfers"),
        BuiltInEntry(pattern: "*.crdownload", madeBy: "Chrome partial downloads"),
        // Operating systems and filesystems
        BuiltInEntry(pattern: ".DS_Store", madeBy: "macOS Finder"),
        BuiltInEntry(pattern: "._*", madeBy: "macOS AppleDouble files on foreign filesystems"),
        BuiltInEntry(pattern: ".AppleDouble", madeBy: "macOS/netatalk resource forks"),
        BuiltInEntry(pattern: ".Spotlight-V100", madeBy: "macOS Spotlight"),
        BuiltInEntry(pattern: ".Trashes", madeBy: "macOS trash on volumes"),
        BuiltInEntry(pattern: ".TemporaryItems", madeBy: "macOS temps on volumes"),
        BuiltInEntry(pattern: ".fseventsd", madeBy: "macOS FSEvents"),
        BuiltInEntry(pattern: "Icon\r", madeBy: "macOS custom folder icons"),
        BuiltInEntry(pattern: "[Tt]humbs.db", madeBy: "Windows Explorer thumbnails"),
        BuiltInEntry(pattern: "[Ee]hthumbs.db", madeBy: "Windows Media Center thumbnails"),
        BuiltInEntry(pattern: "[Dd]esktop.ini", madeBy: "Windows Explorer folder settings"),
        BuiltInEntry(pattern: "$RECYCLE.BIN", madeBy: "Windows recycle bin"),
        BuiltInEntry(pattern: "System Volume Information", madeBy: "Windows volume data"),
        BuiltInEntry(pattern: ".Trash-*", madeBy: "freedesktop trash on other filesystems"),
        BuiltInEntry(pattern: ".directory", madeBy: "KDE Dolphin folder settings"),
        BuiltInEntry(pattern: "lost+found/", madeBy: "fsck"),
        BuiltInEntry(pattern: ".nfs*", madeBy: "NFS silly rename of deleted open files"),
        BuiltInEntry(pattern: ".fuse_hidden*", madeBy: "FUSE deleted open files"),
        // Version control
        BuiltInEntry(pattern: ".git", madeBy: "git"),
        BuiltInEntry(pattern: ".hg", madeBy: "Mercurial"),
        BuiltInEntry(pattern: ".svn", madeBy: "Subversion"),
        BuiltInEntry(pattern: ".jj", madeBy: "Jujutsu")
    ]

    static let builtInRules: [Rule] = builtInEntries.map { entry in
        let matcher: Rule.Matcher
        if let check = entry.check {
            matcher = .check(check)
        } else {
            var body = entry.pattern
            let directoryOnly = body.hasSuffix("/")
            if directoryOnly {
                body.removeLast()
            }
            do throws(GlobPattern.Problem) {
                matcher = .glob(try GlobPattern(body), directoryOnly: directoryOnly)
            } catch {
                preconditionFailure("built-in ignore pattern `\(entry.pattern)` is invalid: \(error.message)")
            }
        }
        return Rule(pattern: entry.pattern, isNegated: false, origin: .builtIn(madeBy: entry.madeBy), matcher: matcher)
    }
}
