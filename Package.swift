// swift-tools-version:6.0
import PackageDescription
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// halftunesd is linked by lld: it exports no symbols (the loader then has no table of 40,000 to hash), its
// relative relocations are packed (DT_RELR: 3 MB fewer pages read at every start), and the code a running daemon
// uses is laid out together, in the order of Sources/halftunesd/halftunesd.order (Benchmarks/linkorder.py; functions
// are in sections of their own with the Makefile's RELEASE_FLAGS), so far fewer pages of it are mapped.
let daemonOrder = Context.packageDirectory + "/Sources/halftunesd/halftunesd.order"
let daemonLinkFlags = ["-use-ld=lld", "-Xlinker", "--no-export-dynamic", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]
    + (FileManager.default.fileExists(atPath: daemonOrder)
        ? ["-Xlinker", "--symbol-ordering-file=" + daemonOrder, "-Xlinker", "--no-warn-symbol-ordering"] : [])

let package = Package(
    name: "halftunesd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "halftunesd", targets: ["halftunesd"]),
        .executable(name: "halftunesctl", targets: ["halftunesctl"]),
        .library(name: "HalfTunesKit", targets: ["HalfTunesKit"]),
        .executable(name: "halftunes", targets: ["halftunes"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
    ],
    targets: [
        // libsystemd (sd_notify, socket activation, watchdog, journal) as a system library.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // Wire types only: JSON-RPC envelopes, methods, params, results, events, error codes.
        .target(name: "HalfTunesProtocol"),
        // Linux file calls Glibc exports to Swift only with _GNU_SOURCE (sync_file_range).
        .target(name: "CLinuxFile"),
        // The fatal-signal handler that records which tasks ran when the daemon trapped (async-signal-safe C).
        .target(name: "CCrashRecord"),
        // The sd-bus calls of the network and power conditions, without varargs.
        .target(name: "CSystemBus", linkerSettings: [.linkedLibrary("systemd")]),
        // sd-bus for the daemon and the users' agents: starting and watching units, posting desktop notifications.
        .target(name: "HalfTunesSystemd", dependencies: ["CSystemBus", "HalfTunesProtocol"]),
        // The crash-safe journal (SQLite via GRDB).
        .target(
            name: "HalfTunesJournal",
            dependencies: [
                "HalfTunesCore",
                "HalfTunesProtocol",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // What tasks and transfers decide: value-type machines and pure decisions, with no I/O, NIO or HTTP client.
        .target(
            name: "HalfTunesCore",
            dependencies: ["HalfTunesProtocol", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // HTTP transfers (AsyncHTTPClient) into partial files, carrying out what HalfTunesCore's machines decide.
        .target(
            name: "HalfTunesEngine",
            dependencies: [
                "HalfTunesCore",
                "HalfTunesProtocol",
                "CLinuxFile",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOSOCKS", package: "swift-nio-extras"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Sessions, queue, event fan-out and the JSON-RPC control server (SwiftNIO, Unix socket).
        .target(
            name: "HalfTunesDaemon",
            dependencies: [
                "HalfTunesProtocol",
                "HalfTunesJournal",
                "HalfTunesCore",
                "HalfTunesEngine",
                "CCrashRecord",
                "CSystemd",
                "CSystemBus",
                "HalfTunesSystemd",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        // Client library over plain POSIX sockets (no NIO), shaped after URLSession's background API.
        .target(name: "HalfTunesKit", dependencies: ["HalfTunesProtocol"]),
        // The user's agent (`halftunesctl agent`): starts the system daemon's launch units in the user's manager.
        .target(name: "HalfTunesAgent", dependencies: ["HalfTunesKit", "HalfTunesSystemd"]),
        .executableTarget(
            name: "halftunesd",
            dependencies: [
                "HalfTunesDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["halftunesd.order"],
            linkerSettings: [.unsafeFlags(daemonLinkFlags)]
        ),
        .executableTarget(
            name: "halftunesctl",
            dependencies: [
                "HalfTunesKit",
                "HalfTunesAgent",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
            // Release builds link the Swift runtime and Foundation statically (`swift build
            // --static-swift-stdlib`, the Makefile's `release`): SwiftPM then names their static dependencies
            // itself, and halftunesctl starts fast (docs/benchmarks.md).
        ),

        // Half Tunes, the URLSession tutorial's app on HalfTunesKit (docs/tutorial.md).
        .executableTarget(
            name: "halftunes",
            dependencies: ["HalfTunesKit", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Examples/HalfTunes",
            exclude: ["systemd"]
        ),
        // Test support: a HalfTunesKit client a session's launchUnit runs (the relaunch tests); writes what
        // it received.
        .executableTarget(name: "halftunes-event-probe", dependencies: ["HalfTunesKit"], path: "Tests/EventProbe"),
        // Test support: an HTTP origin on 127.0.0.1 with Range/ETag and faults on demand.
        .target(
            name: "TestOrigin",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/TestOrigin"
        ),
        .testTarget(name: "HalfTunesProtocolTests", dependencies: ["HalfTunesProtocol"]),
        .testTarget(name: "HalfTunesJournalTests", dependencies: ["HalfTunesJournal", "HalfTunesCore"]),
        .testTarget(name: "HalfTunesCoreTests", dependencies: ["HalfTunesCore", "HalfTunesProtocol"]),
        .testTarget(name: "HalfTunesEngineTests", dependencies: [
            "HalfTunesCore", "HalfTunesEngine", "TestOrigin", "CLinuxFile", .product(name: "NIOSOCKS", package: "swift-nio-extras"),
            .product(name: "NIOEmbedded", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        .testTarget(
            name: "HalfTunesDaemonTests",
            dependencies: [
                "HalfTunesDaemon",
                "HalfTunesCore",
                "HalfTunesEngine",
                "HalfTunesJournal",
                "HalfTunesProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(name: "HalfTunesKitTests", dependencies: ["HalfTunesKit"]),
        .testTarget(name: "HalfTunesAgentTests", dependencies: ["HalfTunesAgent", "HalfTunesSystemd"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "CLinuxFile",
                "HalfTunesCore",
                "HalfTunesJournal",
                "HalfTunesKit",
                "HalfTunesProtocol",
                "TestOrigin",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"), // to make the daemon's journal refuse a write
            ]
        ),
    ]
)

// The libFuzzer harnesses (Fuzz/README.md), only with HALFTUNES_FUZZ=1: the normal build never sees them. Our own
// modules get libFuzzer's coverage instrumentation and -enable-testing (the harnesses `@testable import` them); the
// dependencies are built as usual. The harness's top-level code calls LLVMFuzzerRunDriver (CLibFuzzer declares it):
// SwiftPM links an executable with `--defsym main=<Target>_main`, so libFuzzer's own `main` is never used.
if ProcessInfo.processInfo.environment["HALFTUNES_FUZZ"] == "1" {
    let instrumented: Set<String> = ["HalfTunesProtocol", "HalfTunesCore", "HalfTunesEngine", "HalfTunesJournal", "HalfTunesDaemon"]
    for target in package.targets where instrumented.contains(target.name) {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=fuzzer", "-enable-testing"])]
    }
    package.targets.append(.target(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"))
    package.targets.append(.executableTarget(
        name: "HalfTunesFuzz",
        dependencies: ["CLibFuzzer", "HalfTunesProtocol", "HalfTunesCore", "HalfTunesEngine", "HalfTunesJournal", "HalfTunesDaemon",
                       .product(name: "GRDB", package: "GRDB.swift")],
        path: "Fuzz/HalfTunesFuzz",
        swiftSettings: [.unsafeFlags(["-sanitize=fuzzer"])],
        linkerSettings: [.unsafeFlags(["-sanitize=fuzzer"])]
    ))
    package.products.append(.executable(name: "halftunes-fuzz", targets: ["HalfTunesFuzz"]))
}
