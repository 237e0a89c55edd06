import Foundation
import PushTestSupport
import Testing

/// The README's walkthrough run as a newcomer runs it: the command blocks of "The tutorials'
/// flows against `make dev`" and "Load testing with `pushhub load`", in order, in one shell,
/// from a directory laid out as the repository is (`.build/debug` holds the binaries under
/// test, `docs/picture.png` the sample image). `make dev` is the binary it runs, on a free port.
@Suite("README walkthrough", .timeLimit(.minutes(5)))
struct ReadmeWalkthroughTests {
    /// The first `sh` block after `heading`.
    static func block(after heading: String) throws -> String {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(text.range(of: "\n## \(heading)\n"), "README has no section \(heading)")
        let start = try #require(text.range(of: "```sh\n", range: section.upperBound..<text.endIndex))
        let end = try #require(text.range(of: "```\n", range: start.upperBound..<text.endIndex))
        return String(text[start.upperBound..<end.lowerBound])
    }

    @Test("the tutorials' flows and the load examples run as written, and each says what it should")
    func walkthrough() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-readme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("docs"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent(".build"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: repositoryRoot.appendingPathComponent("docs/picture.png"), to: directory.appendingPathComponent("docs/picture.png"))
        try FileManager.default.createSymbolicLink(
            at: directory.appendingPathComponent(".build/debug"), withDestinationURL: pushhubExecutable.deletingLastPathComponent())
        defer { try? FileManager.default.removeItem(at: directory) }
        let script = """
            set -eo pipefail
            cd '\(directory.path)'
            make() { [ "$1" = dev ] && exec .build/debug/pushhub dev --port 0 --data-dir "$PWD/data"; }
            \(try Self.block(after: "The tutorials' flows against `make dev`"))
            echo "== tutorials done"
            \(try Self.block(after: "Load testing with `pushhub load`"))
            echo "== load done"
            pkill -TERM -f "pushhub dev --port 0 --data-dir $PWD/data"
            wait
            """
        let (status, output) = try await ProcessLaunch.output(
            ["bash", "-c", script], environment: ["PUSHHUB_LOG_LEVEL": "error"],
            removing: ["PUSHHUB_KAFKA", "PUSHHUB_URL", "PUSHHUB_HUB", "PUSHHUB_CONNECTION_STRING", "PUSHHUB_CONFIG", "PUSHHUB_DATABASE"])
        #expect(status == 0, "\(output.suffix(3000))")
        #expect(output.contains("the client got the picture as sent"), "\(output.suffix(3000))")
        #expect(output.contains("<State>Completed</State>"), "\(output.suffix(3000))")
        #expect(output.contains("== tutorials done") && output.contains("== load done"), "\(output.suffix(3000))")
        #expect(!output.contains("INCOMPLETE"), "\(output.suffix(3000))")
        for scenario in ["register", "send", "broadcast", "mixed"] {
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("pushhub-load-\(scenario).html").path), "\(scenario)")
        }
        #expect(output.contains("registrations: 2000 of 2000"), "\(output.suffix(3000))")
    }
}
