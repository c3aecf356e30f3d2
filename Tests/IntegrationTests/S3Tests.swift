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

/// The server in an S3 bucket, on real S3 services started on loopback (moto's server and SeaweedFS): the client's
/// primitives, the precondition probe, the CLI end to end, and many processes committing at once.
@Suite(.serialized, .enabled(if: S3TestServer.available)) struct S3Tests {
    @Test(arguments: S3TestServer.Kind.allCases)
    func theClientCreatesOnlyWhatIsAbsentAndListsEveryPage(_ kind: S3TestServer.Kind) throws {
        let s3 = try S3TestServer(kind, label: "client")
        let client = try s3.makeClient(prefix: "client-" + UUID().uuidString.prefix(8).lowercased())
        defer { client.shutdown() }
        #expect(try client.createIfAbsent("a/one", Data("first".utf8)) == .created)
        #expect(try client.createIfAbsent("a/one", Data("second".utf8)) == .exists)
        #expect(try client.read("a/one") == Data("first".utf8))
        #expect(try client.read("a/missing") == nil)
        #expect(try client.head("a/missing") == nil)
        let head = try #require(try client.head("a/one"))
        #expect(head.size == 5)
        #expect(abs(head.lastModified - Clock.nowNanoseconds()) < 600_000_000_000, "Last-Modified parsed")
        // More keys than one page holds: every page is read, in order; after a key, and folders by delimiter.
        let keys = (0..<1_010).map { "b/" + String(format: "%05d", $0) }
        _ = try onThreads(keys.count, width: 16) { index in
            try client.createIfAbsent(keys[index], Data("\(index)".utf8))
        }
        let listed = try client.list(prefix: "b/")
        #expect(listed.objects.map(\.key) == keys)
        #expect(try client.list(prefix: "b/", startAfter: "b/01000").objects.map(\.key) == Array(keys.suffix(9)))
        let folders = try client.list(prefix: "", delimiter: "/")
        #expect(Set(folders.prefixes) == ["a/", "b/"])
        try client.delete("a/one")
        try client.delete("a/one")
        #expect(try client.read("a/one") == nil)

        // Eight threads race for one key: exactly one creates it.
        let raced = try onThreads(8, width: 8) { index in
            try client.createIfAbsent("race", Data("writer \(index)".utf8))
        }
        #expect(raced.filter { $0 == .created }.count == 1)
    }

    /// Many paths at once (an upload's assets after its commit) are looked up by listing their folder, a page per
    /// 25 paths at most; paths past the last key listed are asked one by one, and every answer is a HEAD's.
    @Test(arguments: S3TestServer.Kind.allCases)
    func manyPathsAreFoundByListingTheirFolder(_ kind: S3TestServer.Kind) throws {
        let s3 = try S3TestServer(kind, label: "infos")
        let prefix = "infos-" + UUID().uuidString.prefix(8).lowercased()
        let client = try s3.makeClient(prefix: prefix)
        defer { client.shutdown() }
        let storage = S3Storage(root: "s3://\(S3TestServer.bucket)/\(prefix)", client: client)
        let folder = "zones/notes/assets/"
        let keys = (0..<2_100).map { folder + String(format: "%05d", $0 * 2) }
        _ = try onThreads(keys.count, width: 16) { index in
            try client.createIfAbsent(keys[index], Data(repeating: 0x61, count: index % 7 + 1))
        }
        try client.put("zones/notes/other", Data("not asked".utf8))
        // 60 present, spread over all 2,100 (so past the two pages 60 paths may list), and 10 absent: between
        // keys, before the first and after the last.
        let present = stride(from: 0, to: keys.count, by: 35).map { keys[$0] }
        let absent = ["00001", "00003", "01001", "02223", "04199", "04201", "99999", "0", "zzz", "03999x"].map { folder + $0 }
        let asked = (present + absent).shuffled().map { storage.root + "/" + $0 }
        let requestsBefore = S3AgentTests.requests(s3)
        let found = storage.infos(asked)
        usleep(500_000)  // moto logs a request after answering it
        let requests = S3AgentTests.requests(s3).dropFirst(requestsBefore.count)
        let each = asked.map { storage.info($0) }
        #expect(found.count == asked.count)
        for (path, (listed, headed)) in zip(asked, zip(found, each)) {
            #expect(listed?.size == headed?.size && listed?.kind == headed?.kind, "\(path)")
            #expect((listed != nil) == present.contains(String(path.dropFirst(storage.root.count + 1))), "\(path)")
        }
        if kind == .moto {
            // Two pages (70 / 25), which reach key 2,000; the 2 present and 5 absent paths after it are HEADs.
            // moto colours a 404's line: "\e[33mHEAD ...".
            let lists = requests.filter { $0.contains("GET /") && $0.contains("list-type=2") }
            let heads = requests.filter { $0.contains("HEAD /") }
            let beyond = asked.filter { $0.dropFirst(storage.root.count + 1) > keys[1_999] }
            #expect(lists.count == 2, "\(requests)")
            #expect(heads.count == beyond.count, "\(requests.suffix(12))")
            #expect(beyond.count == 7)
        }
        // Few paths: a HEAD each, no listing.
        let few = Array(asked.prefix(10))
        #expect(storage.infos(few).map { $0?.size } == few.map { storage.info($0)?.size })
    }

    @Test(arguments: S3TestServer.Kind.allCases)
    func refusedCredentialsAreAConfigurationErrorAndNoAnswerIsOffline(_ kind: S3TestServer.Kind) throws {
        let s3 = try S3TestServer(kind, label: "errors")
        if kind == .seaweedfs {
            // moto accepts any signature; SeaweedFS checks it.
            let wrong = try s3.makeClient(credentials: SigV4Credentials(accessKeyID: S3TestServer.accessKey, secretAccessKey: "wrong"))
            defer { wrong.shutdown() }
            let error = try #require(throws: NoteSyncError.self) { try wrong.read("anything") }
            #expect(error.kind == .usage)
            #expect(error.fix?.contains("AWS_SECRET_ACCESS_KEY") == true)
            #expect(!error.description.contains(S3TestServer.secretKey))
        }
        let dead = try s3.makeClient(attempts: 2, endpoint: "http://127.0.0.1:9")
        defer { dead.shutdown() }
        let offline = try #require(throws: NoteSyncError.self) { try dead.createIfAbsent("x", Data("x".utf8)) }
        #expect(offline.kind == .serverUnreachable)
    }

    @Test(arguments: S3TestServer.Kind.allCases)
    func aMissingServerOrCredentialsSayTheFixThatWorks(_ kind: S3TestServer.Kind) throws {
        let s3 = try S3TestServer(kind, label: "fixes")
        let scratch = try Scratch("s3-fixes")
        let server = "s3://\(S3TestServer.bucket)/fixes-\(UUID().uuidString.prefix(8).lowercased())"
        let notes = scratch.path + "/notes"

        // No credentials anywhere: a configuration error that says where they go; following it works.
        let credentials = scratch.path + "/credentials"
        let none = ["AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SHARED_CREDENTIALS_FILE": credentials]
        let refused = try s3.notesync(["server", "init", server], extra: none)
        #expect(refused.status == 64, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add a [default] section"), "\(refused.stderr)")
        try Data(
            "[default]\naws_access_key_id = \(S3TestServer.accessKey)\naws_secret_access_key = \(S3TestServer.secretKey)\n".utf8
        ).write(to: URL(fileURLWithPath: credentials))
        let created = try s3.notesync(["server", "init", server], extra: none)
        #expect(created.status == 0, "\(created.stderr)")

        // A prefix with no server: `init` says how to make one; doing so works.
        let other = server + "-new"
        let missing = try s3.notesync(["init", "--notes", notes, "--server", other])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("run `notesync server init \(other)`"), "\(missing.stderr)")
        #expect(try s3.notesync(["server", "init", other]).status == 0)
        let joined = try s3.notesync(["init", "--notes", notes, "--server", other])
        #expect(joined.status == 0, "\(joined.stderr)")
    }

    @Test(arguments: S3TestServer.Kind.allCases)
    func aServiceThatIgnoresPreconditionsIsRefused(_ kind: S3TestServer.Kind) throws {
        let s3 = try S3TestServer(kind, label: "probe")
        let honest = try s3.makeClient()
        defer { honest.shutdown() }
        try honest.probePreconditions()
        // The proxy breaks SigV4 signatures (If-None-Match is signed): only a service that checks no signature (moto)
        // takes the stripped requests, as a service that ignores the header would.
        guard kind == .moto else { return }
        let proxy = try DroppingProxy(upstream: s3.port)
        let fooled = try s3.makeClient(endpoint: "http://127.0.0.1:\(proxy.port)")
        defer { fooled.shutdown() }
        let error = try #require(throws: NoteSyncError.self) { try fooled.probePreconditions() }
        #expect(error.message.contains("ignores conditional writes"), "\(error)")
        // The CLI refuses such a service at init, and writes nothing.
        let scratch = try Scratch("probe-cli")
        let refused = try s3.notesync(
            ["server", "init", "s3://\(S3TestServer.bucket)/refused", "--endpoint", "http://127.0.0.1:\(proxy.port)"],
            directory: scratch.path)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("ignores conditional writes"), "\(refused.stderr)")
        #expect(try honest.list(prefix: "refused/").objects.isEmpty)
    }

    @Test(arguments: S3TestServer.Kind.allCases)
    func twoDevicesSyncThroughABucket(_ kind: S3TestServer.Kind) throws {
        let s3 = try S3TestServer(kind, label: "cli")
        let t = try TwoDevices("s3cli", s3: s3)
        // Notes travel both ways, with folders.
        try t.write(t.a, "one.md", "first\n")
        try t.write(t.a, "deep/two.md", "second\n")
        try t.write(t.b, "three.md", "third\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try t.sync(t.a)
        #expect(try t.notes(t.a) == t.notes(t.b))
        #expect(try t.notes(t.a).count == 3)

        // Edits of different lines merge; edits of one line keep both (a conflict copy).
        try t.write(t.a, "merge.md", "line 1\nline 2\nline 3\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try t.write(t.a, "merge.md", "line 1 by alice\nline 2\nline 3\n")
        try t.write(t.b, "merge.md", "line 1\nline 2\nline 3 by bob\n")
        try t.write(t.a, "clash.md", "alice's words\n")
        try t.write(t.b, "clash.md", "bob's words\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try t.sync(t.a)
        #expect(t.read(t.b, "merge.md") == "line 1 by alice\nline 2\nline 3 by bob\n")
        let texts = try t.notes(t.b).values.map { String(decoding: $0, as: UTF8.self) }
        #expect(texts.contains("alice's words\n") && texts.contains("bob's words\n"), "both sides of the clash are kept")
        #expect(try t.notes(t.a) == t.notes(t.b))

        // An edit beats a delete.
        try FileManager.default.removeItem(atPath: t.a + "/one.md")
        try t.write(t.b, "one.md", "first, edited\n")
        try t.sync(t.a)
        try t.sync(t.b)
        try t.sync(t.a)
        #expect(t.read(t.a, "one.md") == "first, edited\n")

        // A dry run changes nothing: not the notes, not one object of the bucket.
        try t.write(t.a, "pending.md", "not synced yet\n")
        let client = try s3.makeClient(prefix: String(t.server.dropFirst("s3://\(S3TestServer.bucket)/".count)))
        defer { client.shutdown() }
        let objectsBefore = try client.list(prefix: "").objects
        let notesBefore = try treeFingerprint(t.a)
        let diff = try t.run(["diff", "--notes", t.a])
        #expect(diff.status == 0, "\(diff.stderr)")
        #expect(diff.stdout.contains("pending.md"), "\(diff.stdout)")
        #expect(try client.list(prefix: "").objects == objectsBefore)
        #expect(try treeFingerprint(t.a) == notesBefore)

        // No answer from the service: exit 3, the change stays queued, and goes once it answers again.
        let offline = try t.run(["sync", "--notes", t.a], environment: ["NOTESYNC_S3_ENDPOINT": "http://127.0.0.1:9"])
        #expect(offline.status == 3, "\(offline.stdout) \(offline.stderr)")
        #expect(try client.list(prefix: "").objects == objectsBefore)
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(t.read(t.b, "pending.md") == "not synced yet\n")

        // fsck, gc and du run on the bucket.
        let fsck = try t.run(["server", "fsck", t.server])
        #expect(fsck.status == 0, "\(fsck.stdout) \(fsck.stderr)")
        let gc = try t.run(["server", "gc", t.server, "--grace", "0"])
        #expect(gc.status == 0, "\(gc.stdout) \(gc.stderr)")
        try t.sync(t.a)
        try t.sync(t.b)
        #expect(try t.notes(t.a) == t.notes(t.b))
        #expect(try t.run(["server", "fsck", t.server]).status == 0)
    }

    @Test(arguments: S3TestServer.Kind.allCases)
    func eightWritersThroughABucketNeverWinOneSlotTwice(_ kind: S3TestServer.Kind) throws {
        let s3 = try S3TestServer(kind, label: "writers")
        let server = "s3://\(S3TestServer.bucket)/writers-\(UUID().uuidString.prefix(8).lowercased())"
        #expect(try s3.notesync(["server", "init", server]).status == 0)
        let writers = 8
        let commits = 25
        let processes = try (1...writers).map { index in
            try NotesyncProcess(
                [
                    "commit-load", "--server", server, "--device", "w\(index)", "--commits", "\(commits)",
                    "--records", "6", "--out", s3.scratch.path + "/won-\(index).txt"
                ],
                scratch: s3.scratch.path, environment: s3.environment, executable: try loadBinary())
        }
        for process in processes {
            let result = process.wait()
            #expect(result.status == 0, "\(result.stderr)")
        }
        var won: [Int64: String] = [:]
        for index in 1...writers {
            let lines = try String(contentsOfFile: s3.scratch.path + "/won-\(index).txt", encoding: .utf8).split(separator: "\n")
            #expect(lines.count == commits)
            for line in lines {
                let parts = line.split(separator: " ")
                let seq = try #require(Int64(parts[0]))
                #expect(won[seq] == nil, "slot \(seq) was won twice")
                won[seq] = String(parts[1])
            }
        }
        #expect(won.count == writers * commits)
        #expect(Set(won.keys) == Set(1...Int64(writers * commits)), "the log is dense")
        let fsck = try s3.notesync(["server", "fsck", server])
        #expect(fsck.status == 0, "\(fsck.stdout) \(fsck.stderr)")
    }
}

/// `body(index)` for every index in `0..<count` on `width` threads at once, results in order; throws the first failure.
func onThreads<T>(_ count: Int, width: Int, _ body: @escaping @Sendable (Int) throws -> T) throws -> [T] {
    let box = ThreadResults<T>(count)
    let group = DispatchGroup()
    for _ in 0..<width {
        group.enter()
        Thread {
            defer { group.leave() }
            while true {
                let index: Int = box.lock.withLock {
                    defer { box.next += 1 }
                    return box.next
                }
                guard index < count else { return }
                let result = Result { try body(index) }
                box.lock.withLock { box.results[index] = result }
            }
        }.start()
    }
    group.wait()
    return try box.results.map { try $0!.get() }
}

/// What ``onThreads(_:width:_:)``'s threads share.
final class ThreadResults<T>: @unchecked Sendable {
    var results: [Result<T, any Error>?]
    var next = 0
    let lock = NSLock()
    init(_ count: Int) { results = Array(repeating: nil, count: count) }
}
