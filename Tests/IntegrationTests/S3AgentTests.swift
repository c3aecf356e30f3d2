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
import Testing

/// The agent on a server in an S3 bucket: what an idle poll costs, and a service killed in the middle of a sync.
@Suite(.serialized, .enabled(if: S3TestServer.available)) struct S3AgentTests {
    /// The lines of moto's access log: one per request it answered.
    static func requestsAnswered(_ s3: S3TestServer) -> Int { requests(s3).count }

    /// moto's access log lines of the requests it answered (200, 404 or 412), in order.
    static func requests(_ s3: S3TestServer) -> [String] {
        let log = (try? String(contentsOfFile: s3.scratch.path + "/server.log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").filter { $0.contains("\" 200 ") || $0.contains("\" 404 ") || $0.contains("\" 412 ") }
            .map(String.init)
    }

    /// The syncs an agent ran, from its debug log (each logs its phases once).
    static func syncsRun(_ agent: NotesyncProcess) -> Int {
        agent.stderrText.components(separatedBy: "sync.phases").count - 1
    }

    @Test func anIdleAgentPollsTheBucketWithOneRequest() throws {
        let s3 = try S3TestServer(.moto, label: "poll")
        let devices = try TwoDevices("s3-poll", s3: s3)
        try devices.write(devices.a, "kept.md", "one\n")
        try devices.sync(devices.a)
        let agents = try TwoAgents(devices: devices, onlyA: true, extra: ["--poll-interval", "0.2"])
        defer { agents.stop() }
        let agent = try #require(agents.agentA)
        #expect(eventually(20) { devices.read(devices.a, "kept.md") == "one\n" && Self.syncsRun(agent) >= 2 })

        // Idle: every poll is a partial sync of nothing; count the requests the service answered meanwhile.
        let (requestsBefore, syncsBefore) = (Self.requestsAnswered(s3), Self.syncsRun(agent))
        sleep(3)
        let (requests, syncs) = (Self.requestsAnswered(s3) - requestsBefore, Self.syncsRun(agent) - syncsBefore)
        #expect(syncs >= 5, "the agent polled \(syncs) times in 3 s at 0.2 s: \(agent.stderrText.suffix(2_000))")
        // One request (the next slot) per poll; one more may fall on either edge of the window.
        #expect(requests <= syncs + 1, "\(requests) requests in \(syncs) polls: \(s3.log)")

        // The poll still brings an edit made elsewhere, and a note saved here still goes.
        try devices.write(devices.b, "from-b.md", "written on bob\n")
        try devices.sync(devices.b)
        #expect(eventually(20) { devices.read(devices.a, "from-b.md") == "written on bob\n" })
        try devices.write(devices.a, "from-a.md", "written on alice\n")
        #expect(
            try eventually(20) {
                try devices.sync(devices.b)
                return devices.read(devices.b, "from-a.md") == "written on alice\n"
            })
    }

    @Test func theServiceKilledInTheMiddleOfASyncLosesNothingAndTheAgentResumes() throws {
        // SeaweedFS keeps its data on disk, so it can be killed and started again as a crashed server is.
        let s3 = try S3TestServer(.seaweedfs, label: "killed")
        let devices = try TwoDevices("s3-killed", s3: s3)
        let agents = try TwoAgents(devices: devices, onlyA: true, extra: ["--poll-interval", "0.25"])
        defer { agents.stop() }
        let agent = try #require(agents.agentA)

        // Many notes at once: the agent's sync uploads them while the service is killed.
        var expected: [String: String] = [:]
        for index in 0..<300 {
            let name = "batch/note-\(index).md"
            expected[name] = "note \(index)\n" + String(repeating: "line of note \(index)\n", count: 40)
            try devices.write(devices.a, name, expected[name]!)
        }
        #expect(eventually(20) { agent.stderrText.contains("s3.") || agent.stderrText.contains("sync.change") })
        s3.crash()
        #expect(eventually(30) { agent.stderrText.contains("server.unreachable") }, "\(agent.stderrText.suffix(3_000))")

        // Edits while the service is down wait in the queue.
        for index in 0..<10 {
            let name = "batch/note-\(index).md"
            expected[name] = "edited while the server was down \(index)\n"
            try devices.write(devices.a, name, expected[name]!)
        }
        expected["offline.md"] = "written offline\n"
        try devices.write(devices.a, "offline.md", expected["offline.md"]!)
        sleep(1)

        try s3.restart()
        #expect(
            eventually(120) { agent.stderrText.contains("server.online") && AgentStatus.read(NotesFolder(root: devices.a))?.pending == 0 },
            "the agent did not resume: \(agent.stderrText.suffix(3_000))")

        // Everything reached the server: a one-shot sync of the other device gets every note, byte for byte.
        #expect(
            try eventually(60) {
                try devices.sync(devices.b)
                return expected.allSatisfy { devices.read(devices.b, $0.key) == $0.value }
            })
        for (name, text) in expected {
            #expect(devices.read(devices.a, name) == text, "\(name) on alice")
            #expect(devices.read(devices.b, name) == text, "\(name) on bob")
        }
        let fsck = try devices.run(["server", "fsck", devices.server])
        #expect(fsck.status == 0, "\(fsck.stdout) \(fsck.stderr)")
    }
}
