import Foundation
import PushIngress
import PushLoad
import PushModel
import Testing

@Suite("load population and measurements")
struct LoadPopulationTests {
    @Test("platform shares are exact in every hundred devices; tag shares are close; the same index gives the same device")
    func population() throws {
        let population = try LoadPopulation(devices: 10_000, users: 5_000, prefix: "p", simulatorURL: "http://127.0.0.1:9/")
        let platforms = (0..<100).map { population.platform($0) }
        #expect(platforms.count { $0 == .apns } == 60 && platforms.count { $0 == .fcm } == 30)
        #expect(platforms.count { $0 == .wns } == 5 && platforms.count { $0 == .webpush } == 5)
        let sports = (0..<10_000).count { population.installation($0).tags.contains("Sports") }
        #expect((4_700...5_300).contains(sports), "\(sports)")
        #expect(population.installation(42) == population.installation(42))
        #expect(population.installation(7_042).userId == population.installation(2_042).userId)
        let webpush = try #require((0..<100).first { population.platform($0) == .webpush })
        let device = population.installation(webpush)
        #expect(device.pushChannel == "http://127.0.0.1:9/webpush/p-\(webpush)" && device.webPush != nil)
        #expect(device.templates[LoadPopulation.templateName] != nil)
        #expect(throws: LoadFailure.self) { try PlatformMix(parsing: "apns=50,fcm=50,mpns=0") }
        #expect(throws: LoadFailure.self) { try TagMix(parsing: "bad tag=5") }
    }

    @Test("results that arrive before their send's answer are counted once it comes; foreign results are not")
    func earlyResults() {
        let recorder = LoadRecorder()
        recorder.result(ResultSummary(notificationId: "n1", dispatched: ["apns": 2]))
        recorder.result(ResultSummary(notificationId: "n1", results: [.init(outcome: "delivered", pnsReason: nil, dwellMs: 40)]))
        recorder.result(ResultSummary(notificationId: "other", results: [.init(outcome: "failed", pnsReason: "x", dwellMs: 1)]))
        #expect(recorder.isComplete)
        recorder.sendAccepted(notificationId: "n1", latency: 0.002)
        #expect(!recorder.isComplete)
        recorder.result(ResultSummary(notificationId: "n1", results: [.init(outcome: "throttled", pnsReason: "TooManyRequests", dwellMs: 900)]))
        #expect(recorder.isComplete)
        let measured = recorder.snapshot()
        #expect(measured.results == 2 && measured.expectedResults == 2 && measured.outcomes == ["delivered": 1, "throttled": 1])
        #expect(measured.errors == ["outcome throttled (TooManyRequests)": 1])
        #expect(measured.endToEnd.totalCount == 2 && measured.endToEnd.max >= 899)
        #expect(measured.acceptLatency.valueAtPercentile(100) >= 1_990 && measured.acceptLatency.valueAtPercentile(100) <= 2_010)
    }

    @Test("results are counted per platform, and each second keeps its end-to-end p50 and p99 and its errors by kind")
    func perPlatformAndPerSecond() {
        let recorder = LoadRecorder()
        recorder.sendAccepted(notificationId: "n1", latency: 0.001)
        recorder.result(ResultSummary(notificationId: "n1", dispatched: ["apns": 100, "fcm": 1]))
        recorder.result(
            ResultSummary(
                notificationId: "n1", platform: "apns",
                results: (1...100).map { .init(outcome: "delivered", pnsReason: nil, dwellMs: $0 * 10) }))
        recorder.result(ResultSummary(notificationId: "n1", platform: "fcm", results: [.init(outcome: "throttled", pnsReason: "quota", dwellMs: 5)]))
        recorder.sendFailed(kind: "HTTP 503")
        let measured = recorder.snapshot()
        #expect(measured.platforms["apns"]?.delivered == 100 && measured.platforms["apns"]?.results == 100)
        #expect(measured.platforms["fcm"]?.delivered == 0 && measured.platforms["fcm"]?.results == 1)
        #expect(measured.platforms["apns"]?.endToEnd.valueAtPercentile(99) ?? 0 >= 990)
        let second = measured.timeline.seconds.last { $0.endToEndP99Ms != nil }
        #expect(second?.endToEndP50Ms ?? 0 >= 450 && second?.endToEndP50Ms ?? 0 <= 520, "p50 of 5...1000 ms: \(String(describing: second))")
        #expect(second?.endToEndP99Ms ?? 0 >= 980, "\(String(describing: second))")
        let errors = measured.timeline.seconds.reduce(into: [String: Int]()) { $0.merge($1.errors, uniquingKeysWith: +) }
        #expect(errors == ["outcome throttled": 1, "HTTP 503": 1])
    }

    @Test(
        "a run drives loopback targets only, unless --allow-remote",
        arguments: [
            ("http://push.example.com:8080", nil as String?, "http://127.0.0.1:1", "--url http://push.example.com:8080 is not on this machine"),
            ("http://127.0.0.1:8080", "kafka.example.com:9092", "http://127.0.0.1:1", "--kafka kafka.example.com:9092 is not on this machine"),
            ("http://127.0.0.1:8080", nil, "http://10.0.0.5:8080", "--sim-url http://10.0.0.5:8080 is not on this machine"),
        ])
    func loopbackOnly(_ url: String, _ kafka: String?, _ simulator: String, _ message: String) throws {
        let connection = try #require(ConnectionString("Endpoint=sb://127.0.0.1:8080/;SharedAccessKeyName=n;SharedAccessKey=k"))
        var settings = LoadSettings(
            scenario: .register, url: url, hub: "myhub", connection: connection, kafka: kafka.map { [$0] },
            population: try LoadPopulation(devices: 10, simulatorURL: simulator))
        let error = #expect(throws: LoadFailure.self) { try settings.check() }
        #expect(error?.description.contains(message) == true, "\(String(describing: error))")
        settings.allowRemote = true
        #expect(throws: Never.self) { try settings.check() }
    }
}
