import Foundation
import PushTestSupport
import Testing

/// Debug sends (`?test`) against `pushhub dev`: through the workers and the simulators, the
/// answer in Azure's NotificationOutcome shape.
@Suite("Debug send (?test)", .timeLimit(.minutes(3)))
struct DebugSendTests {
    static func apnsInstallation(_ id: String, handle: String, tag: String) -> String {
        #"{"installationId":"\#(id)","platform":"apns","pushChannel":"\#(handle)","tags":["\#(tag)"]}"#
    }

    /// The RegistrationResult elements of an answer, as [element: text] each.
    static func results(_ xml: String) -> [[String: String]] {
        xml.components(separatedBy: "<RegistrationResult>").dropFirst().map { part in
            var fields: [String: String] = [:]
            for name in ["ApplicationPlatform", "PnsHandle", "RegistrationId", "Outcome"] {
                if let open = part.range(of: "<\(name)>"), let close = part.range(of: "</\(name)>") {
                    fields[name] = String(part[open.upperBound..<close.lowerBound])
                } else if part.contains("<\(name) i:nil=\"true\"/>") {
                    fields[name] = "nil"
                }
            }
            return fields
        }
    }

    @Test("a debug send answers each device's PNS result; more than 10 matches send to 10; direct, header and command-line forms")
    func debugSend() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-dev-\(UUID().uuidString)")
        let stack = try await DevCommandTests.Stack.start(data: data)
        defer { stack.process.signal(SIGTERM) }
        let simulator = String(try #require(await stack.process.line(startingWith: "PUSHHUB_SIM_URL=")).dropFirst("PUSHHUB_SIM_URL=".count))
        // Handles starting dead are unregistered at the simulated APNs.
        let faults = #"{"deadHandles":["dead*"],"throttleRate":0,"errorRate":0,"latencyMs":0,"retryAfterSeconds":1}"#
        #expect(try await httpCall("POST", simulator + "/sim/faults", faults, authorization: "", contentType: "application/json").0 == 200)

        let good = "cafe" + String(repeating: "01", count: 30)
        let dead = "dead" + String(repeating: "02", count: 30)
        #expect(
            try await stack.call("PUT", "/\(stack.hub)/installations/dbg-good", Self.apnsInstallation("dbg-good", handle: good, tag: "pair")).0 == 200
        )
        #expect(
            try await stack.call("PUT", "/\(stack.hub)/installations/dbg-dead", Self.apnsInstallation("dbg-dead", handle: dead, tag: "pair")).0 == 200
        )
        for index in 0..<12 {
            let handle = String(format: "%04x", index) + String(repeating: "ab", count: 30)
            #expect(
                try await stack.call(
                    "PUT", "/\(stack.hub)/installations/dbg-\(index)", Self.apnsInstallation("dbg-\(index)", handle: handle, tag: "many")
                ).0 == 200)
        }
        let alert = #"{"aps":{"alert":"Debug"}}"#
        let apple = ["ServiceBusNotification-Format": "apple"]

        // Two matches: one delivered, one the PNS says is dead; the answer waited for both.
        let (status, xml, response) = try await stack.call(
            "POST", "/\(stack.hub)/messages?test", alert, headers: apple.merging(["ServiceBusNotification-Tags": "pair"]) { $1 })
        #expect(status == 201, "\(xml)")
        #expect(response?.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("application/xml") == true)
        #expect(response?.value(forHTTPHeaderField: "PushHub-Matched") == "2")
        #expect(xml.hasPrefix(#"<NotificationOutcome xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect""#), "\(xml)")
        #expect(xml.contains("<Success>1</Success><Failure>1</Failure><Results>"), "\(xml)")
        let results = Self.results(xml)
        #expect(results.count == 2)
        let delivered = try #require(results.first { $0["PnsHandle"] == "cafe01010101...01010101" }, "\(xml)")
        #expect(delivered["ApplicationPlatform"] == "apple")
        #expect(delivered["Outcome"] == "The Notification was successfully sent to the Push Notification System")
        #expect(delivered["RegistrationId"]?.isEmpty == false)
        let unregistered = try #require(results.first { $0["PnsHandle"] == "dead02020202...02020202" }, "\(xml)")
        #expect(
            unregistered["Outcome"] == "The Push Notification System reported the handle invalid (410 Unregistered); the registration was deleted")
        // The pushes really went out.
        let (_, deliveries, _) = try await httpCall("GET", simulator + "/sim/deliveries?handle=\(good)", authorization: "")
        #expect(deliveries.contains("Debug"), "\(deliveries)")
        // And the send is a notification like any other.
        let id = try #require(response?.value(forHTTPHeaderField: "TrackingId"))
        let details = try await stack.waitCompleted(id)
        #expect(details.contains("<ApnsOutcomeCounts>"), "\(details)")
        // Its details say what it asked for, in Azure's order, and where its failures are.
        #expect(
            details.contains(
                "<NotificationBody>{&quot;aps&quot;:{&quot;alert&quot;:&quot;Debug&quot;}}</NotificationBody><Tags>pair</Tags><TargetPlatforms>apple</TargetPlatforms><ApnsOutcomeCounts>"
            ), "\(details)")
        let errorsURI = try #require(
            details.components(separatedBy: "<PnsErrorDetailsUri>").dropFirst().first?.components(separatedBy: "</PnsErrorDetailsUri>").first,
            "\(details)")
        #expect(errorsURI.hasSuffix("/messages/\(id)/errors?api-version=2015-04"))
        let (errorsStatus, errors, errorsResponse) = try await stack.call(
            "GET", String(errorsURI.dropFirst(stack.url.count)).replacingOccurrences(of: "?api-version=2015-04", with: ""))
        #expect(errorsStatus == 200)
        #expect(errorsResponse?.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("application/x-ndjson") == true)
        let errorLines = errors.split(separator: "\n")
        #expect(errorLines.count == 1, "only the dead device failed: \(errors)")
        let failure = try #require(try JSONSerialization.jsonObject(with: Data((errorLines.first ?? "").utf8)) as? [String: Any])
        #expect(failure["handle"] as? String == "dead02020202...02020202")
        #expect(failure["outcome"] as? String == "invalidHandle")
        #expect(failure["pnsStatus"] as? Int == 410 && failure["pnsReason"] as? String == "Unregistered", "\(failure)")
        #expect(failure["platform"] as? String == "apns" && failure["attempts"] as? Int == 1 && failure["time"] != nil, "\(failure)")
        let deadRegistration = try #require(failure["registrationId"] as? String)
        // The hub's feedback: the pruned handle, whole, with why.
        let (feedbackStatus, feedback, _) = try await stack.call("GET", "/\(stack.hub)/feedback?since=2020-01-01T00:00:00Z")
        #expect(feedbackStatus == 200, "\(feedback)")
        let pruned = try #require(
            feedback.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                .first { $0["handle"] as? String == dead }, "\(feedback)")
        #expect(pruned["registrationId"] as? String == deadRegistration && pruned["notificationId"] as? String == id)
        #expect(pruned["pnsStatus"] as? Int == 410 && pruned["pnsReason"] as? String == "Unregistered")
        let (later, laterFeedback, _) = try await stack.call("GET", "/\(stack.hub)/feedback?since=2100-01-01T00:00:00Z")
        #expect(later == 200 && laterFeedback.isEmpty)

        // Twelve matches: ten are sent to, and the answer says twelve matched. The header
        // form of the flag.
        let (manyStatus, manyXML, manyResponse) = try await stack.call(
            "POST", "/\(stack.hub)/messages", alert,
            headers: apple.merging(["ServiceBusNotification-Tags": "many", "ServiceBusNotification-TestSend": "true"]) { $1 })
        #expect(manyStatus == 201, "\(manyXML)")
        #expect(manyResponse?.value(forHTTPHeaderField: "PushHub-Matched") == "12")
        #expect(manyXML.contains("<Success>10</Success><Failure>0</Failure>"), "\(manyXML)")
        #expect(Self.results(manyXML).count == 10)

        // A direct debug send names no registration.
        let (directStatus, directXML, _) = try await stack.call(
            "POST", "/\(stack.hub)/messages?test&direct", alert, headers: apple.merging(["ServiceBusNotification-DeviceHandle": good]) { $1 })
        #expect(directStatus == 201, "\(directXML)")
        #expect(Self.results(directXML).first?["RegistrationId"] == "nil", "\(directXML)")
        #expect(directXML.contains("<Success>1</Success>"), "\(directXML)")

        // A send matching nothing answers at once, with nothing sent.
        let (noneStatus, noneXML, noneResponse) = try await stack.call(
            "POST", "/\(stack.hub)/messages?test", alert, headers: apple.merging(["ServiceBusNotification-Tags": "nobody"]) { $1 })
        #expect(noneStatus == 201)
        #expect(noneResponse?.value(forHTTPHeaderField: "PushHub-Matched") == "0")
        #expect(noneXML.contains("<Success>0</Success><Failure>0</Failure><Results></Results>"), "\(noneXML)")

        // The command line prints the same as a table, and exits 1 as one device failed. The
        // first dead installation was pruned (so two match, not three); another takes its place.
        let deadAgain = "dead" + String(repeating: "03", count: 30)
        #expect(
            try await stack.call("PUT", "/\(stack.hub)/installations/dbg-dead-2", Self.apnsInstallation("dbg-dead-2", handle: deadAgain, tag: "pair"))
                .0 == 200)
        let environment = ["PUSHHUB_URL": stack.url, "PUSHHUB_CONNECTION_STRING": stack.connectionString]
        let (cliStatus, cliOutput) = try await CommandLineMistakesTests.pushhub(
            ["send", "--test", "--hub", stack.hub, "--format", "apns", "--tags", "pair", "--body", alert], environment: environment)
        #expect(cliStatus == 1, "\(cliOutput)")
        #expect(cliOutput.contains("matched 2 registration(s); sent to 2: 1 succeeded, 1 failed"), "\(cliOutput)")
        let lines = cliOutput.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("PLATFORM") && $0.contains("HANDLE") && $0.contains("OUTCOME") }, "\(cliOutput)")
        #expect(lines.contains { $0.hasPrefix("apple") && $0.contains("dead03030303...03030303") && $0.contains("410 Unregistered") }, "\(cliOutput)")
    }
}
