import Foundation
import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// Decides which files in the notes folder are not notes: built-in editor, OS and sync-tool litter
/// plus the user's `.notesyncignore`.
///
/// The user file uses gitignore(5) syntax and semantics: `#` comments, `\#` and `\!` escapes,
/// trailing spaces dropped unless escaped, `!` re-includes, a `/` at the start or in the middle
/// anchors to the notes folder, a trailing `/` matches directories only, `*` `?` `[...]` and `**`
/// as in git, the last matching rule wins, and a file inside an ignored directory cannot be
/// re-included (the walker never enters the directory; `isIgnoredPath` checks the ancestors).
/// Built-in rules come first, so a user `!` rule can re-include any of them except the agent's
/// own names (`.notesync` and `agentTempPrefix`, in any spelling a folder may take for them:
/// `.NoteSync`, `.notesync.`), which are always ignored: syncing the local state or a
/// half-written temp would corrupt the other devices. Only the file at the root of the
/// notes folder is read; `.notesyncignore` itself is a note and syncs, so every device applies
/// the same rules. Matching is case-sensitive, as Linux filesystems are.
public struct IgnoreRules: Sendable, Equatable {
    /// The name of the user's rule file at the root of the notes folder.
    public static let fileName = ".notesyncignore"

    /// The built-in rules alone, for a notes folder without `.notesyncignore`.
    public static let builtIn = IgnoreRules(rules: builtInRules)

    /// Built-in rules first, then the user's, in file order; the last one that matches decides.
    public let rules: [Rule]
    /// The matching half of `rules`, kept apart so the per-entry loop copies no strings.
    private let matchers: [Rule.Matcher]
    /// Plain-data pre-checks of `matchers`, same order: most rules are rejected without a retain.
    private let quickChecks: [QuickCheck]

    private init(rules: [Rule]) {
        self.rules = rules
        matchers = rules.map(\.matcher)
        quickChecks = matchers.map(QuickCheck.init)
    }

    /// Builds the rules from the contents of `.notesyncignore` (nil when the file does not exist).
    ///
    /// - Parameter source: how to name the file in errors, e.g. its path.
    /// - Throws: `IgnoreRules.InvalidPattern` for the first line that cannot be a pattern.
    public init(userRules: String?, source: String = IgnoreRules.fileName) throws {
        guard let userRules else {
            self.init(rules: Self.builtInRules)
            return
        }
        self.init(rules: Self.builtInRules + (try Self.parse(userRules, source: source)))
    }

    /// Whether the entry at `relativePath` is ignored, assuming its parent directories are not.
    ///
    /// For the scanner, which asks about every entry on its way down and does not enter an ignored
    /// directory. `relativePath` is `/`-separated and relative to the notes folder, in any Unicode form.
    public func isIgnored(_ relativePath: String, isDirectory: Bool) -> Bool {
        let components = Self.components(relativePath)
        return isIgnored(decision(components[...], isDirectory: isDirectory))
    }

    /// Whether the entry `name` (see ``componentScalars(_:)``) in the folder whose path components are `parent`
    /// (see ``components(of:)``) is ignored, assuming the folder is not: ``isIgnored(_:isDirectory:)`` without
    /// splitting and normalising the whole path again for every entry of a scan.
    public func isIgnored(entry name: [Unicode.Scalar], in parent: inout [[Unicode.Scalar]], isDirectory: Bool) -> Bool {
        parent.append(name)
        defer { parent.removeLast() }
        return isIgnored(decision(parent[...], isDirectory: isDirectory))
    }

    /// One path component as the rules match it (NFC scalars).
    public static func componentScalars(_ name: String) -> [Unicode.Scalar] {
        // ASCII (nearly every name): one scalar a byte, copied straight from the bytes.
        if UTF8Bytes.isASCII(name) {
            return name.utf8.withContiguousStorageIfAvailable { $0.map { Unicode.Scalar($0) } } ?? Array(name.unicodeScalars)
        }
        return Array(name.precomposedStringWithCanonicalMapping.unicodeScalars)
    }

    /// A relative path's components as the rules match them (NFC scalars).
    public static func components(of relativePath: String) -> [[Unicode.Scalar]] {
        components(relativePath)
    }

    /// Whether the entry at `relativePath` or any of its parent directories is ignored.
    ///
    /// For callers holding a bare path (inotify events, server names): a file inside an ignored
    /// directory is ignored whatever later rules say, as in git.
    public func isIgnoredPath(_ relativePath: String, isDirectory: Bool) -> Bool {
        isIgnored(decidingRule(for: relativePath, isDirectory: isDirectory))
    }

    /// The rule that decides `relativePath`, checking its parent directories first; nil when no rule matches.
    ///
    /// A negated rule means the path is included. For `notesync` to explain why a file is not synced.
    public func decidingRule(for relativePath: String, isDirectory: Bool) -> Rule? {
        let components = Self.components(relativePath)
        guard !components.isEmpty else { return nil }
        for end in components.indices.dropLast() {
            let rule = decision(components[...end], isDirectory: true)
            if isIgnored(rule) { return rule }
        }
        return decision(components[...], isDirectory: isDirectory)
    }

    private func isIgnored(_ rule: Rule?) -> Bool {
        rule.map { !$0.isNegated } ?? false
    }

    private func decision(_ components: ArraySlice<[Unicode.Scalar]>, isDirectory: Bool) -> Rule? {
        guard let name = components.last else { return nil }
        if ReservedNames.isAgentOwned(name) {
            return Self.agentOwnedRule
        }
        let first = name.first
        let last = name.last
        for index in quickChecks.indices.reversed()
        where quickChecks[index].admits(first: first, last: last, isDirectory: isDirectory)
            && matchers[index].matches(components, name: name, isDirectory: isDirectory)
        {
            return rules[index]
        }
        return nil
    }

    /// The path's components as NFC scalars; rules are NFC, and names on disk may be NFD.
    private static func components(_ path: String) -> [[Unicode.Scalar]] {
        RecordName.nfc(path).unicodeScalars.split(separator: "/").map(Array.init)
    }

    private static let agentOwnedRule = Rule(
        pattern: "\(ReservedNames.stateDirectoryName)  \(ReservedNames.agentTempPrefix)*",
        isNegated: false,
        origin: .builtIn(
            madeBy: "notesync's own state and temp files, in any case, with trailing dots or spaces, and the short "
                + "name NOTESY~1 (a case-folding folder would take them for its own); cannot be re-included"),
        matcher: .agentOwned
    )
}

// MARK: - Rules

/// What a rule requires of the last component's ends and of its kind, as plain data.
private struct QuickCheck: Sendable, Equatable {
    let first: Unicode.Scalar?
    let last: Unicode.Scalar?
    let directoryOnly: Bool

    init(_ matcher: IgnoreRules.Rule.Matcher) {
        if case .glob(let glob, let directoryOnly) = matcher {
            (first, last) = glob.requiredEnds
            self.directoryOnly = directoryOnly
        } else {
            (first, last, directoryOnly) = (nil, nil, false)
        }
    }

    func admits(first nameFirst: Unicode.Scalar?, last nameLast: Unicode.Scalar?, isDirectory: Bool) -> Bool {
        (isDirectory || !directoryOnly) && (first == nil || first == nameFirst) && (last == nil || last == nameLast)
    }
}

extension IgnoreRules {
    /// One line of the rules: a pattern, whether it re-includes (`!`), and where it comes from.
    public struct Rule: Sendable, Equatable, CustomStringConvertible {
        /// Where a rule was written.
        public enum Origin: Sendable, Equatable {
            /// Shipped with notesync; `madeBy` names the tool that leaves such files.
            case builtIn(madeBy: String)
            /// A line of the user's rule file.
            case file(String, line: Int)
        }

        enum Matcher: Sendable, Equatable {
            case glob(GlobPattern, directoryOnly: Bool)
            case check(BuiltInCheck)
            case agentOwned

            /// Whether the path `components`, whose last one is `name`, matches.
            package func matches(
                _ components: ArraySlice<[Unicode.Scalar]>, name: [Unicode.Scalar], isDirectory: Bool
            ) -> Bool {
                switch self {
                case .glob(let glob, let directoryOnly):
                    return (isDirectory || !directoryOnly) && glob.matches(components, name: name)
                case .check(let check):
                    return check.matches(name, isDirectory: isDirectory)
                case .agentOwned:
                    return ReservedNames.isAgentOwned(name)
                }
            }
        }

        /// The pattern as written, without its `!`.
        public let pattern: String
        /// Whether a match re-includes the path instead of ignoring it.
        public let isNegated: Bool
        public let origin: Origin
        let matcher: Matcher

        public var description: String {
            let written = (isNegated ? "!" : "") + printable(pattern)
            switch origin {
            case .builtIn(let madeBy):
                return "built-in rule `\(written)` (\(madeBy))"
            case .file(let source, let line):
                return "\(source), line \(line): `\(written)`"
            }
        }
    }

    /// A `.notesyncignore` line that cannot be a pattern: where it is, what is wrong, how to fix it.
    public struct InvalidPattern: Error, Equatable, Sendable, CustomStringConvertible, LocalizedError {
        /// The rule file as the user should look for it: `.notesyncignore` or its path.
        public let source: String
        /// 1-based, counting comments and blank lines.
        public let line: Int
        /// The line as written, trailing spaces removed.
        public let pattern: String
        public let problem: String
        public let fix: String

        public var description: String {
            "\(source), line \(line): invalid pattern `\(printable(pattern))`: \(problem). Fix: \(fix)."
        }

        public var errorDescription: String? { description }
    }

    /// Parses gitignore text into rules; line numbers are 1-based, CRLF and a UTF-8 BOM are accepted.
    package static func parse(_ text: String, source: String) throws -> [Rule] {
        var rules: [Rule] = []
        let lines = RecordName.nfc(text).unicodeScalars
            .split(separator: "\n", omittingEmptySubsequences: false)
        for (index, rawLine) in lines.enumerated() {
            var line = Array(rawLine)
            if index == 0, line.first == "\u{FEFF}" {
                line.removeFirst()
            }
            if line.last == "\r" {
                line.removeLast()
            }
            guard let first = line.first, first != "#" else { continue }
            trimTrailingSpaces(&line)
            guard !line.isEmpty else { continue }
            let written = String(String.UnicodeScalarView(line))
            let isNegated = first == "!"
            if isNegated {
                line.removeFirst()
            }
            var directoryOnly = false
            if line.last == "/" {
                line.removeLast()
                directoryOnly = true
            }
            do throws(GlobPattern.Problem) {
                if line.isEmpty || line == ["/"] {
                    throw GlobPattern.Problem(
                        message: isNegated && !directoryOnly ? "`!` alone re-includes nothing" : "it names no file",
                        fix: "write a name after it, e.g. `\(isNegated ? "!" : "")drafts/`, or remove the line"
                    )
                }
                let glob = try GlobPattern(String(String.UnicodeScalarView(line)))
                rules.append(
                    Rule(
                        pattern: isNegated ? String(written.unicodeScalars.dropFirst()) : written,
                        isNegated: isNegated,
                        origin: .file(source, line: index + 1),
                        matcher: .glob(glob, directoryOnly: directoryOnly)
                    ))
            } catch {
                // The problem and fix quote the pattern, which came from a synced file: escape them too.
                throw InvalidPattern(
                    source: source, line: index + 1, pattern: written, problem: printable(error.message),
                    fix: printable(error.fix)
                )
            }
        }
        return rules
    }

    /// git's `trim_trailing_spaces`: drop trailing spaces unless the first of them is escaped.
    private static func trimTrailingSpaces(_ line: inout [Unicode.Scalar]) {
        var firstTrailingSpace: Int?
        var index = 0
        while index < line.count {
            switch line[index] {
            case " ":
                if firstTrailingSpace == nil {
                    firstTrailingSpace = index
                }
            case "\\":
                index += 1
                guard index < line.count else { return }
                firstTrailingSpace = nil
            default:
                firstTrailingSpace = nil
            }
            index += 1
        }
        if let firstTrailingSpace {
            line.removeSubrange(firstTrailingSpace...)
        }
    }
}

/// Escapes control and format characters, so a pattern or name prints on one visible line.
private func printable(_ text: String) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator:
            result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
        default:
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}
