import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushIngress
import PushModel
import PushSimulator
import Testing

/// Huawei Push Kit, ADM, Xiaomi and Baidu end to end: HTTP → Kafka → dispatcher → their
/// workers → the simulator → results → `GET /{hub}/messages/{id}`.
@Suite("Pipeline through the HMS, ADM, Xiaomi and Baidu workers", .timeLimit(.minutes(5)))
struct OtherPlatformsPipelineTests {
    static let message = #"Fish & "chips" <today>"#

    @Test("a native send to each of them ends Completed with one success and one pruned handle each, in Azure's count elements")
    func nativeSends() async throws {
        var faults = SimulatorFaults()
        faults.deadHandles = ["dead*"]
        let pipeline = try await PipelineFixture(faults: faults, workers: [.hms, .adm, .xiaomi, .baidu])
        defer { Task { await pipeline.stop() } }
        let sim = pipeline.sim
        let devices: [(platform: String, live: String, dead: String)] = [
            ("hms", "hms-phone", "dead-hms"), ("adm", "amzn1.adm-registration.v3.tablet", "dead-adm"), ("xiaomi", "mi-phone", "dead-mi"),
            ("baidu", "42-baiduchannel", "7-deadchannel"),
        ]
        try await Application(router: try pipeline.router()).test(.router) { client in
            for device in devices {
                try await PipelineTests.put(
                    client, "o-\(device.platform)",
                    PipelineTests.installation("o-\(device.platform)", platform: device.platform, channel: "\"\(device.live)\""))
                try await PipelineTests.put(
                    client, "d-\(device.platform)",
                    PipelineTests.installation("d-\(device.platform)", platform: device.platform, channel: "\"\(device.dead)\""))
            }
            let sends: [(format: String, body: String, headers: [String: String], element: String)] = [
                (
                    "hms", #"{"message":{"android":{"notification":{"title":"hms news","body":"b","click_action":{"type":3}}}}}"#, [:],
                    "HmsOutcomeCounts"
                ),
                ("adm", #"{"data":{"text":"adm news"},"consolidationKey":"news"}"#, [:], "AdmOutcomeCounts"),
                ("xiaomi", #"{"title":"News","description":"xiaomi news","payload":"p"}"#, [:], "XiaomiOutcomeCounts"),
                ("baidu", #"{"custom":"baidu news"}"#, ["X-Baidu-Message-Type": "1"], "BaiduOutcomeCounts"),
            ]
            for send in sends {
                let id = try await PipelineFixture.send(client, format: send.format, tags: "news", body: send.body, headers: send.headers)
                let details = try await PipelineFixture.completed(client, id)
                #expect(details.contains("<State>Completed</State>"), "\(send.format): \(details)")
                #expect(details.contains("<TargetPlatforms>\(send.format)</TargetPlatforms>"), "\(send.format): \(details)")
                let counts = "<Outcome><Name>Success</Name><Count>1</Count></Outcome><Outcome><Name>BadChannel</Name><Count>1</Count></Outcome>"
                #expect(details.contains("<\(send.element)>\(counts)</\(send.element)>"), "\(send.format): \(details)")
                // ADM's counts are Azure's DataContract's, before PnsErrorDetailsUri; the others after it.
                let element = try #require(details.range(of: "<\(send.element)>"))
                let errors = try #require(details.range(of: "<PnsErrorDetailsUri>"))
                #expect((element.lowerBound < errors.lowerBound) == (send.format == "adm"), "\(details)")
            }
        }
        let hms = try #require(try await sim.deliveries("hms-phone").first?["payload"] as? String)
        #expect(hms.contains("hms news") && hms.contains(#""token":["hms-phone"]"#), "\(hms)")
        let adm = try #require(try await sim.deliveries("amzn1.adm-registration.v3.tablet").first?["payload"] as? String)
        let admMessage = try #require(try JSONSerialization.jsonObject(with: Data(adm.utf8)) as? [String: Any])
        #expect(admMessage["consolidationKey"] as? String == "news" && admMessage["data"] as? [String: String] == ["text": "adm news"], "\(adm)")
        // The send's expiry (30 minutes by default) as ADM's expiresAfter.
        #expect((1700...1800).contains(admMessage["expiresAfter"] as? Int ?? 0), "\(adm)")
        let xiaomi = try #require(try await sim.deliveries("mi-phone").first?["payload"] as? String)
        #expect(xiaomi.contains(#""description":"xiaomi news""#) && xiaomi.contains(#""restricted_package_name":"com.example.myhub""#), "\(xiaomi)")
        let baidu = try #require(try await sim.deliveries("baiduchannel").first)
        #expect(baidu["payload"] as? String == #"{"custom":"baidu news"}"#)
        #expect((baidu["headers"] as? [String: String])?["msg_type"] == "1", "X-Baidu-Message-Type passed through")
        // Each dead installation's channel is marked expired, as Azure does.
        for device in devices {
            #expect(try await pipeline.store.installation(hub: "myhub", id: "d-\(device.platform)")?.pushChannelExpired == true, "\(device.platform)")
            #expect(
                try await pipeline.store.installation(hub: "myhub", id: "o-\(device.platform)")?.pushChannelExpired == false, "\(device.platform)")
        }
    }

    @Test("one template send fills each one's JSON template, from installations and from Azure's registration descriptions")
    func templateSend() async throws {
        let pipeline = try await PipelineFixture(workers: [.hms, .adm, .xiaomi, .baidu])
        defer { Task { await pipeline.stop() } }
        let sim = pipeline.sim
        try await Application(router: try pipeline.router()).test(.router) { client in
            try await PipelineTests.put(
                client, "t-hms",
                PipelineTests.installation(
                    "t-hms", platform: "hms", channel: #""hms-template""#, templates: #"{"t":{"body":"{\"message\":{\"data\":\"$(message)\"}}"}}"#))
            try await PipelineTests.put(
                client, "t-xiaomi",
                PipelineTests.installation(
                    "t-xiaomi", platform: "xiaomi", channel: #""mi-template""#,
                    templates: #"{"t":{"body":"{\"title\":\"News\",\"description\":\"$(message)\",\"pass_through\":0}"}}"#))
            // ADM and Baidu through the registration API, as Azure's SDKs write them.
            let descriptions = [
                #"<AdmTemplateRegistrationDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Tags>news</Tags><AdmRegistrationId>adm-template</AdmRegistrationId><BodyTemplate><![CDATA[{"data":{"text":"$(message)"}}]]></BodyTemplate></AdmTemplateRegistrationDescription>"#,
                #"<BaiduTemplateRegistrationDescription xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Tags>news</Tags><BaiduUserId>9</BaiduUserId><BaiduChannelId>baidu-template</BaiduChannelId><BodyTemplate><![CDATA[{"title":"News","description":"$(message)"}]]></BodyTemplate><MessageType>0</MessageType></BaiduTemplateRegistrationDescription>"#,
            ]
            var headers = PipelineFixture.access
            headers[.contentType] = "application/atom+xml;type=entry;charset=utf-8"
            for description in descriptions {
                let entry = #"<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">\#(description)</content></entry>"#
                let response = try await client.execute(uri: "/myhub/registrations", method: .post, headers: headers, body: ByteBuffer(string: entry))
                #expect(response.status == .ok, "\(String(buffer: response.body))")
            }

            let id = try await PipelineFixture.send(client, format: "template", tags: "news", body: #"{"message":"Fish & \"chips\" <today>"}"#)
            let details = try await PipelineFixture.completed(client, id)
            #expect(details.contains("<State>Completed</State>"), "\(details)")
            let elements = ["AdmOutcomeCounts", "BaiduOutcomeCounts", "XiaomiOutcomeCounts", "HmsOutcomeCounts"]
            for element in elements {
                #expect(
                    details.contains("<\(element)><Outcome><Name>Success</Name><Count>1</Count></Outcome></\(element)>"), "\(element): \(details)")
            }
            let positions = elements.compactMap { details.range(of: "<\($0)>")?.lowerBound }
            #expect(positions == positions.sorted(), "Azure's order: \(details)")
        }
        func json(_ text: String?) throws -> [String: Any] {
            let data = Data(try #require(text).utf8)
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        let hms = try json(try await sim.deliveries("hms-template").first?["payload"] as? String)
        #expect((hms["message"] as? [String: Any])?["data"] as? String == Self.message)
        let adm = try json(try await sim.deliveries("adm-template").first?["payload"] as? String)
        #expect((adm["data"] as? [String: String])?["text"] == Self.message)
        let xiaomi = try json(try await sim.deliveries("mi-template").first?["payload"] as? String)
        #expect(xiaomi["description"] as? String == Self.message && xiaomi["pass_through"] as? String == "0", "\(xiaomi)")
        let baidu = try #require(try await sim.deliveries("baidu-template").first)
        #expect(try json(baidu["payload"] as? String)["description"] as? String == Self.message)
        #expect((baidu["headers"] as? [String: String])?["msg_type"] == "0", "the registration's MessageType, not the title's guess")
    }
}
