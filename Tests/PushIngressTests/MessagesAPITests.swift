import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PushConfiguration
import PushIngress
import PushKafka
import PushModel
import PushStore
import PushTestSupport
import Testing

/// The ingress with a publisher on an embedded cluster, and a reader of `pushhub.requests`.
struct MessagingFixture {
    let cluster: EmbeddedKafkaCluster
    let producer: KafkaProducer
    let app: any ApplicationProtocol
    let store: SQLRegistrationStore
    /// The store's SQLite file.
    let path: String
    /// The publisher's view of the workers' backlog, with `backlogBound`.
    let backlog: ConsumerBacklog?
    let topics = PushTopics(prefix: "t\(UUID().uuidString.prefix(8).lowercased()).")
    static let logger = Logger(label: "pushhub.tests") { _ in SwiftLogNoOpLogHandler() }

    /// `maximumRecordBytes` makes the producer refuse larger records, as a broker may.
    init(
        deliveryTimeout: Duration = .seconds(30), hubs: HubsConfiguration = IngressFixture.hubs, richQuota: RichPayloadQuota = RichPayloadQuota(),
        recovery: SendRecoverySettings? = nil, maximumRecordBytes: Int? = nil, backlogBound: Int? = nil,
        debugSendTimeout: Duration = .seconds(15), now: @escaping @Sendable () -> Date = { Date() }
    ) async throws {
        cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: Self.logger)
        for topic in topics.all { try cluster.createTopic(topic, partitions: 2) }
        var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.deliveryTimeout = deliveryTimeout
        if let maximumRecordBytes { configuration.additionalProperties["message.max.bytes"] = "\(maximumRecordBytes)" }
        producer = try KafkaProducer.make(configuration: configuration, logger: Self.logger)
        path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        // With a bound, the publisher watches the group `workers` on the deliveries topics.
        let topics = self.topics
        let servers = cluster.bootstrapServers
        let backlog = try backlogBound.map { bound -> ConsumerBacklog in
            var settings = ConsumerBacklog.Settings()
            settings.boundPerPartition = bound
            settings.refreshInterval = .milliseconds(50)
            return try ConsumerBacklog(
                servers: servers,
                watches: Platform.allCases.map { ConsumerBacklog.Watch(topic: topics.deliveries($0), group: "workers") },
                settings: settings, logger: Self.logger)
        }
        self.backlog = backlog
        app = Application(
            router: try buildIngressRouter(
                hubs: hubs, stores: IngressStores(store),
                publisher: KafkaNotificationPublisher(producer: producer, topics: topics, backlog: backlog, servers: servers, logger: Self.logger),
                richQuota: richQuota, recovery: recovery, debugSendTimeout: debugSendTimeout, now: now))
    }

    /// The SendRequests on the requests topic, waiting for `count` of them.
    func requests(_ count: Int) async throws -> [SendRequest] {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "reader-\(UUID().uuidString)")
        configuration.sessionTimeout = .seconds(3)
        let consumer = try KafkaConsumer.make(configuration: configuration, topics: [topics.requests], logger: Self.logger)
        var found: [SendRequest] = []
        let deadline = ContinuousClock.now + .seconds(30)
        for await record in consumer.records {
            found.append(try WireCoding.decode(SendRequest.self, from: record.value))
            #expect(record.keyString == found.last?.notificationId, "keyed by notification id")
            if found.count == count || ContinuousClock.now > deadline { break }
        }
        await consumer.close()
        return found
    }

    /// 40 records of 1 KB from elsewhere on `topic`, 20 to each of its two partitions: 80 KiB
    /// on each, as a backlog counts others' records (4 KiB each).
    func fill(_ topic: String) async throws {
        let filler = Data(("{\"filler\":\"" + String(repeating: "x", count: 1000) + "\"}").utf8)
        for partition in [Int32(0), 1] {
            for _ in 0..<20 {
                try await producer.send(KafkaOutgoingRecord(topic: topic, partition: partition, key: Data("x".utf8), value: filler))
            }
        }
    }

    /// The DeliveryBatches the ingress produced itself for small audiences, waiting for `count`.
    func deliveries(_ count: Int, on platforms: [Platform] = Platform.allCases) async throws -> [DeliveryBatch] {
        try await read(count, from: platforms.map(topics.deliveries)) { try WireCoding.decode(DeliveryBatch.self, from: $0.value) }
    }

    /// The dispatch summaries on the results topic, waiting for `count`.
    func summaries(_ count: Int) async throws -> [ResultBatch] {
        try await read(count, from: [topics.results]) { record in
            #expect(record.header("pushhub-recorded") == Data("summary".utf8), "marked as taken by the store already")
            return try WireCoding.decode(ResultBatch.self, from: record.value)
        }
    }

    /// Whether nothing came to `topic` before now: a marker is produced to each of its (two)
    /// partitions, and the topic's first records are read.
    func isEmpty(_ topic: String) async throws -> Bool {
        let partitions: [Int32] = [0, 1]
        for partition in partitions {
            try await producer.send(KafkaOutgoingRecord(topic: topic, partition: partition, key: Data("marker".utf8), value: Data("{}".utf8)))
        }
        // A record before a marker comes first in its partition, so the first records read
        // are all markers only when there is nothing else.
        let records = try await read(partitions.count, from: [topic]) { $0.keyString ?? "" }
        #expect(records.count == partitions.count, "read: \(records)")
        return records.allSatisfy { $0 == "marker" }
    }

    /// Up to `count` records of `topics`, decoded, read for at most `timeout`.
    private func read<T: Sendable>(
        _ count: Int, from topics: [String], timeout: Duration = .seconds(30), _ decode: @escaping @Sendable (KafkaRecord) throws -> T
    ) async throws -> [T] {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "reader-\(UUID().uuidString)")
        configuration.sessionTimeout = .seconds(3)
        let consumer = try KafkaConsumer.make(configuration: configuration, topics: topics, logger: Self.logger)
        let reading = Task {
            var found: [T] = []
            // The consumer's records end once this task is cancelled.
            for await record in consumer.records {
                found.append(try decode(record))
                if found.count >= count { break }
            }
            return found
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            reading.cancel()
        }
        let found = try await reading.value
        timer.cancel()
        await consumer.close()
        return found
    }

    /// A registration of `platform` carrying `tags`, straight into the store.
    @discardableResult
    func register(_ platform: NativeFormat, handle: String, tags: [String], hub: String = "myhub") async throws -> Registration {
        try await store.upsertRegistration(
            Registration(
                registrationId: try await store.issueRegistrationId(hub: hub), hub: hub, format: platform, handle: handle, tags: tags,
                updatedAt: Date()),
            ifMatch: nil)
    }

    static let send = IngressFixture.fullAccess
}

@Suite("Messages API", .timeLimit(.minutes(2)))
struct MessagesAPITests {
    static func headers(_ pairs: [(String, String)]) -> HTTPFields {
        var headers = IngressFixture.fullAccess
        for (name, value) in pairs { headers[HTTPField.Name(name)!] = value }
        return headers
    }

    @Test("a native send to a small tag audience is resolved as it is accepted: its batch and summary are published, no request, 201 with its id")
    func nativeSend() async throws {
        let fixture = try await MessagingFixture()
        let device = try await fixture.register(.apple, handle: String(repeating: "ab", count: 32), tags: ["Sports"])
        try await fixture.register(.apple, handle: String(repeating: "cd", count: 32), tags: ["Sports", "Politics"])
        let (location, trackingId) = try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/messages?api-version=2015-04", method: .post,
                headers: Self.headers([
                    ("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", "Sports && !Politics"),
                    ("Content-Type", "application/json;charset=utf-8"), ("apns-priority", "5"), ("X-Unrelated", "dropped"),
                ]),
                body: ByteBuffer(string: #"{"aps":{"alert":"Goal!"}}"#))
            #expect(response.status == .created, "\(response.text)")
            return (response.headers[.location], response.headers[HTTPField.Name("TrackingId")!])
        }
        let batch = try #require(try await fixture.deliveries(1).first)
        #expect(batch.platform == .apns && batch.format == .apple && batch.kind == .native)
        #expect(batch.targets.map(\.registrationId) == [device.registrationId])
        #expect(batch.body == #"{"aps":{"alert":"Goal!"}}"#)
        #expect(batch.headers == ["apns-priority": "5"])
        #expect(batch.expiresAt != nil, "stamped with its deadline")
        #expect(trackingId == batch.notificationId)
        #expect(location?.contains("/myhub/messages/\(batch.notificationId)") == true)
        let summary = try #require(try await fixture.summaries(1).first)
        #expect(summary.notificationId == batch.notificationId && summary.dispatched?[.apns] == 1)
        let outcome = try await fixture.store.notification(hub: "myhub", id: batch.notificationId)
        #expect(outcome?.state == .processing && outcome?.expectedTargets == 1)
        #expect(try await fixture.isEmpty(fixture.topics.requests), "no dispatcher hop")
    }

    @Test("audiences are read in the transaction that notes the send only where one store keeps registrations and outcomes")
    func readsWhileNotingOnlyWithOneStore() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try await SQLRegistrationStore.open(SQLiteDatabase(path: path))
        #expect(IngressStores(store).outcomesHoldRegistrations)
        let wrapped = InterceptedStore(inner: store) { _ in }
        #expect(!IngressStores(registrations: wrapped, users: store, outcomes: store, schedules: nil, richPayloads: nil).outcomesHoldRegistrations)
        #expect(!IngressStores(registrations: store, users: store, outcomes: nil, schedules: nil, richPayloads: nil).outcomesHoldRegistrations)
        await store.close()
    }

    @Test(
        "a send whose audience the store cannot read as it is accepted goes to the dispatcher: 201, noted Enqueued, its request published; read in the writer's transaction or on a reader"
    )
    func unreadableAudience() async throws {
        let fixture = try await MessagingFixture()
        try await fixture.register(.gcm, handle: "token-a", tags: ["Fans", "Local"])
        // The tag rows' table gone from under the store, as a database that refuses the query.
        let other = try SQLiteDatabase(path: fixture.path, readers: 1)
        try await other.write { try await $0.execute("ALTER TABLE registration_tags RENAME TO registration_tags_gone", []) }
        await other.close()
        let ids = try await fixture.app.test(.router) { client in
            var ids: [String] = []
            // One tag: read in the transaction that notes it. An expression: on a reader.
            for tags in ["Fans", "Fans && Local"] {
                let response = try await client.execute(
                    uri: "/myhub/messages", method: .post,
                    headers: Self.headers([
                        ("ServiceBusNotification-Format", "gcm"), ("ServiceBusNotification-Tags", tags), ("Content-Type", "application/json"),
                    ]),
                    body: ByteBuffer(string: #"{"data":{"m":"hi"}}"#))
                #expect(response.status == .created, "\(tags): \(response.text)")
                ids.append(response.headers[HTTPField.Name("TrackingId")!] ?? "")
            }
            return ids
        }
        #expect(Set(try await fixture.requests(2).map(\.notificationId)) == Set(ids), "both handed to the dispatcher")
        for id in ids { #expect(try await fixture.store.notification(hub: "myhub", id: id)?.state == .enqueued) }
        #expect(try await fixture.isEmpty(fixture.topics.deliveries(.fcm)))
    }

    @Test("a send to nobody ends NoTargetFound at once; a tag audience of more than a page, and a broadcast, go to the dispatcher")
    func smallAndLarge() async throws {
        let fixture = try await MessagingFixture()
        try await fixture.store.importRegistrations(
            (0..<501).map {
                Registration(registrationId: "big\($0)", hub: "myhub", format: .gcm, handle: "token-\($0)", tags: ["Big"], updatedAt: Date())
            })
        let ids = try await fixture.app.test(.router) { client in
            var ids: [String] = []
            for tags in ["Nobody", "Big", nil] as [String?] {
                var pairs = [("ServiceBusNotification-Format", "gcm"), ("Content-Type", "application/json")]
                if let tags { pairs.append(("ServiceBusNotification-Tags", tags)) }
                let response = try await client.execute(
                    uri: "/myhub/messages", method: .post, headers: Self.headers(pairs), body: ByteBuffer(string: #"{"data":{"m":"hi"}}"#))
                #expect(response.status == .created, "\(response.text)")
                ids.append(response.headers[HTTPField.Name("TrackingId")!] ?? "")
            }
            let nobody = try await client.execute(uri: "/myhub/messages/\(ids[0])", method: .get, headers: IngressFixture.fullAccess)
            #expect(nobody.text.contains("<State>NoTargetFound</State>"), "\(nobody.text)")
            return ids
        }
        let requests = try await fixture.requests(2)
        #expect(Set(requests.map(\.notificationId)) == Set(ids[1...]))
        #expect(try await fixture.summaries(1).map(\.notificationId) == [ids[0]], "a summary of zero for nobody")
        #expect(try await fixture.isEmpty(fixture.topics.deliveries(.fcm)))
    }

    @Test("a resolved send of which Kafka took some batches and not others is not forgotten: 201, and the dispatcher gets it whole")
    func partlyPublished() async throws {
        // The producer refuses records over 2,000 bytes: the FCM device's batch, with its
        // large template, is refused; the APNs device's is taken.
        let fixture = try await MessagingFixture(
            recovery: SendRecoverySettings(IngressFixture.hubs.sendRecovery, embeddedKafka: true), maximumRecordBytes: 2000)
        try await fixture.store.upsertRegistration(
            Registration(
                registrationId: "small", hub: "myhub", format: .apple, handle: String(repeating: "ab", count: 32), tags: ["Fans"],
                template: Template(body: #"{"aps":{"alert":"$(m)"}}"#), updatedAt: Date()), ifMatch: nil)
        let large = #"{"message":{"data":{"m":"$(m)","pad":""# + String(repeating: "x", count: 3000) + #""}}}"#
        try await fixture.store.upsertRegistration(
            Registration(
                registrationId: "large", hub: "myhub", format: .fcmv1, handle: "fcm-token", tags: ["Fans"], template: Template(body: large),
                updatedAt: Date()), ifMatch: nil)
        let id = try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/messages", method: .post,
                headers: Self.headers([
                    ("ServiceBusNotification-Format", "template"), ("ServiceBusNotification-Tags", "Fans"), ("Content-Type", "application/json"),
                ]),
                body: ByteBuffer(string: #"{"m":"hi"}"#))
            #expect(response.status == .created, "\(response.text)")
            return response.headers[HTTPField.Name("TrackingId")!] ?? ""
        }
        let delivered = try await fixture.deliveries(1)
        #expect(delivered.map(\.platform) == [.apns] && delivered.first?.notificationId == id)
        let requests = try await fixture.requests(1)
        #expect(requests.map(\.notificationId) == [id], "handed to the dispatcher whole")
        let outcome = try await fixture.store.notification(hub: "myhub", id: id)
        #expect(outcome?.state == .processing && outcome?.expectedTargets == 2, "kept, with its summary")
    }

    @Test("template broadcast and direct sends")
    func templateAndDirect() async throws {
        let fixture = try await MessagingFixture()
        try await fixture.app.test(.router) { client in
            let template = try await client.execute(
                uri: "/myhub/messages", method: .post,
                headers: Self.headers([("ServiceBusNotification-Format", "template"), ("Content-Type", "application/json")]),
                body: ByteBuffer(string: #"{"messageParam":"Breaking"}"#))
            #expect(template.status == .created)
            let direct = try await client.execute(
                uri: "/myhub/messages?direct", method: .post,
                headers: Self.headers([
                    ("ServiceBusNotification-Format", "windows"), ("X-WNS-Type", "wns/toast"),
                    ("ServiceBusNotification-DeviceHandle", "https://db5.notify.windows.com/channel"), ("Content-Type", "text/xml"),
                ]),
                body: ByteBuffer(string: "<toast/>"))
            #expect(direct.status == .created, "\(direct.text)")
        }
        let requests = try await fixture.requests(1)
        #expect(requests.map(\.format) == [.template])
        #expect(requests.first?.audience == .broadcast)
        let direct = try #require(try await fixture.deliveries(1).first)
        #expect(direct.platform == .wns && direct.format == .windows)
        #expect(direct.targets.map(\.handle) == ["https://db5.notify.windows.com/channel"] && direct.targets.first?.registrationId == nil)
        #expect(direct.headers["X-WNS-Type"] == "wns/toast")
    }

    @Test("the headers that go to the PNS are told by name in any case, and only they go")
    func passedThroughHeaders() async throws {
        let fixture = try await MessagingFixture()
        // A VoIP push may be 5,120 bytes, others 4,096: the limit reads the header in any case.
        let body = #"{"aps":{"alert":""# + String(repeating: "x", count: 4_500) + #""}}"#
        try await fixture.app.test(.router) { client in
            let direct = try await client.execute(
                uri: "/myhub/messages?direct", method: .post,
                headers: Self.headers([
                    ("ServiceBusNotification-Format", "apple"), ("Content-Type", "application/json"),
                    ("ServiceBusNotification-DeviceHandle", String(repeating: "ab", count: 32)),
                    ("APNS-Push-Type", "voip"), ("apns-priority", "5"), ("tTl", "60"), ("Urgency", "high"),
                    ("X-Custom", "kept out"), ("apns", "kept out"), ("ttl2", "kept out"), ("Urgency-Extra", "kept out"),
                ]),
                body: ByteBuffer(string: body))
            #expect(direct.status == .created, "\(direct.text)")
        }
        let batch = try #require(try await fixture.deliveries(1).first)
        #expect(batch.headers == ["APNS-Push-Type": "voip", "apns-priority": "5", "tTl": "60", "Urgency": "high"])
        for name in ["APNS-PUSH-TYPE", "x-WNS-type", "TOPIC", "ServiceBusNotification-Apns-Expiry", "X-Baidu-Message-Type"] {
            #expect(SendRequestBuilder.passThrough(name), "\(name)")
        }
        for name in ["apns", "x-wns", "ttl2", "tt", "", "Authorization", "ServiceBusNotification-Format", "apnß-x"] {
            #expect(!SendRequestBuilder.passThrough(name), "\(name)")
        }
    }

    @Test("a Content-Type's media type: before any ';', without spaces or tabs around it, letters in any case")
    func mediaTypes() {
        for given in ["application/json", "Application/JSON", "application/json; charset=utf-8", " \tapplication/json ;x", "application/json;"] {
            #expect(MediaType.matches(given, "application/json"), "\(given)")
        }
        for given in [
            "application/jsonx", "application/jso", "text/json", ";application/json", "application /json", "application/json\u{0}", "", "  ", nil,
            "applicatİon/json",
        ] {
            #expect(!MediaType.matches(given, "application/json"), "\(given ?? "nil")")
        }
        #expect(MediaType.matches(nil, "") && MediaType.matches(" ; x", ""))
        #expect(MediaType.of(" Image/PNG ; q=1") == "Image/PNG" && MediaType.of(";x") == nil)
    }

    @Test(
        "bad sends are refused before anything is queued",
        arguments: [
            ([("ServiceBusNotification-Format", "mpns"), ("Content-Type", "application/json")], "{}", "ServiceBusNotification-Format"),
            ([("Content-Type", "application/json")], "{}", "ServiceBusNotification-Format"),
            ([("ServiceBusNotification-Format", "apple"), ("Content-Type", "text/plain")], "{}", "Content-Type"),
            ([("ServiceBusNotification-Format", "apple"), ("Content-Type", ";application/json")], "{}", "Content-Type"),
            ([("ServiceBusNotification-Format", "apple"), ("Content-Type", "application/json")], "not json", "must be a JSON object"),
            (
                [("ServiceBusNotification-Format", "apple"), ("Content-Type", "application/json")],
                "{\"a\":\"" + String(repeating: "x", count: 4100) + "\"}", "4096 bytes"
            ),
            (
                [("ServiceBusNotification-Format", "apple"), ("apns-push-type", "voip"), ("Content-Type", "application/json")],
                "{\"a\":\"" + String(repeating: "x", count: 5200) + "\"}", "5120 bytes"
            ),
            ([("ServiceBusNotification-Format", "windows"), ("Content-Type", "text/xml")], "<toast/>", "X-WNS-Type"),
            // Each new service's limit, and a JSON object for each.
            (
                [("ServiceBusNotification-Format", "hms"), ("Content-Type", "application/json")],
                "{\"a\":\"" + String(repeating: "x", count: 4100) + "\"}", "more than the 4096 bytes hms notifications may have"
            ),
            (
                [("ServiceBusNotification-Format", "adm"), ("Content-Type", "application/json")],
                "{\"a\":\"" + String(repeating: "x", count: 6200) + "\"}", "more than the 6144 bytes adm notifications may have"
            ),
            (
                [("ServiceBusNotification-Format", "xiaomi"), ("Content-Type", "application/json")],
                "{\"a\":\"" + String(repeating: "x", count: 4100) + "\"}", "more than the 4096 bytes xiaomi notifications may have"
            ),
            (
                [("ServiceBusNotification-Format", "baidu"), ("Content-Type", "application/json")], "[1]",
                "body must be a JSON object"
            ),
            ([("ServiceBusNotification-Format", "ADM"), ("Content-Type", "text/xml")], "{}", "Content-Type"),
            ([("ServiceBusNotification-Format", "template"), ("Content-Type", "application/json")], #"{"a":{"b":1}}"#, "template property"),
            (
                [("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", "a &&"), ("Content-Type", "application/json")], "{}",
                "at position 4"
            ),
            (
                [
                    ("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", "a && b && c && d && e && f && g"),
                    ("Content-Type", "application/json"),
                ], "{}", "at most 6 tags"
            ),
            // What crashed the ingress with a stack overflow, and what stalled the dispatcher.
            (
                [
                    ("ServiceBusNotification-Format", "apple"),
                    ("ServiceBusNotification-Tags", String(repeating: "(", count: 6000) + "a" + String(repeating: ")", count: 6000)),
                    ("Content-Type", "application/json"),
                ], "{}", "at most 4096 bytes"
            ),
            (
                [
                    ("ServiceBusNotification-Format", "apple"),
                    ("ServiceBusNotification-Tags", String(repeating: "(", count: 17) + "a" + String(repeating: ")", count: 17)),
                    ("Content-Type", "application/json"),
                ], "{}", "nest at most 16 deep"
            ),
            (
                [
                    ("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", String(repeating: "!", count: 20000) + "a"),
                    ("Content-Type", "application/json"),
                ], "{}", "at most 4096 bytes"
            ),
            (
                [
                    ("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", String(repeating: "!", count: 1200) + "Sports"),
                    ("Content-Type", "application/json"),
                ], "{}", "nest at most 16"
            ),
            (
                [
                    ("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", (0..<34).map { "t\($0)" }.joined(separator: " || ")),
                    ("Content-Type", "application/json"),
                ], "{}", "at most 32 operators"
            ),
            (
                [
                    ("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", String(repeating: "!", count: 17) + "Sports"),
                    ("Content-Type", "application/json"),
                ], "{}", "nest at most 16"
            ),
            (
                [("ServiceBusNotification-Format", "apple"), ("Content-Type", "application/json")], String(repeating: "[", count: 3000),
                "JSON nests at most 32"
            ),
            (
                [("ServiceBusNotification-Format", "template"), ("Content-Type", "application/json")],
                "{\"a\":" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}", "JSON nests at most 32"
            ),
        ] as [([(String, String)], String, String)])
    func refused(_ pairs: [(String, String)], _ body: String, _ reason: String) async throws {
        let fixture = try await MessagingFixture()
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/messages", method: .post, headers: Self.headers(pairs), body: ByteBuffer(string: body))
            #expect(response.status == .badRequest)
            #expect(response.text.contains(reason), "\(response.text)")
        }
    }

    @Test("a listen key cannot send")
    func listenCannotSend() async throws {
        let fixture = try await MessagingFixture()
        try await fixture.app.test(.router) { client in
            var headers = IngressFixture.listenAccess
            headers[HTTPField.Name("ServiceBusNotification-Format")!] = "apple"
            headers[.contentType] = "application/json"
            let response = try await client.execute(uri: "/myhub/messages", method: .post, headers: headers, body: ByteBuffer(string: "{}"))
            #expect(response.status == .forbidden)
        }
    }

    @Test("workers far behind: a one-user send goes through the dispatcher, which waits for them")
    func backlogs() async throws {
        let fixture = try await MessagingFixture(backlogBound: 64 << 10)
        try await fixture.register(.fcmv1, handle: "token-1", tags: ["username:ann"])
        try await fixture.fill(fixture.topics.deliveries(.fcm))
        // The ingress answers from its last reading of the brokers, taken again in the background.
        let backlog = try #require(fixture.backlog)
        let deadline = ContinuousClock.now + .seconds(20)
        while backlog.hasRoom(in: [fixture.topics.deliveries(.fcm)]), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!backlog.hasRoom(in: [fixture.topics.deliveries(.fcm)]), "the workers' topic is full")
        try await fixture.app.test(.router) { client in
            let headers = Self.headers([
                ("ServiceBusNotification-Format", "fcmv1"), ("ServiceBusNotification-Tags", "username:ann"), ("Content-Type", "application/json"),
            ])
            let body = #"{"message":{"data":{"m":"hi"}}}"#
            let toUser = try await client.execute(uri: "/myhub/messages", method: .post, headers: headers, body: ByteBuffer(string: body))
            #expect(toUser.status == .created)
            let requests = try await fixture.requests(1)
            #expect(requests.count == 1, "the send went to pushhub.requests, for the dispatcher")
            #expect(requests.first?.audience == .tags("username:ann"))
            // Only the platforms a send can reach count: a native APNs send to a user is still
            // resolved as it is accepted, its batch straight to the APNs workers.
            try await fixture.register(.apple, handle: "abcd", tags: ["username:bob"])
            var apple = Self.headers([("ServiceBusNotification-Format", "apple"), ("ServiceBusNotification-Tags", "username:bob")])
            apple[.contentType] = "application/json"
            let toBob = try await client.execute(uri: "/myhub/messages", method: .post, headers: apple, body: ByteBuffer(string: #"{"aps":{}}"#))
            #expect(toBob.status == .created)
            let batches = try await fixture.deliveries(1, on: [.apns])
            #expect(batches.first?.platform == .apns && batches.first?.targets.map(\.handle) == ["abcd"], "\(batches)")
        }
    }

    @Test("when Kafka cannot take the send: 503 with Retry-After, never 201")
    func kafkaDown() async throws {
        // Sends are kept for republishing, so what a refused send left behind would show.
        let fixture = try await MessagingFixture(
            deliveryTimeout: .seconds(2), recovery: SendRecoverySettings(IngressFixture.hubs.sendRecovery, embeddedKafka: true))
        try fixture.cluster.setBrokerDown(1)
        try await fixture.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/myhub/messages", method: .post,
                headers: Self.headers([("ServiceBusNotification-Format", "gcm"), ("Content-Type", "application/json")]),
                body: ByteBuffer(string: #"{"data":{"message":"hi"}}"#))
            #expect(response.status == .serviceUnavailable)
            #expect(response.headers[.retryAfter] == "5")
            // A direct send's batch is refused as well: 503, and nothing is kept of it.
            let direct = try await client.execute(
                uri: "/myhub/messages?direct", method: .post,
                headers: Self.headers([
                    ("ServiceBusNotification-Format", "gcm"), ("ServiceBusNotification-DeviceHandle", "token-1"),
                    ("Content-Type", "application/json"),
                ]),
                body: ByteBuffer(string: #"{"data":{"message":"hi"}}"#))
            #expect(direct.status == .serviceUnavailable)
        }
        #expect(try await fixture.store.claimUnfinished(now: Date().addingTimeInterval(3600), grace: 1, maximumPublishes: 10, limit: 10).isEmpty)
    }
}
