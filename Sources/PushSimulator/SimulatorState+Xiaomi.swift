import Foundation
import NIOCore
import PushModel
import PushProviders

/// The Xiaomi Mi Push simulator, and the Baidu Push simulator with its signature check.
extension SimulatorState {
    func xiaomi(_ request: SimRequest, faults: SimulatorFaults) -> SimAnswer {
        let answer: SimAnswer = {
            let form = Self.form(request.body)
            guard let secret = request.header("authorization").flatMap({ $0.hasPrefix("key=") ? String($0.dropFirst(4)) : nil }),
                let packages = xiaomiApps[secret]
            else { return xiaomiError(401, 21301, "Authentication failed") }
            guard let package = form["restricted_package_name"], packages.contains(package) else {
                return xiaomiError(400, 22022, "Invalid package name")
            }
            guard let regids = form["registration_id"]?.split(separator: ",").map(String.init), !regids.isEmpty, regids.count <= 1000 else {
                return xiaomiError(400, 10016, "registration_id is required")
            }
            let passThrough = form["pass_through"] ?? "0"
            guard passThrough == "0" || passThrough == "1" else { return xiaomiError(400, 10017, "pass_through must be 0 or 1") }
            if passThrough == "1" ? form["payload"] == nil : (form["title"] == nil || form["description"] == nil) {
                return xiaomiError(400, 10016, passThrough == "1" ? "payload is required" : "title and description are required")
            }
            guard (form["payload"]?.utf8.count ?? 0) <= 4096 else { return xiaomiError(400, 65009, "message content too long") }
            if let injected = injected(
                faults, throttle: { Self.withRetryAfter(self.xiaomiError(200, 10027, "api calls too frequent"), faults.retryAfterSeconds) },
                error: { self.xiaomiError(200, 10002, "system is busy") })
            {
                return injected
            }
            let dead = regids.filter(faults.isDead)
            // Mi Push lists bad regids only among good ones; one bad regid alone is an error.
            if dead.count == regids.count { return xiaomiError(200, 20301, "No valid targets!") }
            // The fields as JSON, made only for a regid whose deliveries are kept.
            for regid in regids where !dead.contains(regid) && keeps(regid) {
                let fields = form.filter { $0.key != "registration_id" }
                let payload = String(decoding: try! JSONSerialization.data(withJSONObject: fields, options: .sortedKeys), as: UTF8.self)
                record(.xiaomi, handle: regid, payload: payload, header: request.header, names: [])
            }
            let bad = dead.isEmpty ? "" : #","bad_regids":"# + String(decoding: JSONText.quoted(dead.joined(separator: ",")), as: UTF8.self)
            let id = uniqueID()
            return Self.json(
                200,
                #"{"code":0,"data":{"id":"slm\#(id)"\#(bad)},"description":"ok","info":"Received push messages for \#(regids.count) REGID","result":"ok","trace_id":"\#(id)"}"#
            )
        }()
        return count(.xiaomi, answer)
    }

    func xiaomiError(_ status: Int, _ code: Int, _ reason: String) -> SimAnswer {
        // `reason` is always the simulator's own text, never a client's.
        Self.json(status, #"{"code":\#(code),"description":"\#(reason)","reason":"\#(reason)","result":"error","trace_id":"\#(uniqueID())"}"#)
    }

    func baidu(_ request: SimRequest, path: String, faults: SimulatorFaults) -> SimAnswer {
        let answer: SimAnswer = {
            guard request.header("user-agent")?.hasPrefix("BCCS_SDK/3.0") == true else { return baiduError(401, 30603, "Authentication Failed") }
            let form = Self.form(request.body)
            guard let apiKey = form["apikey"], let secret = baiduApps[apiKey], let origin = request.origin,
                form["sign"] == BaiduService.signature(method: "POST", url: origin + path, fields: form, secretKey: secret)
            else { return baiduError(401, 30603, "Authentication Failed") }
            guard let timestamp = form["timestamp"].flatMap(Int.init), (0..<Int(Int32.max) * 4).contains(timestamp),
                abs(timestamp - Int(Date().timeIntervalSince1970)) <= 600
            else {
                return baiduError(400, 30606, "Request Time Expires Timeout")
            }
            guard let channel = form["channel_id"], !channel.isEmpty, let msg = form["msg"], JSONLimits.dictionary(Data(msg.utf8)) != nil,
                ["0", "1"].contains(form["msg_type"] ?? "0")
            else { return baiduError(400, 30602, "Request Params Not Valid") }
            guard msg.utf8.count <= 4096 else { return baiduError(400, 30602, "Request Params Not Valid, msg too long") }
            if faults.isDead(channel) { return baiduError(404, 30608, "Bind Relation Not Found") }
            if let injected = injected(
                faults,
                throttle: {
                    Self.withRetryAfter(self.baiduError(503, 30699, "Requests Are Too Frequent To Be Temporarily Denied"), faults.retryAfterSeconds)
                },
                error: { self.baiduError(500, 30600, "Internal Server Error") })
            {
                return injected
            }
            record(.baidu, handle: channel, payload: msg, header: { ["msg_type": form["msg_type"] ?? "0"][$0] }, names: ["msg_type"])
            return Self.json(
                200,
                #"{"request_id":\#(Int.random(in: 1...Int(Int32.max))),"response_params":{"msg_id":"\#(uniqueID())","send_time":\#(Int(Date().timeIntervalSince1970))}}"#
            )
        }()
        return count(.baidu, answer)
    }

    func baiduError(_ status: Int, _ code: Int, _ message: String) -> SimAnswer {
        // `message` is always the simulator's own text.
        Self.json(status, #"{"error_code":\#(code),"error_msg":"\#(message)","request_id":\#(Int.random(in: 1...Int(Int32.max)))}"#)
    }
}
