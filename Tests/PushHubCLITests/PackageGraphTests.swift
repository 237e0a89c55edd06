import Foundation
import PushTestSupport
import Testing

/// The package graph keeps the workers, the dispatcher and the simulator off the ingress (and
/// the workers and the simulator off the store): scripts/check-dependencies.py on
/// `swift package dump-package`.
@Suite("Package graph")
struct PackageGraphTests {
    static let script = repositoryRoot.appendingPathComponent("scripts/check-dependencies.py").path

    static func dump() async throws -> Data {
        // A scratch path of its own: the running `swift test` holds .build's lock.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dump-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (status, output) = try await ProcessLaunch.output(
            ["bash", "-c", "cd '\(repositoryRoot.path)' && swift package --scratch-path '\(scratch)' dump-package 2>/dev/null"])
        try #require(status == 0, "\(output.prefix(500))")
        return Data(output.utf8)
    }

    @Test("no worker, dispatcher or simulator target reaches the ingress; the check fails when one does")
    func dependencies() async throws {
        let dump = try await Self.dump()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-package-\(UUID().uuidString).json")
        try dump.write(to: file)
        let (status, output) = try await ProcessLaunch.output(["python3", Self.script, file.path])
        #expect(status == 0, "\(output)")
        #expect(output.contains("ok: 11 targets checked"), "\(output)")

        // The same graph with the worker engine importing the ingress again.
        var package = try #require(try JSONSerialization.jsonObject(with: dump) as? [String: Any])
        var targets = try #require(package["targets"] as? [[String: Any]])
        let index = try #require(targets.firstIndex { $0["name"] as? String == "PushWorker" })
        var dependencies = targets[index]["dependencies"] as? [Any] ?? []
        dependencies.append(["byName": ["PushIngress", NSNull()]])
        targets[index]["dependencies"] = dependencies
        package["targets"] = targets
        try JSONSerialization.data(withJSONObject: package).write(to: file)
        let (broken, message) = try await ProcessLaunch.output(["python3", Self.script, file.path])
        #expect(broken == 1)
        #expect(message.contains("PushWorker reaches PushDispatcher, PushIngress, PushStore"), "\(message)")
        #expect(message.contains("PushAPNsWorkerMain reaches PushDispatcher, PushIngress"), "\(message)")
    }
}
