import Foundation
import Testing

/// `pushhub installations` against `pushhub dev`, through the hub API.
@Suite("pushhub installations", .timeLimit(.minutes(2)))
struct InstallationsCommandTests {
    @Test("count, list, and a delete by filter that counts first and deletes only what was confirmed")
    func countListDelete() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dev-\(UUID().uuidString)")
        let stack = try await DevCommandTests.Stack.start(data: data)
        defer { stack.process.signal(SIGTERM) }
        for (index, tag) in ["gone", "gone", "gone", "kept", "kept", "kept"].enumerated() {
            let body = #"{"installationId":"cli-\#(index)","platform":"apns","pushChannel":"ab\#(index)","tags":["\#(tag)"],"userId":"u\#(index)"}"#
            #expect(try await stack.call("PUT", "/\(stack.hub)/installations/cli-\(index)", body).0 == 200)
        }
        let environment = ["PUSHHUB_URL": stack.url, "PUSHHUB_CONNECTION_STRING": stack.connectionString, "PUSHHUB_HUB": stack.hub]
        func pushhub(_ arguments: [String]) async throws -> (status: Int32, output: String) {
            try await CommandLineMistakesTests.pushhub(["installations"] + arguments, environment: environment)
        }
        #expect(try await pushhub(["count", "--tag", "gone"]) == (0, "3\n"))
        #expect(try await pushhub(["count", "--tag", "gone || kept", "--user-id", "u4"]) == (0, "1\n"))
        let (listed, list) = try await pushhub(["list", "--tag", "gone"])
        #expect(listed == 0, "\(list)")
        #expect(
            list.split(separator: "\n") == [
                "INSTALLATION\tPLATFORM\tUSER\tEXPIRED\tTAGS", "cli-0\tapns\tu0\tfalse\tgone", "cli-1\tapns\tu1\tfalse\tgone",
                "cli-2\tapns\tu2\tfalse\tgone",
            ], "\(list)")

        let (dry, dryOutput) = try await pushhub(["delete", "--tag", "gone"])
        #expect(dry == 0 && dryOutput.contains("3 installation(s) match; nothing was deleted"), "\(dryOutput)")
        #expect(try await pushhub(["count", "--tag", "gone"]).output == "3\n")
        let (wrong, wrongOutput) = try await pushhub(["delete", "--tag", "gone", "--confirm", "2"])
        #expect(wrong != 0 && wrongOutput.contains("the filters now take 3"), "\(wrongOutput)")
        #expect(try await pushhub(["count", "--tag", "gone"]).output == "3\n")
        let (deleted, deletedOutput) = try await pushhub(["delete", "--tag", "gone", "--confirm", "3"])
        #expect(deleted == 0 && deletedOutput.contains("deleted 3 installation(s)"), "\(deletedOutput)")
        #expect(try await pushhub(["count", "--tag", "gone"]).output == "0\n")
        #expect(try await pushhub(["count", "--tag", "kept"]).output == "3\n")
        #expect(try await stack.call("GET", "/\(stack.hub)/installations/cli-0").0 == 404)

        let (unfiltered, unfilteredOutput) = try await pushhub(["delete", "--confirm", "3"])
        #expect(unfiltered != 0 && unfilteredOutput.contains("at least one filter"), "\(unfilteredOutput)")
        let (badTag, badTagOutput) = try await pushhub(["count", "--tag", "(a"])
        #expect(badTag != 0 && badTagOutput.contains("400") && badTagOutput.contains("tag:"), "\(badTagOutput)")
    }
}
