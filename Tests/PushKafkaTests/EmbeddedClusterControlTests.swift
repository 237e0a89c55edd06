import PushKafka
import Testing

@Suite("Control commands of the embedded cluster")
struct EmbeddedClusterControlTests {
    @Test(
        "commands are carried out or refused with a reason",
        arguments: [
            ("broker down 1", "ok"),
            ("broker up 1", "ok"),
            ("broker sideways 1", "error: say broker down ID or broker up ID"),
            ("broker down x", "error: broker id must be a number, not \"x\""),
            ("topic create extra 4", "ok"),
            ("topic create extra 4 2", "ok"),
            ("errors produce NOT_ENOUGH_REPLICAS,REQUEST_TIMED_OUT", "ok"),
            ("errors offsetcommit 15", "ok"),
            ("errors clear produce", "ok"),
            ("errors teleport NOT_ENOUGH_REPLICAS", "error: unknown request \"teleport\""),
            ("errors fetch NO_SUCH_ERROR", "error: unknown error code \"NO_SUCH_ERROR\""),
            ("latency 2 50", "ok"),
        ])
    func command(_ line: String, _ answer: String) throws {
        let cluster = try EmbeddedKafkaCluster.start(brokers: 2, logger: testLogger)
        #expect(EmbeddedClusterControl.execute(line, on: cluster) == answer)
    }

    @Test("an unknown command is answered with the list of commands")
    func unknown() throws {
        let cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: testLogger)
        let answer = EmbeddedClusterControl.execute("fly", on: cluster)
        #expect(answer.hasPrefix("error: unknown command \"fly\""))
        #expect(answer.contains("broker down ID"))
    }

    @Test("a cluster that was shut down refuses commands")
    func afterShutdown() throws {
        let cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: testLogger)
        cluster.shutdown()
        #expect(
            EmbeddedClusterControl.execute("broker down 1", on: cluster).hasPrefix(
                "error: could not take broker 1 down: the embedded cluster is shut down"))
    }
}
