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

/// Fuzzes the `.notesyncignore` parser and matcher with an input split into `rules NUL path NUL path …`.
///
/// A rule file either parses or names a real line; the agent's own files stay ignored whatever the rules say;
/// the answers agree with each other, across Unicode forms and line endings; and a name written as an escaped
/// literal pattern matches itself.
enum IgnoreFuzz {
    static let source = ".notesyncignore"
    static let fixedPaths = [".notesync", "a/.notesync-tmp-1", "notes/plan.md"]

    static func check(_ input: Data) throws(FuzzViolation) {
        let parts = input.split(separator: 0, maxSplits: 8, omittingEmptySubsequences: false)
        let text = String(decoding: parts.first ?? Data(), as: UTF8.self)
        let paths = parts.dropFirst().map { String(decoding: $0, as: UTF8.self) } + fixedPaths

        guard let rules = try parse(text) else { return }
        for path in paths {
            try checkPath(path, rules)
        }
        if !text.unicodeScalars.contains("\r") {
            let crlf = try parse(
                String(
                    String.UnicodeScalarView(
                        text.unicodeScalars.flatMap {
                            $0 == "\n" ? ["\r", "\n"] : [$0]
                        })))
            try FuzzViolation.require(crlf?.rules == rules.rules, "CRLF line endings change the rules")
        }
        for path in paths.prefix(2) {
            try checkLiteral(path)
        }
    }

    /// The rules of `text`, or nil when it has an invalid line, whose report must be sound.
    static func parse(_ text: String) throws(FuzzViolation) -> IgnoreRules? {
        let lineCount = text.precomposedStringWithCanonicalMapping.unicodeScalars
            .split(separator: "\n", omittingEmptySubsequences: false).count
        do {
            let rules = try IgnoreRules(userRules: text, source: source)
            try FuzzViolation.require(
                Array(rules.rules.prefix(IgnoreRules.builtIn.rules.count)) == IgnoreRules.builtIn.rules,
                "the built-in rules do not come first")
            var previousLine = 0
            for rule in rules.rules.dropFirst(IgnoreRules.builtIn.rules.count) {
                guard case .file(let file, let line) = rule.origin, file == source, line > previousLine,
                    line <= lineCount
                else {
                    throw FuzzViolation(message: "rule \(rule) has origin \(rule.origin)")
                }
                previousLine = line
                try FuzzViolation.require(
                    FuzzViolation.isPrintable(rule.description),
                    "a rule prints a control character: \(rule.description)")
            }
            return rules
        } catch let error as IgnoreRules.InvalidPattern {
            try FuzzViolation.require(
                error.source == source && error.line >= 1 && error.line <= lineCount,
                "an invalid pattern is reported at line \(error.line) of \(lineCount)")
            try FuzzViolation.require(
                FuzzViolation.isPrintable(error.description) && FuzzViolation.isPrintable(error.problem)
                    && FuzzViolation.isPrintable(error.fix),
                "the report prints a control character: \(error.description)")
            return nil
        } catch let error as FuzzViolation {
            throw error
        } catch {
            throw FuzzViolation(message: "parsing threw \(error)")
        }
    }

    static func checkPath(_ path: String, _ rules: IgnoreRules) throws(FuzzViolation) {
        let agentOwned = FuzzTarget.components(path, omittingEmpty: true).contains(where: ReservedNames.isAgentOwned)
        for isDirectory in [false, true] {
            let shown = FuzzViolation.show(path)
            let ignoredPath = rules.isIgnoredPath(path, isDirectory: isDirectory)
            let rule = rules.decidingRule(for: path, isDirectory: isDirectory)
            try FuzzViolation.require(
                ignoredPath == (rule.map { !$0.isNegated } ?? false),
                "isIgnoredPath(\(shown)) disagrees with its deciding rule \(String(describing: rule))")
            if rules.isIgnored(path, isDirectory: isDirectory) {
                try FuzzViolation.require(ignoredPath, "\(shown) is ignored but its path is not")
            }
            if agentOwned {
                try FuzzViolation.require(ignoredPath, "the agent's own \(shown) is not ignored")
            }
            let forms =
                path.utf8.allSatisfy { $0 < 0x80 }
                ? []
                : [
                    path.decomposedStringWithCanonicalMapping, path.precomposedStringWithCanonicalMapping,
                    RecordName.nfc(path)
                ]
            for form in forms {
                try FuzzViolation.require(
                    rules.isIgnoredPath(form, isDirectory: isDirectory) == ignoredPath,
                    "\(shown) is decided differently in another Unicode form")
            }
        }
    }

    /// A path written as an escaped literal matches itself: as a name at any depth, and anchored from the root.
    static func checkLiteral(_ path: String) throws(FuzzViolation) {
        let components = FuzzTarget.components(path.precomposedStringWithCanonicalMapping, omittingEmpty: true)
        // (Scalars, not `String.contains`: Foundation's does not find "\n" before a combining mark.)
        let unwritable = { (component: String) in
            component == "." || component == ".." || component.unicodeScalars.contains { $0 == "\r" || $0 == "\n" }
        }
        guard let name = components.last, !components.contains(where: unwritable) else { return }
        let anchored = "/" + components.map(escape).joined(separator: "/")
        for pattern in [escape(name), anchored] {
            let rules: IgnoreRules
            do {
                rules = try IgnoreRules(userRules: "# literal\n" + pattern, source: source)
            } catch {
                throw FuzzViolation(message: "the literal pattern \(FuzzViolation.show(pattern)) is refused: \(error)")
            }
            for isDirectory in [false, true] {
                try FuzzViolation.require(
                    rules.isIgnored(path, isDirectory: isDirectory),
                    "the literal pattern \(FuzzViolation.show(pattern)) does not match \(FuzzViolation.show(path))")
            }
        }
    }

    /// `name` as a gitignore pattern that matches exactly it: every special character behind a backslash.
    static func escape(_ name: String) -> String {
        var out = ""
        for scalar in name.unicodeScalars {
            if "\\*?[]!# ".unicodeScalars.contains(scalar) {
                out += "\\"
            }
            out.unicodeScalars.append(scalar)
        }
        return out
    }
}
