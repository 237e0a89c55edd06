import Foundation
import PushConfiguration
import Testing

@Suite("pushhub sim", .timeLimit(.minutes(1)))
struct SimCommandTests {
    @Test("--fcm-quota writes the attached hub's simulated FCM quota; 0 or no --attach is refused")
    func fcmQuota() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-sim-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let config = data.appendingPathComponent("pushhub.yaml").path
        let sim = try ChildProcess(
            arguments: [
                "sim", "--config", config, "--attach", "pushhub-dev", "--data-dir", data.appendingPathComponent("sim").path, "--fcm-quota", "1234567",
            ],
            environment: ["PUSHHUB_LOG_LEVEL": "error"])
        #expect(await sim.line(startingWith: "PUSHHUB_PNS_CA=") != nil, "\(sim.output)")
        sim.signal(SIGTERM)
        _ = await sim.exitStatus(within: .seconds(20))
        let hubs = try HubsConfiguration.load(from: config)
        #expect(hubs.hubs.first { $0.name == "pushhub-dev" }?.credentials.fcm?.ratePerMinute == 1_234_567)

        for arguments in [["--attach", "pushhub-dev", "--fcm-quota", "0"], ["--fcm-quota", "100"]] {
            // Through a shell, for the error the command writes on standard error.
            let command = ([pushhubExecutable.path, "sim", "--config", config, "--data-dir", data.appendingPathComponent("sim2").path] + arguments)
                .joined(separator: " ")
            let refused = try ChildProcess(URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", command + " 2>&1"])
            #expect(await refused.line(startingWith: "Error:")?.contains("--fcm-quota") == true, "\(refused.output)")
            #expect(await refused.exitStatus(within: .seconds(20)) != 0)
        }
    }
}
