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

/// The one updating line a long sync or `init` shows on a terminal (stderr): drawn from its own thread, first after
/// a second (a short sync shows nothing), then five times a second, and cleared at the end. The work only bumps
/// the counters of ``SyncProgress``.
final class ProgressLine: @unchecked Sendable {
    let progress = SyncProgress()
    private let stopped = DispatchSemaphore(value: 0)
    private let ended = DispatchSemaphore(value: 0)

    /// A line for work that may be long, or nil when none must show: stderr is not a terminal, `--json`, `--quiet`.
    static func start(quiet: Bool) -> ProgressLine? {
        guard !quiet, isatty(STDERR_FILENO) == 1 else { return nil }
        let line = ProgressLine()
        let thread = Thread { line.draw() }
        thread.name = "progress"
        thread.start()
        return line
    }

    /// Stops drawing and clears the line; call before anything else is printed.
    func finish() {
        stopped.signal()
        ended.wait()
    }

    private func draw() {
        defer { ended.signal() }
        guard stopped.wait(timeout: .now() + 1.0) == .timedOut else { return }
        repeat {
            let text = SyncProgress.line(progress.snapshot)
            write("\r" + String(text.prefix(max(Self.columns() - 1, 10))) + "\u{1B}[K")
        } while stopped.wait(timeout: .now() + 0.2) == .timedOut
        write("\r\u{1B}[K")
    }

    private func write(_ text: String) {
        let data = Array(text.utf8)
        _ = data.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    /// The terminal's width (80 when it does not say).
    private static func columns() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }
}
