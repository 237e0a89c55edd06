import Foundation
import Testing

@testable import PushKafka

@Suite("The consumer's assignment and commit state machine, without a cluster")
struct ConsumerStateMachineTests {
    static let p0 = KafkaTopicPartition(topic: "t", partition: 0)
    static let p1 = KafkaTopicPartition(topic: "t", partition: 1)

    static func record(_ partition: KafkaTopicPartition, _ offset: Int64, generation: UInt64) -> KafkaRecord {
        KafkaRecord(
            topic: partition.topic, partition: partition.partition, offset: offset, key: nil, value: Data(), headers: [],
            timestampMilliseconds: nil, generation: generation)
    }

    static func handOut(_ machine: inout ConsumerStateMachine) -> KafkaRecord? {
        if case .record(let record) = machine.handOut() { return record }
        return nil
    }

    @Test("records are handed out in order; an offset is stored only once every earlier record of its partition is done")
    func assignedThenDone() {
        var machine = ConsumerStateMachine()
        let action = machine.assigned([Self.p0, Self.p1])
        #expect(action == .none, "the client took the assignment before telling the machine")
        let generation = machine.generation
        machine.fetched(
            [
                Self.record(Self.p0, 5, generation: generation), Self.record(Self.p0, 6, generation: generation),
                Self.record(Self.p1, 9, generation: generation),
            ], generation: generation)
        let first = Self.handOut(&machine)
        let second = Self.handOut(&machine)
        let third = Self.handOut(&machine)
        #expect([first?.offset, second?.offset, third?.offset] == [5, 6, 9])
        if case .empty = machine.handOut() {} else { Issue.record("the buffer is drained") }
        let stored = [second!, first!, third!, third!].map { machine.markDone($0) }
        #expect(stored[0] == nil, "offset 5 is still being worked on")
        #expect(stored[1] == .init(partition: Self.p0, offset: 7))
        #expect(stored[2] == .init(partition: Self.p1, offset: 10))
        #expect(stored[3] == nil, "done twice stores nothing")
    }

    @Test("a revoke commits then gives the partitions up; records of the old assignment are never handed out nor stored")
    func revoked() {
        var machine = ConsumerStateMachine()
        _ = machine.assigned([Self.p0])
        let old = machine.generation
        machine.fetched([Self.record(Self.p0, 1, generation: old), Self.record(Self.p0, 2, generation: old)], generation: old)
        let handed = Self.handOut(&machine)
        let action = machine.revoked()
        #expect(action == .commitThenUnassign)
        #expect(machine.assignment.isEmpty)
        if case .empty = machine.handOut() {} else { Issue.record("the rest of the old batch is dropped") }
        let stored = machine.markDone(handed!)
        #expect(stored == nil, "its partition's next owner sees it again")

        // A batch fetched before the rebalance but delivered after it is dropped too.
        _ = machine.assigned([Self.p0])
        machine.fetched([Self.record(Self.p0, 2, generation: old)], generation: old)
        if case .empty = machine.handOut() {} else { Issue.record("a stale batch is not kept") }
        let current = machine.generation
        machine.fetched([Self.record(Self.p0, 2, generation: current)], generation: current)
        let again = Self.handOut(&machine)
        #expect(again?.offset == 2)
    }

    @Test("a record of a partition not assigned is skipped; close happens once, then nothing is handed out")
    func closeOnce() {
        var machine = ConsumerStateMachine()
        _ = machine.assigned([Self.p0])
        let generation = machine.generation
        machine.fetched([Self.record(Self.p1, 3, generation: generation), Self.record(Self.p0, 4, generation: generation)], generation: generation)
        let first = Self.handOut(&machine)
        #expect(first?.partition == 0)
        let closes = [machine.close(), machine.close()]
        #expect(closes == [true, false], "the client closes the handle once")
        if case .closed = machine.handOut() {} else { Issue.record("closed") }
    }
}
