import Foundation
import HTTPTypes
import Hummingbird
import Mustache
import PushConfiguration
import PushDispatcher
import PushModel
import PushProviders
import PushStore

/// The web console at `/console`: server-rendered pages over the same stores and checks as
/// the hub API, with the rights of the key (or account) the person signed in with. Listen
/// sees neither devices nor sends; Send sees sends and makes test sends; Manage sees all.
struct ConsoleController: Sendable {
    /// A request's signed-in session and what it may do now.
    struct Signed: Sendable {
        var session: ConsoleSession
        var hub: HubsConfiguration.Hub
        var rights: Set<AccessRight>
        var csrf: String
        /// Sees the figures of the whole process (every hub's deliveries, latency, consumer
        /// lag): Manage, and every hub of this ingress (an account without a hubs list, or a
        /// key of the only hub). A tenant's key sees nothing of the others.
        var seesProcess = false

        func may(_ right: AccessRight) -> Bool { rights.contains(right) || rights.contains(.manage) }
    }

    let hubs: HubsConfiguration
    let sessions: ConsoleSessions
    let pages: MustacheLibrary
    let registrations: any RegistrationStore
    let store: (any ConsoleStore)?
    let outcomes: (any OutcomeStore)?
    let debug: DebugSend?
    let metrics: ConsoleMetrics
    /// Console accounts' passwords, with the app-backend API's limits on guessing.
    let accounts: UserAuthenticator
    let now: @Sendable () -> Date

    /// Rows a device search reads at most, and shows at most.
    static let searchReadLimit = 5_000
    static let searchShowLimit = 100
    static let pageSize = 50

    init(
        hubs: HubsConfiguration, stores: IngressStores, debug: DebugSend?, logins: LoginLimits, now: @escaping @Sendable () -> Date
    ) throws {
        let configuration = hubs.console ?? ConsoleConfiguration()
        self.hubs = hubs
        sessions = ConsoleSessions(
            secret: configuration.sessionSecret, lifetime: configuration.sessionLifetime,
            secure: hubs.publicBaseURL?.lowercased().hasPrefix("https:") == true)
        var library = MustacheLibrary()
        for (name, text) in ConsoleTemplates.all { try library.register(text, named: name) }
        pages = library
        registrations = stores.registrations
        store = stores.console
        outcomes = stores.outcomes
        self.debug = debug
        metrics = ConsoleMetrics(endpoints: configuration.metrics ?? [])
        accounts = UserAuthenticator(users: ConsoleAccounts(accounts: configuration.accounts ?? []), jwt: nil, limits: logins, now: now)
        self.now = now
    }

    func addRoutes(to router: Router<IngressContext>) {
        let console = router.group("console")
        console.get("", use: home)
        console.get("static/console.css") { _, _ in Self.asset(ConsoleTemplates.css, type: "text/css; charset=utf-8") }
        console.get("static/console.js") { _, _ in Self.asset(ConsoleTemplates.js, type: "text/javascript; charset=utf-8") }
        console.get("signin", use: signinPage)
        console.post("signin", use: signin)
        console.post("signout", use: signout)
        console.get("overview", use: overview)
        console.get("notifications", use: notificationList)
        console.get("notifications/{id}", use: notificationPage)
        console.get("devices", use: deviceSearch)
        console.get("devices/{id}", use: devicePage)
        console.post("devices/{id}/delete", use: deleteDevice)
        console.get("send", use: sendPage)
        console.post("send", use: send)
        console.post("send/check", use: checkSend)
        console.get("live", use: livePage)
        console.get("live/charts", use: liveCharts)
    }

    // MARK: Sessions

    @Sendable func home(_ request: Request, context: IngressContext) async throws -> Response {
        Self.redirect(signed(request) == nil ? "/console/signin" : "/console/overview")
    }

    @Sendable func signinPage(_ request: Request, context: IngressContext) async throws -> Response {
        render("signin", title: "Sign in", nil, [:])
    }

    @Sendable func signin(_ request: Request, context: IngressContext) async throws -> Response {
        // A sign-in posted from another site is refused (login CSRF); browsers say where a
        // request came from in Sec-Fetch-Site, or else in Origin.
        let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!]
        let origin = request.headers[HTTPField.Name("Origin")!]
        let ownOrigin = origin.flatMap { URLComponents(string: $0) }.map { origin in
            let authority = origin.port.map { "\(origin.host ?? ""):\($0)" } ?? (origin.host ?? "")
            return authority.lowercased() == (request.head.authority ?? "").lowercased()
        }
        if let site, !["same-origin", "none"].contains(site) {
            return render("signin", title: "Sign in", nil, ["error": "Sign in from the console's own page."], status: .forbidden)
        }
        if site == nil, let ownOrigin, !ownOrigin {
            return render("signin", title: "Sign in", nil, ["error": "Sign in from the console's own page."], status: .forbidden)
        }
        let form: ConsoleForm
        do { form = try await Self.form(request) } catch {
            return render("signin", title: "Sign in", nil, ["error": error.message], status: .badRequest)
        }
        let hubName = form["hub"] ?? ""
        func refuse(_ message: String, status: HTTPResponse.Status = .unauthorized) -> Response {
            render("signin", title: "Sign in", nil, ["error": message, "hub": hubName], status: status)
        }
        // An unknown hub is refused as a wrong key is, so hub names cannot be probed.
        let wrong = "The hub, or the key or password, is not right."
        switch form["method"] {
        case "key":
            guard let text = form["connectionString"], text.utf8.count <= 1_024, let connection = ConnectionString(text) else {
                return refuse("connectionString: Endpoint=sb://…;SharedAccessKeyName=…;SharedAccessKey=…", status: .badRequest)
            }
            guard let hub = hubs.hub(named: hubName), let rule = hub.sasRules.first(where: { $0.name == connection.keyName }),
                ConsoleSessions.equal(sessions.fingerprint(of: connection.key), sessions.fingerprint(of: rule.key))
            else { return refuse(wrong) }
            let session = sessions.begin(hub: hub.name, kind: .key, name: rule.name, fingerprint: sessions.fingerprint(of: rule.key), now: now())
            return Self.redirect("/console/overview", cookie: sessions.setCookie(session))
        case "account":
            guard let name = form["account"], let password = form.raw("password"), !password.isEmpty else {
                return refuse("account and password: both are needed", status: .badRequest)
            }
            let basic = Data("\(name):\(password)".utf8).base64EncodedString()
            do {
                _ = try await accounts.user(authorization: "Basic \(basic)", client: context.client)
            } catch .throttled(let seconds, let message) {
                var response = refuse(message, status: .tooManyRequests)
                response.headers[.retryAfter] = "\(seconds)"
                return response
            } catch {
                return refuse(wrong)
            }
            guard let hub = hubs.hub(named: hubName), let account = hubs.console?.accounts?.first(where: { $0.name == name }),
                account.allows(hub: hub.name)
            else { return refuse(wrong) }
            return Self.redirect(
                "/console/overview",
                cookie: sessions.setCookie(
                    sessions.begin(hub: hub.name, kind: .account, name: name, fingerprint: sessions.fingerprint(of: account.passwordHash), now: now())
                ))
        default:
            return refuse("method: key or account", status: .badRequest)
        }
    }

    @Sendable func signout(_ request: Request, context: IngressContext) async throws -> Response {
        guard let signed = signed(request) else { return Self.redirect("/console/signin", cookie: sessions.clearCookie) }
        if let refusal = try await checkedForm(request, signed).refusal { return refusal }
        sessions.revoked.revoke(signed.session, now: now())
        return Self.redirect("/console/signin", cookie: sessions.clearCookie)
    }

    /// The signed-in session of a request, with its rights as configured now.
    func signed(_ request: Request) -> Signed? {
        guard let session = sessions.session(cookieHeader: request.headers[.cookie], now: now()),
            let (hub, rights) = sessions.rights(of: session, hubs: hubs)
        else { return nil }
        var signed = Signed(session: session, hub: hub, rights: rights, csrf: sessions.csrfToken(session))
        let everyHub =
            switch session.kind {
            case .key: hubs.hubs.count == 1
            case .account: hubs.console?.accounts?.first { $0.name == session.name }?.hubs == nil
            }
        signed.seesProcess = signed.may(.manage) && everyHub
        return signed
    }

    /// The session and the right a page needs: nil and the page to answer when either lacks.
    func require(_ request: Request, _ right: AccessRight) -> (Signed?, Response?) {
        guard let signed = signed(request) else { return (nil, Self.redirect("/console/signin")) }
        guard signed.may(right) else {
            return (
                nil,
                render(
                    "problem", title: "Not allowed", signed,
                    ["message": "This page needs the \(right.rawValue) right, which \(Self.who(signed)) lacks."], status: .forbidden)
            )
        }
        return (signed, nil)
    }

    /// A posted form, refused (403) without the session's CSRF token.
    func checkedForm(_ request: Request, _ signed: Signed) async throws -> (form: ConsoleForm, refusal: Response?) {
        let form: ConsoleForm
        do { form = try await Self.form(request) } catch {
            return (try ConsoleForm(query: nil), render("problem", title: "Bad request", signed, ["message": error.message], status: .badRequest))
        }
        guard sessions.checkCSRF(form.raw("csrf"), signed.session) else {
            return (
                form,
                render(
                    "problem", title: "Not allowed", signed, ["message": "The form's CSRF token is missing or wrong: reload the page and try again."],
                    status: .forbidden)
            )
        }
        return (form, nil)
    }

    static func form(_ request: Request) async throws(ConsoleFormError) -> ConsoleForm {
        guard MediaType.matches(request.headers[.contentType], "application/x-www-form-urlencoded") else {
            throw ConsoleFormError(message: "Content-Type must be application/x-www-form-urlencoded")
        }
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: ConsoleForm.bodyLimit) } catch {
            throw ConsoleFormError(message: "a form is at most \(ConsoleForm.bodyLimit) bytes")
        }
        return try ConsoleForm(Substring(String(buffer: body)))
    }

    // MARK: Overview

    @Sendable func overview(_ request: Request, context: IngressContext) async throws -> Response {
        // Any session sees the overview; each of its parts needs its right.
        guard let signed = signed(request) else { return Self.redirect("/console/signin") }
        var values: [String: Any] = ["canRead": signed.may(.send) || signed.may(.manage)]
        if signed.may(.manage), let store {
            let counts = try await store.deviceCounts(hub: signed.hub.name)
            var rows: [[String: Any]] = []
            for platform in Platform.allCases {
                let installations = Installation.InstallationPlatform.allCases.filter { $0.format.platform == platform }
                    .reduce(0) { $0 + (counts.installations[$1.rawValue] ?? 0) }
                rows.append(["platform": platform.rawValue, "registrations": counts.registrations[platform] ?? 0, "installations": installations])
            }
            values["devices"] =
                [
                    "rows": rows, "registrations": counts.registrations.values.reduce(0, +),
                    "installations": counts.installations.values.reduce(0, +),
                ] as [String: Any]
        }
        if signed.may(.send), let store {
            let time = now()
            let hour = try await store.activity(hub: signed.hub.name, since: time.addingTimeInterval(-3_600))
            let day = try await store.activity(hub: signed.hub.name, since: time.addingTimeInterval(-86_400))
            let periods: [[String: Any]] = [("Last hour", hour), ("Last day", day)].map { name, activity in
                [
                    "period": name, "sends": activity.sends, "targets": activity.targets, "delivered": activity.outcomes[.delivered] ?? 0,
                    "pruned": activity.pruned,
                ]
            }
            let outcomes: [[String: Any]] = day.outcomes.sorted { $0.value > $1.value }.map { outcome, count in
                [
                    "outcome": outcome.rawValue, "count": count,
                    "share": day.targets > 0 ? Int((Double(count) * 100 / Double(day.targets)).rounded()) : 0,
                ]
            }
            values["activity"] = ["periods": periods, "outcomes": outcomes, "hasOutcomes": !outcomes.isEmpty] as [String: Any]
        }
        if signed.seesProcess {
            let sample = await metrics.current(now: now()).last
            var lag: [String: Any] = [
                "topics": (sample?.lag ?? [:]).sorted { $0.key < $1.key }.map {
                    ["topic": $0.key, "lag": Int(exactly: $0.value.rounded()) ?? 0] as [String: Any]
                }
            ]
            if let unreachable = sample?.unreachable, !unreachable.isEmpty { lag["unreachable"] = unreachable.joined(separator: ", ") }
            values["lag"] = lag
        }
        return render("overview", title: "Overview of \(signed.hub.name)", signed, values, current: "overview")
    }

    // MARK: Notifications

    @Sendable func notificationList(_ request: Request, context: IngressContext) async throws -> Response {
        let (signed, refusal) = require(request, .send)
        guard let signed else { return refusal! }
        guard let store else { return unavailable(signed, "the store keeps no sends") }
        var before: (at: Date, id: String)?
        if let text = (try? ConsoleForm(query: request.uri.query))?["before"] {
            // `{milliseconds}.{id}`, as the previous page wrote it.
            let parts = text.split(separator: ".", maxSplits: 1)
            guard parts.count == 2, let milliseconds = Int64(parts[0]), milliseconds >= 0,
                milliseconds <= Int64((now().timeIntervalSince1970 + 86_400) * 1_000), parts[1].utf8.count <= 128
            else {
                return render(
                    "problem", title: "Bad request", signed, ["message": "before: the position of an older page, as its link gives it"],
                    status: .badRequest)
            }
            before = (Date(timeIntervalSince1970: Double(milliseconds) / 1_000), String(parts[1]))
        }
        let notifications = try await store.recentNotifications(hub: signed.hub.name, before: before, limit: Self.pageSize)
        let rows = notifications.map { notification -> [String: Any] in
            var row = Self.summary(notification)
            row["counts"] = Platform.allCases.compactMap { platform -> String? in
                guard let counts = notification.counts[platform], !counts.isEmpty else { return nil }
                return "\(platform.rawValue): "
                    + counts.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.value) \($0.key.rawValue)" }.joined(separator: ", ")
            }.joined(separator: "; ")
            return row
        }
        var values: [String: Any] = ["rows": rows]
        if notifications.count == Self.pageSize, let last = notifications.last {
            values["older"] = "\(Int64((last.enqueuedAt.timeIntervalSince1970 * 1_000).rounded())).\(last.notificationId)"
        }
        return render("notifications", title: "Notifications", signed, values, current: "notifications")
    }

    @Sendable func notificationPage(_ request: Request, context: IngressContext) async throws -> Response {
        let (signed, refusal) = require(request, .send)
        guard let signed else { return refusal! }
        guard let outcomes else { return unavailable(signed, "the store keeps no sends") }
        let id = try context.parameters.require("id")
        guard id.utf8.count <= 128, let notification = try await outcomes.notification(hub: signed.hub.name, id: id) else {
            return render(
                "problem", title: "Not found", signed, ["message": "No notification \(id.prefix(128)) in hub \(signed.hub.name)."], status: .notFound)
        }
        let failed = try await outcomes.failedTargets(hub: signed.hub.name, notificationId: id, after: nil, limit: 100)
        var values = Self.summary(notification)
        var timeline: [[String: Any]] = [
            ["at": Self.iso(notification.enqueuedAt), "atShown": Self.shown(notification.enqueuedAt), "what": "accepted and enqueued"]
        ]
        if let started = notification.startedAt {
            let platforms = notification.dispatched.map { " to \($0.map(\.rawValue).joined(separator: ", "))" } ?? ""
            timeline.append([
                "at": Self.iso(started), "atShown": Self.shown(started),
                "what": "dispatched: \(notification.expectedTargets ?? 0) targets\(platforms)",
            ])
        }
        let results = notification.counts.values.flatMap(\.values).reduce(0, +)
        if results > 0 { timeline.append(["what": "\(results) of \(notification.expectedTargets.map(String.init) ?? "?") targets have a result"]) }
        if let ended = notification.endedAt {
            timeline.append(["at": Self.iso(ended), "atShown": Self.shown(ended), "what": "ended \(notification.state.rawValue)"])
        }
        values["timeline"] = timeline
        values["counts"] = notification.counts.sorted { $0.key.rawValue < $1.key.rawValue }.flatMap { platform, counts in
            counts.sorted { $0.key.rawValue < $1.key.rawValue }.map {
                ["platform": platform.rawValue, "outcome": $0.key.rawValue, "count": $0.value] as [String: Any]
            }
        }
        values["failed"] = failed.map { target -> [String: Any] in
            [
                "target": HandleDisplay.shortened(target.target), "platform": target.platform?.rawValue ?? "",
                "outcome": target.result.outcome.rawValue,
                "pns": [target.result.pnsStatus.map(String.init), target.result.pnsReason].compactMap { $0 }.joined(separator: " "),
                "attempts": target.result.attempts,
            ]
        }
        if let reason = notification.reason { values["reason"] = reason }
        if let body = notification.body, !body.isEmpty { values["body"] = String(body.prefix(8_192)) }
        let refresh = notification.state.hasEnded ? nil : 2
        return render("notification", title: "Notification \(id)", signed, values, current: "notifications", refresh: refresh)
    }

    /// What the list and a send's page show of a notification.
    static func summary(_ notification: NotificationOutcome) -> [String: Any] {
        let state = notification.state
        return [
            "id": notification.notificationId, "enqueued": iso(notification.enqueuedAt), "enqueuedShown": shown(notification.enqueuedAt),
            "state": state.rawValue,
            "stateClass": state == .completed ? "ended" : [.abandoned, .cancelled, .noTargetFound].contains(state) ? "failed" : "open",
            "format": notification.format?.rawValue ?? "(produced into Kafka)",
            "audience": audience(notification),
            "targets": notification.expectedTargets.map(String.init) ?? "not dispatched yet",
        ]
    }

    static func audience(_ notification: NotificationOutcome) -> String {
        switch notification.audience {
        case .tags: "tags: \(notification.tags ?? "")"
        case .broadcast: "every device"
        case .installations: "installations named in the send"
        case .handles: "device handles named in the send (direct)"
        case nil: notification.tags.map { "tags: \($0)" } ?? "every device, or handles named in the send"
        }
    }

    // MARK: Devices

    @Sendable func deviceSearch(_ request: Request, context: IngressContext) async throws -> Response {
        let (signed, refusal) = require(request, .manage)
        guard let signed else { return refusal! }
        var values: [String: Any] = [:]
        func page(_ status: HTTPResponse.Status = .ok) -> Response {
            render("devices", title: "Devices", signed, values, current: "devices", status: status)
        }
        let query: ConsoleForm
        do { query = try ConsoleForm(query: request.uri.query) } catch {
            values["error"] = error.message
            return page(.badRequest)
        }
        let platform = query["platform"]
        values["query"] = ["tags": query["tags"] ?? "", "user": query["user"] ?? "", "handle": query["handle"] ?? ""]
        if query["deleted"] != nil { values["deleted"] = "The device was deleted." }
        values["platforms"] = Platform.allCases.map { ["value": $0.rawValue, "selected": $0.rawValue == platform] as [String: Any] }
        guard query["tags"] != nil || query["platform"] != nil || query["user"] != nil || query["handle"] != nil else { return page() }
        let wantedPlatform: Platform?
        if let platform {
            guard let known = Platform(rawValue: platform) else {
                values["error"] = "platform: one of \(Platform.allCases.map(\.rawValue).joined(separator: ", ")), not \(platform.prefix(32))"
                return page(.badRequest)
            }
            wantedPlatform = known
        } else {
            wantedPlatform = nil
        }
        var expression: TagExpression?
        if let tags = query["tags"] {
            do { expression = try TagExpression.parse(tags) } catch {
                values["error"] = "tags: \"\(tags.prefix(64))\" \(error)"
                return page(.badRequest)
            }
        }
        for (field, limit) in [("user", 256), ("handle", 4_096)] where (query[field]?.utf8.count ?? 0) > limit {
            values["error"] = "\(field): at most \(limit) bytes"
            return page(.badRequest)
        }
        // The most selective condition the store can use goes to the store; the others are
        // applied here, over a bounded number of rows.
        // A user's devices are few: that index first, then the handle's, then the tags'.
        let storeQuery: RegistrationQuery =
            if let user = query["user"] { .user(user) } else if let prefix = query["handle"] { .handlePrefix(prefix) } else if let expression {
                .tagExpression(expression)
            } else { .all }
        var found: [Registration] = []
        var read = 0
        var cursor: RegistrationCursor?
        repeat {
            let page = try await registrations.registrations(hub: signed.hub.name, matching: storeQuery, after: cursor, limit: 500)
            read += page.registrations.count
            for registration in page.registrations
            where (wantedPlatform.map { registration.platform == $0 } ?? true)
                && (query["user"].map { registration.userId == $0 } ?? true)
                && (query["handle"].map { registration.handle.hasPrefix($0) } ?? true)
                && (expression?.matches(Set(registration.tags)) ?? true)
            {
                found.append(registration)
                if found.count >= Self.searchShowLimit { break }
            }
            cursor = page.next
        } while cursor != nil && found.count < Self.searchShowLimit && read < Self.searchReadLimit
        values["searched"] = true
        let more = found.count >= Self.searchShowLimit || cursor != nil
        values["summary"] =
            switch (found.isEmpty, more) {
            case (true, false): "No device matches."
            case (true, true): "No match among the first \(read) devices read; narrow the search with a user, a handle prefix or tags."
            case (false, true): "The first \(found.count) matching devices (\(read) read)."
            case (false, false): "\(found.count) matching device\(found.count == 1 ? "" : "s")."
            }
        values["rows"] = found.map { registration -> [String: Any] in
            [
                "id": registration.registrationId, "idPath": FormEncoding.escape(registration.registrationId),
                "platform": registration.platform.rawValue,
                "handle": HandleDisplay.shortened(registration.handle), "tags": registration.tags.joined(separator: ", "),
                "installation": registration.installationId ?? "", "user": registration.userId ?? "",
            ]
        }
        return page()
    }

    @Sendable func devicePage(_ request: Request, context: IngressContext) async throws -> Response {
        let (signed, refusal) = require(request, .manage)
        guard let signed else { return refusal! }
        let id = try context.parameters.require("id")
        guard id.utf8.count <= 256, let registration = try await registrations.registration(hub: signed.hub.name, id: id) else {
            return render("device", title: "Device not found", signed, [:], current: "devices", status: .notFound)
        }
        let installation =
            try await registration.installationId.asyncMap { try await registrations.installation(hub: signed.hub.name, id: $0) } ?? nil
        var values: [String: Any] = [
            "id": registration.registrationId, "idPath": FormEncoding.escape(registration.registrationId), "platform": registration.platform.rawValue,
            "format": registration.format.rawValue, "handle": HandleDisplay.shortened(registration.handle),
            "tags": registration.tags.joined(separator: ", "), "updated": Self.shown(registration.updatedAt), "csrf": signed.csrf,
            "deleteWhat": installation != nil
                ? "Deleting removes installation \(registration.installationId ?? "") and all its registrations."
                : "Deleting removes this registration.",
        ]
        if let installationId = registration.installationId { values["installation"] = installationId }
        if let user = registration.userId { values["user"] = user }
        if installation?.pushChannelExpired == true { values["expired"] = true }
        var templates: [[String: Any]] = []
        if let installation {
            for (name, template) in installation.templates.sorted(by: { $0.key < $1.key }) {
                templates.append(Self.templateRow(name, template))
            }
        } else if let template = registration.template {
            templates.append(Self.templateRow(template.name ?? "(the registration's)", template))
        }
        values["templates"] = templates
        values["hasTemplates"] = !templates.isEmpty
        // The recent sends whose audience takes this device: its format and its tags, with the
        // ones an installation adds.
        var sends: [[String: Any]] = []
        if signed.may(.send), let store {
            let recent = try await store.recentNotifications(hub: signed.hub.name, before: nil, limit: Self.pageSize)
            var tags = Set(registration.tags)
            if let installationId = registration.installationId { tags.insert("$InstallationId:{\(installationId)}") }
            if let user = registration.userId { tags.insert("$UserId:{\(user)}") }
            let addressed = recent.filter { notification in
                // A direct send, or one to named installations, is not known to have been for it.
                guard let format = notification.format, notification.audience == .tags || notification.audience == .broadcast else { return false }
                let formatTakes =
                    format == .template ? registration.template != nil : registration.template == nil && format.platform == registration.platform
                guard formatTakes else { return false }
                guard let text = notification.tags else { return true }
                return (try? TagExpression.parse(text))?.matches(tags) ?? false
            }
            let failures = try await store.failures(
                hub: signed.hub.name, of: registration, notificationIds: addressed.map(\.notificationId))
            sends = addressed.map { notification in
                var row = Self.summary(notification)
                if let failure = failures[notification.notificationId] {
                    row["result"] = DebugSend.words(failure, timeout: .zero)
                } else {
                    row["result"] =
                        switch notification.state {
                        case .completed: "no failure recorded: delivered"
                        case .enqueued, .processing: "on its way"
                        default: "no failure recorded; the send ended \(notification.state.rawValue)"
                        }
                }
                return row
            }
            values["examined"] = recent.count
        }
        values["sends"] = sends
        return render("device", title: "Device \(registration.registrationId)", signed, ["registration": values], current: "devices")
    }

    @Sendable func deleteDevice(_ request: Request, context: IngressContext) async throws -> Response {
        let (signed, refusal) = require(request, .manage)
        guard let signed else { return refusal! }
        if let refusal = try await checkedForm(request, signed).refusal { return refusal }
        let id = try context.parameters.require("id")
        var deleted = false
        if id.utf8.count <= 256, let registration = try await registrations.registration(hub: signed.hub.name, id: id) {
            if let installationId = registration.installationId {
                deleted = try await registrations.deleteInstallation(hub: signed.hub.name, id: installationId)
            } else {
                deleted = try await registrations.deleteRegistration(hub: signed.hub.name, id: id, ifMatch: nil)
            }
        }
        guard deleted else { return render("device", title: "Device not found", signed, [:], current: "devices", status: .notFound) }
        return Self.redirect("/console/devices?deleted=1")
    }

    static func templateRow(_ name: String, _ template: Template) -> [String: Any] {
        [
            "name": name, "body": template.body,
            "headers": (template.headers ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "; "),
        ]
    }

    // MARK: Test send

    static let formats: [(NotificationFormat, String)] = [
        (.apple, "apple (APNs)"), (.fcmv1, "fcmv1 (FCM v1)"), (.gcm, "gcm (FCM legacy)"), (.windows, "windows (WNS)"),
        (.browser, "browser (Web Push)"),
        (.hms, "hms (Huawei)"), (.adm, "adm (Amazon)"), (.xiaomi, "xiaomi"), (.baidu, "baidu"), (.template, "template"),
    ]

    @Sendable func sendPage(_ request: Request, context: IngressContext) async throws -> Response {
        let (signed, refusal) = require(request, .send)
        guard let signed else { return refusal! }
        return sendForm(signed, ConsoleForm.empty, error: nil)
    }

    func sendForm(_ signed: Signed, _ form: ConsoleForm, error: String?, status: HTTPResponse.Status = .ok) -> Response {
        let chosen = form["format"] ?? NotificationFormat.apple.rawValue
        var values: [String: Any] = [
            "csrf": signed.csrf,
            "formats": Self.formats.map { ["value": $0.0.rawValue, "label": $0.1, "selected": $0.0.rawValue == chosen] as [String: Any] },
            "form": [
                "headers": form.raw("headers") ?? "", "payload": form.raw("payload") ?? #"{"aps":{"alert":"Hello from the PushHub console"}}"#,
                "tags": form.raw("tags") ?? "", "devices": form.raw("devices") ?? "",
            ],
        ]
        if let error { values["error"] = error }
        return render("send", title: "Test send", signed, values, current: "send", status: status)
    }

    /// The send a test-send form describes, with the API's own checks.
    func build(_ form: ConsoleForm, hub: HubsConfiguration.Hub) throws(WireError) -> (request: SendRequest, expression: TagExpression?) {
        var headers: [String: String] = [:]
        for line in (form.raw("headers") ?? "").split(whereSeparator: \.isNewline).prefix(32) where !line.trimmingSpaces.isEmpty {
            guard let colon = line.firstIndex(of: ":") else {
                throw .invalidField(field: "headers", reason: "each line is Name: value, not \(line.prefix(64))")
            }
            headers[String(line[..<colon].trimmingSpaces)] = String(line[line.index(after: colon)...].trimmingSpaces)
        }
        let format = form["format"]
        var contentType: String?
        if let known = NotificationFormat(rawValue: format ?? "") {
            contentType = try SendRequestBuilder.acceptedContentTypes(for: known, headers: headers)[0]
        }
        let devices = (form.raw("devices") ?? "").split(whereSeparator: \.isNewline).map { String($0.trimmingSpaces) }.filter { !$0.isEmpty }
        guard devices.count <= DebugSend.sampleSize else {
            throw .invalidField(field: "devices", reason: "at most \(DebugSend.sampleSize) installation ids, not \(devices.count)")
        }
        var tags = form["tags"]
        if !devices.isEmpty {
            guard tags == nil else { throw .invalidField(field: "devices", reason: "give a tag expression or devices, not both") }
            for device in devices where device.utf8.count > 256 || device.contains("}") {
                throw .invalidField(field: "devices", reason: "\(device.prefix(64)) is not an installation id")
            }
            tags = devices.map { "$InstallationId:{\($0)}" }.joined(separator: " || ")
        }
        return try SendRequestBuilder().buildChecked(
            hub: hub.name, format: format, tags: tags, headers: headers, body: Data((form.raw("payload") ?? "").utf8), contentType: contentType,
            now: now())
    }

    /// `POST /console/send/check`: `{"ok":…,"message":…}` for the form as typed.
    @Sendable func checkSend(_ request: Request, context: IngressContext) async throws -> Response {
        let (signed, refusal) = require(request, .send)
        guard let signed else { return refusal! }
        let (form, refused) = try await checkedForm(request, signed)
        if let refused { return refused }
        let answer: (Bool, String)
        do {
            let built = try build(form, hub: signed.hub)
            answer = (true, "Looks right: a \(built.request.format.rawValue) notification of \(built.request.body.utf8.count) bytes.")
        } catch {
            answer = (false, error.description)
        }
        let json = try JSONSerialization.data(withJSONObject: ["ok": answer.0, "message": answer.1])
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: json)))
    }

    @Sendable func send(_ request: Request, context: IngressContext) async throws -> Response {
        let (signed, refusal) = require(request, .send)
        guard let signed else { return refusal! }
        let (form, refused) = try await checkedForm(request, signed)
        if let refused { return refused }
        guard let debug else { return unavailable(signed, "test sends need Kafka, which this ingress does not use") }
        let built: (request: SendRequest, expression: TagExpression?)
        do { built = try build(form, hub: signed.hub) } catch { return sendForm(signed, form, error: error.description, status: .badRequest) }
        let sent: DebugSend.Sent
        do {
            sent = try await debug.send(built.request, expression: built.expression)
        } catch is DebugSend.Busy {
            return sendForm(signed, form, error: "Too many test sends are waiting for results; try again in a moment.", status: .serviceUnavailable)
        } catch is NotificationQueue.NotQueued {
            return sendForm(signed, form, error: "The notification could not be queued; try again.", status: .serviceUnavailable)
        }
        var rows: [[String: Any]] = []
        var delivered = 0
        for platform in Platform.allCases {
            for target in sent.sample.targets[platform] ?? [] {
                let answer = sent.answers.results[target.registrationId ?? target.handle]?.result
                if answer?.outcome == .delivered { delivered += 1 }
                rows.append([
                    "platform": platform.rawValue, "handle": HandleDisplay.shortened(target.handle), "registration": target.registrationId ?? "",
                    "result": DebugSend.words(answer, timeout: debug.timeout),
                    "resultClass": answer?.outcome == .delivered ? "good" : answer == nil ? "" : "bad",
                ])
            }
        }
        let matched = "\(sent.sample.matched)\(sent.sample.capped ? " or more" : "")"
        let values: [String: Any] = [
            "id": sent.request.notificationId, "rows": rows,
            "summary": rows.isEmpty
                ? "No device matched, so nothing was sent."
                : "\(matched) device\(sent.sample.matched == 1 ? "" : "s") matched; sent to \(rows.count): \(delivered) delivered.",
        ]
        return render("sent", title: "Test send \(sent.request.notificationId)", signed, values, current: "send", status: .created)
    }

    // MARK: Live

    @Sendable func livePage(_ request: Request, context: IngressContext) async throws -> Response {
        let (signed, refusal) = require(request, .manage)
        guard let signed else { return refusal! }
        guard signed.seesProcess else {
            return render(
                "problem", title: "Not allowed", signed,
                ["message": "The live figures are every hub's: they need an account for every hub, or a Manage key of the only hub."],
                status: .forbidden)
        }
        let charts = ConsoleMetrics.charts(await metrics.current(now: now())).joined(separator: "\n")
        return render("live", title: "Live", signed, ["charts": charts], current: "live")
    }

    @Sendable func liveCharts(_ request: Request, context: IngressContext) async throws -> Response {
        // Fetched by the page's script: refused plainly (401, 403), never redirected to sign-in.
        guard let signed = signed(request) else { return Response(status: .unauthorized, headers: Self.pageHeaders) }
        guard signed.seesProcess else { return Response(status: .forbidden, headers: Self.pageHeaders) }
        let charts = ConsoleMetrics.charts(await metrics.current(now: now())).joined(separator: "\n")
        return Response(status: .ok, headers: Self.pageHeaders, body: .init(byteBuffer: ByteBuffer(string: charts)))
    }

    // MARK: Rendering

    /// The pages' links, those the session's rights allow.
    static func nav(_ signed: Signed, current: String?) -> [[String: Any]] {
        let links: [(String, String, Bool)] = [
            ("overview", "Overview", true), ("notifications", "Notifications", signed.may(.send)), ("devices", "Devices", signed.may(.manage)),
            ("send", "Test send", signed.may(.send)), ("live", "Live", signed.seesProcess),
        ]
        return links.filter(\.2).map { ["href": "/console/\($0.0)", "label": $0.1, "current": $0.0 == current] }
    }

    static func who(_ signed: Signed) -> String {
        signed.session.kind == .key ? "key \(signed.session.name)" : "account \(signed.session.name)"
    }

    func render(
        _ template: String, title: String, _ signed: Signed?, _ values: [String: Any], current: String? = nil, refresh: Int? = nil,
        status: HTTPResponse.Status = .ok
    ) -> Response {
        var object = values
        object["title"] = title
        if let refresh { object["refresh"] = String(refresh) }
        if let signed {
            object["session"] =
                ["nav": Self.nav(signed, current: current), "csrf": signed.csrf, "hub": signed.hub.name, "who": Self.who(signed)] as [String: Any]
        }
        let html = pages.render(object, withTemplate: template) ?? ""
        return Response(status: status, headers: Self.pageHeaders, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    func unavailable(_ signed: Signed, _ why: String) -> Response {
        render("problem", title: "Not available", signed, ["message": "This page is not available: \(why)."], status: .serviceUnavailable)
    }

    /// Pages load only the console's own script and style, are never framed, and are not kept.
    static let pageHeaders: HTTPFields = [
        .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
        .contentSecurityPolicy:
            "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        HTTPField.Name("X-Content-Type-Options")!: "nosniff", HTTPField.Name("Referrer-Policy")!: "no-referrer",
        HTTPField.Name("X-Frame-Options")!: "DENY",
    ]

    static func asset(_ text: String, type: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: type, .cacheControl: "max-age=300", HTTPField.Name("X-Content-Type-Options")!: "nosniff"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func redirect(_ location: String, cookie: String? = nil) -> Response {
        var response = Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
        if let cookie { response.headers[.setCookie] = cookie }
        return response
    }

    static func iso(_ date: Date) -> String { RFC3339.format(date) }

    static func shown(_ date: Date) -> String {
        let text = RFC3339.format(date)
        return text.replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC")
    }
}

extension ConsoleForm {
    static let empty = try! ConsoleForm(query: nil)
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        switch self {
        case .some(let value): try await transform(value)
        case .none: nil
        }
    }
}

/// Console accounts as the password checker reads users.
struct ConsoleAccounts: UserStore {
    let accounts: [ConsoleConfiguration.Account]

    func setUser(name: String, passwordHash: String) async throws {
        throw HubAPIError(.methodNotAllowed, "console accounts are set in pushhub.yaml")
    }

    func passwordHash(user: String) async throws -> String? {
        accounts.first { $0.name == user }?.passwordHash
    }
}
