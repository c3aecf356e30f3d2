import Foundation

/// Manual pages in man(7) roff, made from the command definitions: the JSON that swift-argument-parser dumps with
/// `--experimental-dump-help` (its `ToolInfoV0`, of which only the fields read here are decoded). One page for the
/// command and one per subcommand, named as git names its pages: `notesync.1`, `notesync-sync.1`,
/// `notesync-server-fsck.1`.
public enum ManualPage {
    /// One command of the dump.
    public struct Command: Decodable, Sendable {
        public var superCommands: [String]?
        public var commandName: String
        public var abstract: String?
        public var discussion: String?
        public var shouldDisplay: Bool?
        public var subcommands: [Command]?
        public var arguments: [Argument]?

        /// `notesync sync`, `notesync server fsck`.
        public var fullName: String { ((superCommands ?? []) + [commandName]).joined(separator: " ") }
        /// `notesync-sync`: the page's name.
        public var pageName: String { ((superCommands ?? []) + [commandName]).joined(separator: "-") }
        /// The subcommands that get a page of their own (not hidden ones, not the generated `help`).
        public var shownSubcommands: [Command] {
            (subcommands ?? []).filter { $0.shouldDisplay != false && $0.commandName != "help" }
        }
    }

    /// One argument, option or flag of a command.
    public struct Argument: Decodable, Sendable {
        public struct Name: Decodable, Sendable {
            public var kind: String
            public var name: String

            package var spelled: String { kind == "short" ? "-" + name : kind == "long" ? "--" + name : "-" + name }
        }

        public var kind: String
        public var shouldDisplay: Bool?
        public var isOptional: Bool?
        public var isRepeating: Bool?
        public var names: [Name]?
        public var valueName: String?
        public var defaultValue: String?
        public var abstract: String?
        public var discussion: String?
    }

    struct Dump: Decodable {
        var serializationVersion: Int
        package var command: Command
    }

    /// The root command of a `--experimental-dump-help` dump.
    public static func command(fromDump data: Data) throws -> Command {
        let dump = try JSONDecoder().decode(Dump.self, from: data)
        guard dump.serializationVersion == 0 else {
            throw NoteSyncError(
                .usage, "the help dump is in format \(dump.serializationVersion), this generator reads format 0",
                fix: "build notesync with the swift-argument-parser Package.swift names")
        }
        return dump.command
    }

    /// Every page of `root` and its subcommands: file name and roff text.
    public static func pages(_ root: Command, version: String) -> [(file: String, text: String)] {
        var pages: [(String, String)] = []
        func add(_ command: Command, parent: Command?) {
            pages.append((command.pageName + ".1", render(command, parent: parent, root: root, version: version)))
            for sub in command.shownSubcommands { add(sub, parent: command) }
        }
        add(root, parent: nil)
        return pages
    }

    /// One command's page.
    public static func render(_ command: Command, parent: Command?, root: Command, version: String) -> String {
        var out: [String] = []
        let title = command.pageName.uppercased()
        out.append(".TH \(quoted(title)) 1 \"\" \(quoted("\(root.commandName) \(version)")) \(quoted("\(root.commandName) manual"))")
        // No hyphenation: an option split across lines cannot be copied.
        out.append(".nh")
        out.append(".SH NAME")
        out.append(escape(command.pageName) + " \\- " + escape(oneLine(command.abstract ?? command.fullName)))

        let arguments = (command.arguments ?? []).filter { $0.shouldDisplay != false }
        out.append(".SH SYNOPSIS")
        out.append(".B " + escape(command.fullName))
        if command.shownSubcommands.isEmpty {
            for argument in arguments { out.append(synopsisItem(argument)) }
        } else {
            out.append("\\fISUBCOMMAND\\fR")
        }

        out.append(".SH DESCRIPTION")
        out.append(contentsOf: paragraphs(command.abstract ?? ""))
        if let discussion = command.discussion, !discussion.isEmpty {
            out.append(".PP")
            out.append(contentsOf: paragraphs(discussion))
        }

        let positionals = arguments.filter { $0.kind == "positional" }
        let options = arguments.filter { $0.kind != "positional" }
        if !positionals.isEmpty {
            out.append(".SH ARGUMENTS")
            for argument in positionals { out.append(contentsOf: item(argument)) }
        }
        if !options.isEmpty {
            out.append(".SH OPTIONS")
            for argument in options { out.append(contentsOf: item(argument)) }
        }
        if !command.shownSubcommands.isEmpty {
            out.append(".SH SUBCOMMANDS")
            for sub in command.shownSubcommands {
                out.append(".TP")
                out.append("\\fB\(escape(sub.pageName))\\fR(1)")
                out.append(contentsOf: paragraphs(sub.abstract ?? ""))
            }
        }
        var seeAlso: [String] = []
        if let parent { seeAlso.append(parent.pageName) }
        if parent?.pageName != root.pageName && command.pageName != root.pageName { seeAlso.append(root.pageName) }
        seeAlso += command.shownSubcommands.map(\.pageName)
        if !seeAlso.isEmpty {
            out.append(".SH SEE ALSO")
            out.append(seeAlso.map { "\\fB\(escape($0))\\fR(1)" }.joined(separator: ",\n"))
        }
        return out.joined(separator: "\n") + "\n"
    }

    /// `[--notes <notes>]`, `<note>`, `--version <version>`.
    static func synopsisItem(_ argument: Argument) -> String {
        var text = spelling(argument, short: false)
        if argument.isRepeating == true { text += " \\&..." }
        return argument.isOptional == true || argument.kind == "flag" ? "[" + text + "]" : text
    }

    /// `\fB--notes\fR \fI<notes>\fR`: the preferred (long) name, or every name with `short: false`.
    static func spelling(_ argument: Argument, short: Bool) -> String {
        let value = argument.valueName.map { "\\fI<\(escape($0))>\\fR" }
        if argument.kind == "positional" { return value ?? "" }
        var names = argument.names ?? []
        if !short, let long = names.first(where: { $0.kind != "short" }) { names = [long] }
        let spelled = names.map { "\\fB\(escape($0.spelled))\\fR" }.joined(separator: ", ")
        guard argument.kind == "option", let value else { return spelled }
        return spelled + " " + value
    }

    /// An argument's entry under ARGUMENTS or OPTIONS.
    package static func item(_ argument: Argument) -> [String] {
        var lines = [".TP", spelling(argument, short: true)]
        var text = argument.abstract ?? ""
        if let value = argument.defaultValue, !value.isEmpty, argument.kind != "flag" {
            text += (text.isEmpty ? "" : " ") + "(default: \(value))"
        }
        lines += paragraphs(text)
        if let discussion = argument.discussion, !discussion.isEmpty { lines += [".IP"] + paragraphs(discussion) }
        return lines
    }

    /// Help text as roff: blank lines separate paragraphs, consecutive plain lines flow together, and indented lines
    /// (a table of exit codes) are kept as they are.
    static func paragraphs(_ text: String) -> [String] {
        var out: [String] = []
        var preformatted = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let indented = line.hasPrefix(" ") || line.hasPrefix("\t")
            if line.trimmingCharacters(in: .whitespaces).isEmpty {
                if preformatted { out.append(".fi") }
                preformatted = false
                if !out.isEmpty && out.last != ".PP" { out.append(".PP") }
                continue
            }
            if indented && !preformatted {
                out.append(".nf")
                preformatted = true
            } else if !indented && preformatted {
                out.append(".fi")
                preformatted = false
            }
            out.append(escapeLine(line))
        }
        if preformatted { out.append(".fi") }
        while out.last == ".PP" { out.removeLast() }
        return out
    }

    /// A text line safe for roff: escapes, and a line that would start with a control character made plain.
    static func escapeLine(_ line: String) -> String {
        let escaped = escape(line)
        return escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" + escaped : escaped
    }

    /// Backslashes and hyphens escaped (a `-` in an option must print as a hyphen-minus); quotes as `\(dq`
    /// where the text is a macro argument is left to ``quoted(_:)``.
    package static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            default: out.append(character)
            }
        }
        return out
    }

    package static func quoted(_ text: String) -> String { "\"" + escape(text).replacingOccurrences(of: "\"", with: "\\(dq") + "\"" }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).joined(separator: " ").trimmingCharacters(in: .whitespaces)
    }
}
