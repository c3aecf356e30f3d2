import Foundation
import NoteSyncFuzz

/// The libFuzzer executable for every target, built only by `scripts/fuzz` (`NOTESYNC_FUZZ=1`,
/// `--sanitize=fuzzer --sanitize=address`): libFuzzer supplies `main` and calls the two functions below.
///
/// The target comes from `NOTESYNC_FUZZ_TARGET`, so one binary is linked instead of one per target.
let target: FuzzTarget? = ProcessInfo.processInfo.environment["NOTESYNC_FUZZ_TARGET"].flatMap(FuzzTarget.init)

/// Called once before fuzzing: stops with a usage message unless a valid target is selected.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(
    _ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> CInt {
    if target == nil {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        FileHandle.standardError.write(Data("set NOTESYNC_FUZZ_TARGET to one of: \(names)\n".utf8))
        exit(2)
    }
    return 0
}

/// Called for every input; crashes when an invariant breaks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    target?.fuzzOne(start, count) ?? 0
}
