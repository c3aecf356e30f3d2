import NoteSyncCrypto
import NoteSyncModel
import NoteSyncSupport

/// One gitignore-style pattern body, compiled for matching against `/`-separated relative paths.
///
/// It implements the matching half of gitignore(5): `*`, `?` and `[...]` never match `/`;
/// `**` is special only as a whole path segment (`**/x` any depth, `x/**` everything inside,
/// `a/**/b` zero or more directories between) and is a plain `*` anywhere else; a pattern with
/// a `/` at its start or in its middle is anchored to the root, one without matches the last
/// component at any depth. The line-level syntax (comments, `!`, trailing `/` and spaces) is
/// handled by `IgnoreRules`. Matching works on Unicode scalars, so `?` matches one `é`, and
/// is case-sensitive, as Linux filesystems are.
struct GlobPattern: Sendable, Equatable {
    /// Why a pattern body cannot be compiled, and how to write it instead.
    struct Problem: Error, Equatable {
        package let message: String
        package let fix: String
    }

    enum Token: Sendable, Equatable {
        case literal(Unicode.Scalar)
        case anyScalar
        case star
        case bracket(BracketExpression)
    }

    package enum Segment: Sendable, Equatable {
        /// `**` as a whole segment: any number of components (at least one when it ends the pattern).
        case globstar
        case tokens([Token])
    }

    /// A one-segment pattern whose only wildcard is a leading or trailing `*`: most built-in rules.
    enum Shortcut: Sendable, Equatable {
        case exact([Unicode.Scalar])
        case prefix([Unicode.Scalar])
        case suffix([Unicode.Scalar])
    }

    /// Whether the pattern is matched against the whole path from the root rather than the last component.
    let isAnchored: Bool
    package let segments: [Segment]
    /// Set when the pattern is a plain name, prefix or suffix, to skip the glob matcher on the hot path.
    let shortcut: Shortcut?
    /// The first and last scalar any matching path's last component must have, when the pattern fixes them.
    let requiredEnds: (first: Unicode.Scalar?, last: Unicode.Scalar?)

    /// Compiles `body`, a pattern without its `!` prefix and trailing `/`.
    package init(_ body: String) throws(Problem) {
        var scalars = Array(body.unicodeScalars)
        guard !scalars.isEmpty else {
            throw Problem(message: "the pattern is empty", fix: "remove the line, or write the name to ignore")
        }
        isAnchored = scalars.contains("/")
        if scalars.first == "/" {
            scalars.removeFirst()
        }
        let raw = try Self.splitSegments(scalars)
        var compiled: [Segment] = []
        for text in raw {
            if text.isEmpty {
                throw Problem(
                    message: "it has an empty path component (`//`)",
                    fix: "write a single `/` between directory names"
                )
            }
            if text == ["."] || text == [".", "."] {
                throw Problem(
                    message: "`.` and `..` components never match: patterns are relative to the notes folder",
                    fix: "write the path from the notes folder, e.g. `/drafts/old.md`"
                )
            }
            if text == ["*", "*"] {
                if isAnchored {
                    if compiled.last != .globstar {
                        compiled.append(.globstar)
                    }
                } else {
                    compiled.append(.tokens([.star]))
                }
                continue
            }
            compiled.append(.tokens(try Self.tokenize(text)))
        }
        segments = compiled
        shortcut = isAnchored ? nil : Self.shortcut(compiled)
        if case .tokens(let tokens) = compiled.last {
            func literal(_ token: Token?) -> Unicode.Scalar? {
                if case .literal(let scalar) = token { scalar } else { nil }
            }
            requiredEnds = (literal(tokens.first), literal(tokens.last))
        } else {
            requiredEnds = (nil, nil)
        }
    }

    package static func == (lhs: GlobPattern, rhs: GlobPattern) -> Bool {
        lhs.isAnchored == rhs.isAnchored && lhs.segments == rhs.segments
    }

    private static func shortcut(_ segments: [Segment]) -> Shortcut? {
        guard segments.count == 1, case .tokens(let tokens) = segments[0] else { return nil }
        var literals: [Unicode.Scalar] = []
        for token in tokens {
            guard case .literal(let scalar) = token else { continue }
            literals.append(scalar)
        }
        switch tokens.count - literals.count {
        case 0:
            return .exact(literals)
        case 1 where tokens.last == .star:
            return .prefix(literals)
        case 1 where tokens.first == .star:
            return .suffix(literals)
        default:
            return nil
        }
    }

    /// Whether the pattern matches the path made of `components` (each one name, as Unicode scalars),
    /// whose last component is `last`.
    package func matches(_ components: ArraySlice<[Unicode.Scalar]>, name last: [Unicode.Scalar]) -> Bool {
        switch shortcut {
        case .exact(let literal): return last == literal
        case .prefix(let literal): return last.starts(with: literal)
        case .suffix(let literal): return last.count >= literal.count && last.reversed().starts(with: literal.reversed())
        case nil: break
        }
        if !isAnchored {
            guard case .tokens(let tokens) = segments.first else { return false }
            return Self.match(tokens, last)
        }
        return Self.match(segments[...], components)
    }

    // MARK: - Matching

    private static func match(_ segments: ArraySlice<Segment>, _ components: ArraySlice<[Unicode.Scalar]>) -> Bool {
        guard let first = segments.first else { return components.isEmpty }
        let restOfPattern = segments.dropFirst()
        switch first {
        case .globstar:
            if restOfPattern.isEmpty {
                return !components.isEmpty
            }
            var remaining = components
            while true {
                if match(restOfPattern, remaining) { return true }
                guard !remaining.isEmpty else { return false }
                remaining = remaining.dropFirst()
            }
        case .tokens(let tokens):
            guard let component = components.first, match(tokens, component) else { return false }
            return match(restOfPattern, components.dropFirst())
        }
    }

    /// Glob match of one component; `*` backtracks to the last star only, which is exact because
    /// a star cannot cross a `/` here.
    package static func match(_ tokens: [Token], _ name: [Unicode.Scalar]) -> Bool {
        var tokenIndex = 0
        var nameIndex = 0
        var starToken: Int?
        var starName = 0
        while nameIndex < name.count {
            if tokenIndex < tokens.count {
                switch tokens[tokenIndex] {
                case .star:
                    starToken = tokenIndex
                    starName = nameIndex
                    tokenIndex += 1
                    continue
                case .anyScalar:
                    tokenIndex += 1
                    nameIndex += 1
                    continue
                case .literal(let scalar) where scalar == name[nameIndex]:
                    tokenIndex += 1
                    nameIndex += 1
                    continue
                case .bracket(let bracket) where bracket.matches(name[nameIndex]):
                    tokenIndex += 1
                    nameIndex += 1
                    continue
                default:
                    break
                }
            }
            guard let star = starToken else { return false }
            tokenIndex = star + 1
            starName += 1
            nameIndex = starName
        }
        while tokenIndex < tokens.count, tokens[tokenIndex] == .star {
            tokenIndex += 1
        }
        return tokenIndex == tokens.count
    }

    // MARK: - Compiling

    /// Splits at unescaped `/`, keeping escapes for `tokenize`.
    private static func splitSegments(_ scalars: [Unicode.Scalar]) throws(Problem) -> [[Unicode.Scalar]] {
        var segments: [[Unicode.Scalar]] = []
        var current: [Unicode.Scalar] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\\" {
                guard index + 1 < scalars.count else {
                    throw Problem(
                        message: "it ends with a lone backslash, which escapes nothing",
                        fix: "write `\\\\` for a literal backslash, or remove it"
                    )
                }
                if scalars[index + 1] == "/" {
                    segments.append(current)
                    current = []
                } else {
                    current.append(scalar)
                    current.append(scalars[index + 1])
                }
                index += 2
                continue
            }
            if scalar == "/" {
                segments.append(current)
                current = []
            } else {
                current.append(scalar)
            }
            index += 1
        }
        segments.append(current)
        return segments
    }

    private static func tokenize(_ text: [Unicode.Scalar]) throws(Problem) -> [Token] {
        var tokens: [Token] = []
        var index = 0
        while index < text.count {
            let scalar = text[index]
            switch scalar {
            case "\\":
                tokens.append(.literal(text[index + 1]))
                index += 2
            case "*":
                if tokens.last != .star {
                    tokens.append(.star)
                }
                index += 1
            case "?":
                tokens.append(.anyScalar)
                index += 1
            case "[":
                let (bracket, next) = try BracketExpression.parse(text, openingAt: index)
                tokens.append(.bracket(bracket))
                index = next
            default:
                tokens.append(.literal(scalar))
                index += 1
            }
        }
        return tokens
    }
}

/// A `[...]` bracket expression: scalars, ranges and `[:class:]` names, negated by a leading `!` or `^`.
struct BracketExpression: Sendable, Equatable {
    package enum Item: Sendable, Equatable {
        case scalar(Unicode.Scalar)
        case range(Unicode.Scalar, Unicode.Scalar)
        case named(NamedClass)
    }

    /// POSIX classes as git's wildmatch knows them; `digit` and `xdigit` are ASCII, the others Unicode-aware.
    enum NamedClass: String, Sendable, Equatable, CaseIterable {
        case alnum, alpha, blank, cntrl, digit, graph, lower, print, punct, space, upper, xdigit

        package func contains(_ scalar: Unicode.Scalar) -> Bool {
            let properties = scalar.properties
            switch self {
            case .alnum: return properties.isAlphabetic || ("0"..."9").contains(scalar)
            case .alpha: return properties.isAlphabetic
            case .blank: return scalar == " " || scalar == "\t"
            case .cntrl: return properties.generalCategory == .control
            case .digit: return ("0"..."9").contains(scalar)
            case .graph:
                return !properties.isWhitespace && properties.generalCategory != .control
                    && scalar != " "
            case .lower: return properties.isLowercase
            case .print: return properties.generalCategory != .control
            case .punct: return Self.punctuation.contains(properties.generalCategory)
            case .space: return properties.isWhitespace
            case .upper: return properties.isUppercase
            case .xdigit: return scalar.isASCII && scalar.properties.isASCIIHexDigit
            }
        }

        private static let punctuation: Set<Unicode.GeneralCategory> = [
            .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation,
            .initialPunctuation, .finalPunctuation, .otherPunctuation,
            .mathSymbol, .currencySymbol, .modifierSymbol, .otherSymbol
        ]
    }

    package let isNegated: Bool
    package let items: [Item]

    package func matches(_ scalar: Unicode.Scalar) -> Bool {
        let found = items.contains { item in
            switch item {
            case .scalar(let member): return member == scalar
            case .range(let low, let high): return (low...high).contains(scalar)
            case .named(let named): return named.contains(scalar)
            }
        }
        return found != isNegated
    }

    /// Parses the expression whose `[` is at `start`; returns it and the index after its `]`.
    package static func parse(
        _ text: [Unicode.Scalar], openingAt start: Int
    ) throws(GlobPattern.Problem) -> (BracketExpression, Int) {
        let unclosed = GlobPattern.Problem(
            message: "a `[` is never closed",
            fix: "close it with `]`, or write `\\[` for a literal bracket"
        )
        var index = start + 1
        var negated = false
        if index < text.count, text[index] == "!" || text[index] == "^" {
            negated = true
            index += 1
        }
        var items: [Item] = []
        var isFirst = true
        while true {
            guard index < text.count else { throw unclosed }
            let scalar = text[index]
            if scalar == "]", !isFirst {
                return (BracketExpression(isNegated: negated, items: items), index + 1)
            }
            isFirst = false
            if scalar == "[", index + 1 < text.count, text[index + 1] == ":",
                let close = closingOfClassName(text, from: index + 2)
            {
                let name = String(String.UnicodeScalarView(text[(index + 2)..<close]))
                guard let named = NamedClass(rawValue: name) else {
                    let known = NamedClass.allCases.map { "[:\($0.rawValue):]" }.joined(separator: " ")
                    throw GlobPattern.Problem(
                        message: "`[:\(name):]` is not a character class",
                        fix: "use one of \(known), or write `\\[` for a literal bracket"
                    )
                }
                items.append(.named(named))
                index = close + 2
                continue
            }
            guard let (low, afterLow) = member(text, at: index) else { throw unclosed }
            index = afterLow
            if index + 1 < text.count, text[index] == "-", text[index + 1] != "]" {
                guard let (high, afterHigh) = member(text, at: index + 1) else { throw unclosed }
                guard low <= high else {
                    throw GlobPattern.Problem(
                        message: "the range `\(Character(low))-\(Character(high))` is backwards",
                        fix: "write it low to high: `\(Character(high))-\(Character(low))`"
                    )
                }
                items.append(.range(low, high))
                index = afterHigh
            } else {
                items.append(.scalar(low))
            }
        }
    }

    private static func member(_ text: [Unicode.Scalar], at index: Int) -> (Unicode.Scalar, Int)? {
        if text[index] == "\\" {
            guard index + 1 < text.count else { return nil }
            return (text[index + 1], index + 2)
        }
        return (text[index], index + 1)
    }

    private static func closingOfClassName(_ text: [Unicode.Scalar], from start: Int) -> Int? {
        var index = start
        while index + 1 < text.count {
            if text[index] == ":", text[index + 1] == "]" { return index }
            if text[index] == "]" { return nil }
            index += 1
        }
        return nil
    }
}
