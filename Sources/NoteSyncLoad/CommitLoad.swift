import ArgumentParser
import Foundation
import NoteSyncEngine
import NoteSyncLocal
import NoteSyncModel
import NoteSyncServer
import NoteSyncSupport

/// Commits as fast as it can to a server, many commits touching a small set of shared records: the load of the
/// multi-process concurrency tests. Appends `seq commit-id` of every commit it won to --out.
struct CommitLoad: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "commit-load")

    @OptionGroup var global: LoadOptions
    @Option var server: String
    @Option var device: String
    @Option var commits: Int = 100
    @Option var records: Int = 16
    @Option var primitive: PublishPrimitive?
    @Option var out: String

    func run() throws {
        let logger = global.makeLogger()
        let store = try ServerStore(root: server, device: device, primitive: primitive, logger: logger)
        let outFD = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard outFD >= 0 else { throw NoteSyncError(.io, path: out, "cannot open", errno: errno) }
        defer { close(outFD) }
        var state = try store.bootstrap()
        var conflicts = 0
        for index in 0..<commits {
            let count = Int.random(in: 1...3)
            let picked = Set((0..<count).map { _ in Int.random(in: 0..<records) }).sorted()
            var pending: [(name: RecordName, data: Data, delete: Bool)] = []
            for record in picked {
                let name = try RecordName(validating: "shared/r\(record).md")
                let data = Data("\(device) commit \(index) record \(record) \(UUID())\n".utf8)
                pending.append((name, data, Int.random(in: 0..<10) == 0))
            }
            while true {
                try store.fetch(into: &state)
                var changes: [RecordChange] = []
                for item in pending {
                    let base = state.tag(of: item.name)
                    if item.delete, let head = state.heads[item.name], !head.deleted {
                        changes.append(.delete(item.name, base: base, modified: Clock.nowNanoseconds()))
                    } else {
                        changes.append(
                            .save(
                                item.name, base: base, text: try store.putAsset(item.data),
                                modified: Clock.nowNanoseconds()))
                    }
                }
                switch try store.commit(changes, into: &state) {
                case .committed(let entry):
                    // As the engine does (format 3): a text a gc swept between its publish and the commit goes back.
                    let missing = Set(store.missingAssets(changes.compactMap(\.text)).map(\.sha256))
                    for item in pending where missing.contains(ContentDigest(of: item.data)) { try store.putAsset(item.data) }
                    let line = Data("\(entry.seq) \(entry.commit)\n".utf8)
                    _ = line.withUnsafeBytes { write(outFD, $0.baseAddress, $0.count) }
                case .conflicts:
                    conflicts += 1
                    continue
                }
                break
            }
        }
        print("{\"device\":\"\(device)\",\"commits\":\(commits),\"conflicts\":\(conflicts),\"token\":\(state.token)}")
    }
}

extension PublishPrimitive: ExpressibleByArgument {}
