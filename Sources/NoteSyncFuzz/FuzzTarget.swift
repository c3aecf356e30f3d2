import Foundation

/// The fuzz targets: each one is a checking function from arbitrary bytes that throws when an invariant breaks.
///
/// The same functions run under libFuzzer (`Fuzz/<Target>/`, built by `scripts/fuzz` with
/// `--sanitize=fuzzer --sanitize=address`) and in the unit tests, which replay every file of
/// `Tests/FuzzCorpus/<target>/` without sanitizers, so an input that once crashed keeps being checked.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// A log entry file: sealed header, JSON body, and the records it folds into.
    case entry
    /// The record-name validator.
    case name
    /// The three-way merge of `base NUL ours NUL theirs`.
    case merge
    /// The line diff and the unified diff of `old NUL new`.
    case diff
    /// The `.notesyncignore` parser and matcher: `rules NUL path NUL path …`.
    case ignore
    /// The encrypted server's files: a sealed body, a sealed asset, a keys file, a recovery key.
    case vault

    /// Runs the target's checks on one input; throws the first invariant that does not hold.
    public func check(_ input: Data) throws(FuzzViolation) {
        switch self {
        case .entry: try EntryFuzz.check(input)
        case .name: try NameFuzz.check(input)
        case .merge: try MergeFuzz.check(input)
        case .diff: try DiffFuzz.check(input)
        case .ignore: try IgnoreFuzz.check(input)
        case .vault: try VaultFuzz.check(input)
        }
    }

    /// The body of `LLVMFuzzerTestOneInput`: checks the input and crashes on a violation, which libFuzzer
    /// reports and saves as `crash-<sha1>`.
    public func fuzzOne(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
        let input = start.map { Data(bytes: $0, count: count) } ?? Data()
        do {
            try check(input)
        } catch {
            fatalError("fuzz target \(rawValue): \(error)")
        }
        return 0
    }

    /// The components of a `/`-separated path, split at the byte `/` as the kernel does: the checks' own
    /// reference, independent of `RecordName.components(of:)`.
    static func components(_ path: String, omittingEmpty: Bool) -> [String] {
        path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: omittingEmpty)
            .map { String(decoding: $0, as: UTF8.self) }
    }

    /// Splits an input at its first `count - 1` NUL bytes into `count` parts; missing parts are empty.
    ///
    /// NUL is the separator because it never occurs in text, so the parts are texts unless the last one has a NUL.
    static func parts(_ input: Data, count: Int) -> [Data] {
        var parts = input.split(separator: 0, maxSplits: count - 1, omittingEmptySubsequences: false).map { Data($0) }
        while parts.count < count {
            parts.append(Data())
        }
        return parts
    }
}
