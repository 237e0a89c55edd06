import Foundation
import Logging
import PushModel
import Testing

@testable import PushKafka

@Suite("How long a process's producer lingers")
struct ProducerLingerTests {
    @Test("the wiring's producer lingers as its maker says (the ingress: answeredLinger, 2 ms), else 5 ms, in librdkafka's linger.ms")
    func linger() throws {
        let logger = Logger(label: "linger-test")
        let answered = try KafkaWiring.make(
            servers: ["127.0.0.1:9"], topics: PushTopics(), logger: logger, linger: KafkaProducerConfiguration.answeredLinger)
        #expect(answered.producer.configuration.properties["linger.ms"] == "2")
        let plain = try KafkaWiring.make(servers: ["127.0.0.1:9"], topics: PushTopics(), logger: logger)
        #expect(plain.producer.configuration.properties["linger.ms"] == "5")
    }
}
