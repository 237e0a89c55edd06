import PushModel
import Testing

@Suite("Topic names")
struct TopicsTests {
    @Test("every platform's deliveries topic under the prefix, made again when the prefix changes")
    func deliveriesTopics() {
        var topics = PushTopics()
        #expect(topics.deliveries(.apns) == "pushhub.deliveries.apns")
        #expect(topics.deliveries(.baidu) == "pushhub.deliveries.baidu")
        #expect(topics.requests == "pushhub.requests" && topics.results == "pushhub.results" && topics.deadLetter == "pushhub.deadletter")
        topics.prefix = "tenant-a."
        for platform in Platform.allCases {
            #expect(topics.deliveries(platform) == "tenant-a.deliveries.\(platform.rawValue)")
            #expect(Platform.allCases[platform.ordinal] == platform)
        }
        #expect(topics.allDeliveries == Platform.allCases.map { "tenant-a.deliveries.\($0.rawValue)" })
        #expect(topics.all.count == Platform.allCases.count + 3 && Set(topics.all).count == topics.all.count)
        #expect(topics == PushTopics(prefix: "tenant-a.") && topics != PushTopics())
    }
}
