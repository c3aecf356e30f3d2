// swift-tools-version: 6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility")
]

// The git commit `notesync --version` names: scripts/install and scripts/run set NOTESYNC_COMMIT (`git describe
// --always --dirty`); a build without it says "unknown commit". Nothing is written into the source tree.
let buildCommit = Context.environment["NOTESYNC_COMMIT"] ?? ""
let buildCommitSettings: [CSetting] =
    !buildCommit.isEmpty && buildCommit.count <= 64
        && buildCommit.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.+".contains($0)) })
    ? [.define("NOTESYNC_COMMIT", to: "\"\(buildCommit)\"")] : []

// The library's layers, bottom up (docs/README.md, "The layers"): what the command line, the fuzz checks and the
// tests depend on.
let layerNames = [
    "NoteSyncSupport", "NoteSyncCrypto", "NoteSyncDiff", "NoteSyncModel", "NoteSyncLocal", "NoteSyncServer",
    "NoteSyncReconcile", "NoteSyncEngine", "NoteSyncAgent"
]
let layers = layerNames.map { Target.Dependency(stringLiteral: $0) }

let package = Package(
    name: "notesync",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "notesync", targets: ["NoteSyncCLI"]),
        // The tests' and the benchmark's load generators, kept out of the user's binary.
        .executable(name: "notesync-load", targets: ["NoteSyncLoad"]),
        .library(name: "NoteSync", targets: layerNames)
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2")
    ],
    targets: [
        .systemLibrary(
            name: "CInotifyTools",
            path: "Sources/CInotifyTools",
            providers: [.apt(["libinotifytools0-dev"])]
        ),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CDeflate", path: "Sources/CDeflate", providers: [.apt(["libdeflate-dev"])]),
        .target(name: "CSyscalls", path: "Sources/CSyscalls", cSettings: buildCommitSettings),
        // The layers, bottom up: each target depends only on those below it, so a reference the wrong way does not
        // compile. docs/README.md ("The layers") says what each holds and why it sits where it does.
        .target(
            name: "NoteSyncSupport",
            dependencies: ["CSyscalls", .product(name: "Crypto", package: "swift-crypto"), .product(name: "Logging", package: "swift-log")],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NoteSyncCrypto",
            dependencies: [
                "NoteSyncSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto")
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NoteSyncDiff", dependencies: ["NoteSyncSupport"], exclude: ["README.md"],
            swiftSettings: swiftSettings),
        .target(
            name: "NoteSyncModel", dependencies: ["NoteSyncSupport", "NoteSyncCrypto"], exclude: ["README.md"],
            swiftSettings: swiftSettings),
        .target(
            name: "NoteSyncLocal",
            dependencies: [
                "CSyscalls",
                "NoteSyncSupport",
                "NoteSyncCrypto",
                "NoteSyncModel",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log")
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NoteSyncServer",
            dependencies: [
                "CZlib",
                "CDeflate",
                "NoteSyncSupport",
                "NoteSyncCrypto",
                "NoteSyncModel",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio")
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings,
            // libdeflate is linked in (libdeflate-dev's libdeflate.a, position-independent): the binary runs on a
            // machine without libdeflate0, as it runs without Swift.
            linkerSettings: [.linkedLibrary(":libdeflate.a", .when(platforms: [.linux]))]
        ),
        .target(
            name: "NoteSyncReconcile",
            dependencies: ["NoteSyncSupport", "NoteSyncDiff", "NoteSyncModel"],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NoteSyncEngine",
            dependencies: [
                "NoteSyncSupport",
                "NoteSyncCrypto",
                "NoteSyncDiff",
                "NoteSyncModel",
                "NoteSyncLocal",
                "NoteSyncServer",
                "NoteSyncReconcile",
                .product(name: "Logging", package: "swift-log")
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NoteSyncAgent",
            dependencies: [
                "CInotifyTools",
                "NoteSyncSupport",
                "NoteSyncModel",
                "NoteSyncLocal",
                "NoteSyncServer",
                "NoteSyncEngine",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "NoteSyncCLI",
            dependencies: layers + [
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle")
            ],
            swiftSettings: swiftSettings,
            // What each flag is for, and what it saves, is in docs/development.md ("The release binary").
            // - No exported dynamic symbols: the runtime's backtracer reads the symbol table, and the loader would map
            //   and search the exported ones at every start.
            // - Packed relative relocations (`-z pack-relative-relocs`, DT_RELR; glibc 2.36 or later), read by the
            //   loader at every start. Still a PIE: its addresses stay randomised.
            // - Release builds: the functions scripts/notesync.order lists (those a sync and the agent run, found by
            //   scripts/orderfile) placed first and together, so that the code notesync runs is one stretch of pages.
            //   Names the build lacks are passed over in silence; scripts/test checks the file still matches.
            // - Release builds: libstdc++, SQLite, libinotifytools and libgcc linked in (scripts/static-link's linker
            //   scripts name the archives), so a command maps and relocates no such library at its start.
            linkerSettings: [
                .unsafeFlags(["-Xlinker", "--no-export-dynamic"]),
                .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"], .when(platforms: [.linux])),
                .unsafeFlags(
                    [
                        "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/scripts/notesync.order",
                        "-Xlinker", "--no-warn-symbol-ordering"
                    ],
                    .when(platforms: [.linux], configuration: .release)
                ),
                .unsafeFlags(
                    ["-L", "\(Context.packageDirectory)/scripts/static-link", "-Xclang-linker", "-static-libgcc"],
                    .when(platforms: [.linux], configuration: .release)
                )
            ]
        ),
        // The load generators (`notesync-load commit-load`, `history-load`): test support, on the library's public API.
        .executableTarget(
            name: "NoteSyncLoad",
            dependencies: [
                "NoteSyncSupport",
                "NoteSyncModel",
                "NoteSyncLocal",
                "NoteSyncServer",
                "NoteSyncEngine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log")
            ],
            swiftSettings: swiftSettings
        ),
        // The fuzz targets' checking functions: a normal library, so the unit tests replay the fuzz corpus.
        .target(
            name: "NoteSyncFuzz",
            dependencies: layers,
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NoteSyncTests",
            dependencies: layers + [
                "NoteSyncFuzz",
                "CSyscalls",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto")
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: layers,
            swiftSettings: swiftSettings
        )
    ]
)

// scripts/fuzz sets NOTESYNC_FUZZ=1 and builds with --sanitize=fuzzer --sanitize=address. The libFuzzer executable
// defines LLVMFuzzerTestOneInput and no main, so it links only in that build and is left out of all others.
// The code under test is optimized there (-O in a debug build: many times the executions of -Onone, where
// `-c release` loses the coverage feedback).
if Context.environment["NOTESYNC_FUZZ"] == "1" {
    for target in package.targets where target.name.hasPrefix("NoteSync") && target.type == .regular {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-O"])]
    }
    package.products.append(.executable(name: "notesync-fuzz", targets: ["NoteSyncFuzzer"]))
    package.targets.append(
        .executableTarget(
            name: "NoteSyncFuzzer",
            dependencies: ["NoteSyncFuzz"],
            path: "Fuzz/NoteSyncFuzzer",
            swiftSettings: swiftSettings
        )
    )
}
