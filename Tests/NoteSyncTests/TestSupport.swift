import Foundation
import Logging
import Synchronization

@testable import NoteSyncAgent
@testable import NoteSyncCrypto
@testable import NoteSyncDiff
@testable import NoteSyncEngine
@testable import NoteSyncLocal
@testable import NoteSyncModel
@testable import NoteSyncReconcile
@testable import NoteSyncServer
@testable import NoteSyncSupport

/// A fresh directory under the system temp folder, removed when the test ends.
final class TempDirectory {
    let path: String

    init(_ label: String = "notesync-test") throws {
        var template = Array((NSTemporaryDirectory() + "/\(label)-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw NoteSyncError(.io, path: label, "mkdtemp failed", errno: errno)
        }
        path = String(cString: made)
    }

    func sub(_ name: String) -> String { path + "/" + name }

    deinit {
        let task = Process()
        task.executableURL = URL(fileURLWithPath: "/bin/chmod")
        task.arguments = ["-R", "u+rwX", path]
        try? task.run()
        task.waitUntilExit()
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Silent, unless `NOTESYNC_TEST_LOG=debug` (or another level) asks for the engine's log on standard error.
let testLogger: Logger = {
    if let level = ProcessInfo.processInfo.environment["NOTESYNC_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) {
        var logger = Logger(label: "notesync-tests", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = level
        return logger
    }
    var logger = Logger(label: "notesync-tests", factory: { _ in SwiftLogNoOpLogHandler() })
    logger.logLevel = .critical
    return logger
}()

/// The server `folder` of the test that owns `dir` (``TestServer``: a folder in it, or a prefix in a bucket), made on
/// first use, opened for `device`.
func makeServer(
    _ dir: TempDirectory, at folder: String = "server", device: String = "dev-a",
    primitive: PublishPrimitive? = nil
) throws -> ServerStore {
    let root = try TestServer.root(dir, folder)
    if !(try ServerFiles(root: root).exists(ServerLayout(root: root).marker)) {
        try TestServer.create(root)
    }
    return try ServerStore(root: root, device: device, primitive: primitive, logger: testLogger, vault: TestServer.vault)
}

func name(_ text: String) throws -> RecordName { try RecordName(validating: text) }

func writeFile(_ path: String, _ data: Data) throws {
    try data.write(to: URL(fileURLWithPath: path))
}

extension FaultPoint.Hooks {
    /// Hooks that run `action` at the first time `point` is hit, and do nothing at every other point or hit: what
    /// a user does once in the middle of a sync (saves a note just as the sync writes it).
    static func once(at point: String, _ action: @escaping @Sendable () throws -> Void) -> FaultPoint.Hooks {
        let done = Mutex(false)
        return FaultPoint.Hooks(hit: { hit in
            guard hit.description == point else { return }
            let first = done.withLock { done in
                defer { done = true }
                return !done
            }
            if first { try action() }
        })
    }
}
