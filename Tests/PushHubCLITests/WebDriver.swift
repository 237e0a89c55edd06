import Foundation
import PushTestSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A headless Chromium driven through `chromedriver` over the W3C WebDriver protocol, for tests that use a page as a person
/// would: open it, fill in its forms, press keys, and read what it shows.
///
/// Every call is one HTTP request to `chromedriver` (through `httpCall`), and a WebDriver error comes back as a thrown
/// `WebDriverError` carrying `chromedriver`'s error code and message. Call `quit()` when done; if a test forgets, or fails
/// before it gets there, the browser and `chromedriver` are killed when the last reference to the `Browser` (or to one of
/// its elements) goes away.
final class Browser: Sendable {
    /// The `chromedriver` executable (Debian's `chromium-driver` package).
    static let chromedriverPath = "/usr/bin/chromedriver"
    /// The Chromium that `chromedriver` starts (Debian's `chromium` package; a script that runs /usr/lib/chromium/chromium).
    static let chromiumPath = "/usr/bin/chromium"
    /// The key under which WebDriver names an element in its answers and in the values that scripts return.
    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    /// Keys that `pressKeys(_:)` and `Element.type(_:)` understand, as WebDriver spells them (code points in a private-use area).
    enum Key {
        static let backspace = "\u{E003}"
        static let tab = "\u{E004}"
        static let enter = "\u{E007}"
        static let escape = "\u{E00C}"
        static let space = "\u{E00D}"
        static let arrowLeft = "\u{E012}"
        static let arrowUp = "\u{E013}"
        static let arrowRight = "\u{E014}"
        static let arrowDown = "\u{E015}"
    }

    /// A cookie of the current page, as WebDriver reports it.
    struct Cookie: Sendable, Equatable {
        var name: String
        var value: String
        var domain: String
        var path: String
        var httpOnly: Bool
        var secure: Bool
        /// "Strict", "Lax" or "None".
        var sameSite: String
        /// When the cookie expires, in seconds since 1970; nil for a cookie that lasts as long as the session.
        var expiry: Int?
    }

    private let driver: ChildProcess
    /// The session's URL, `http://127.0.0.1:<port>/session/<id>`, to which each command's path is appended.
    private let session: String
    /// The browser's process, as `chromedriver` reported it, so that it can be killed when `chromedriver` could not end it.
    private let browserProcess: pid_t?
    /// The browser's temporary profile directory.
    private let profile: URL
    /// True once `quit()` began.
    private let ended = Mutex(false)

    private init(driver: ChildProcess, session: String, browserProcess: pid_t?, profile: URL) {
        self.driver = driver
        self.session = session
        self.browserProcess = browserProcess
        self.profile = profile
    }

    /// Starts `chromedriver` on a free port and opens a session in a headless Chromium with a window of 1280 by 1000 pixels
    /// and a fresh temporary profile. It throws, with `chromedriver`'s output, if `chromedriver` does not start listening
    /// within 60 seconds (a loaded machine running the rest of the suite beside it) or the browser cannot be started.
    static func start() async throws -> Browser {
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-chromium-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
        let driver: ChildProcess
        do {
            driver = try ChildProcess(URL(fileURLWithPath: chromedriverPath), arguments: ["--port=0"])
        } catch {
            try? FileManager.default.removeItem(at: profile)
            throw error
        }
        func failure(_ what: String) async -> WebDriverError {
            driver.signal(SIGKILL)
            _ = await driver.exitStatus(within: .seconds(2))
            try? FileManager.default.removeItem(at: profile)
            return WebDriverError(code: "chromedriver", message: "\(what); chromedriver's output:\n\(driver.output.joined(separator: "\n"))")
        }
        guard let port = await listeningPort(of: driver, within: .seconds(60)) else {
            throw await failure("chromedriver did not start listening within 60 seconds")
        }
        let base = "http://127.0.0.1:\(port)"
        let created: JSONValue
        do {
            created = try await call(base, "POST", "/session", capabilities(profile: profile))
        } catch {
            throw await failure("chromedriver could not start Chromium: \(error)")
        }
        guard let id = created["sessionId"]?.stringValue else {
            throw await failure("chromedriver answered the new session without its id: \(created)")
        }
        let browserProcess = created["capabilities"]?["goog:processID"]?.numberValue.flatMap { pid_t(exactly: $0) }
        return Browser(driver: driver, session: "\(base)/session/\(id)", browserProcess: browserProcess, profile: profile)
    }

    /// The port that `chromedriver` announced it listens on, or nil if it did not within `timeout` or ended first.
    private static func listeningPort(of driver: ChildProcess, within timeout: Duration) async -> Int? {
        let announcement = "ChromeDriver was started successfully on port "
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            // Whether it ended is asked first, so that its output is read to the end before it is looked at.
            let exited = await driver.exitStatus(within: .zero) != nil
            if let line = driver.output.first(where: { $0.hasPrefix(announcement) }) {
                return Int(line.dropFirst(announcement.count).prefix(while: { $0.isNumber }))
            }
            if exited { return nil }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// The new session's capabilities: Debian's Chromium, headless, with the profile in `profile`.
    private static func capabilities(profile: URL) -> JSONValue {
        let arguments = ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000", "--user-data-dir=\(profile.path)"]
        let options: JSONValue = ["binary": .string(chromiumPath), "args": .array(arguments.map(JSONValue.string))]
        return ["capabilities": ["alwaysMatch": ["browserName": "chrome", "goog:chromeOptions": options]]]
    }

    /// Sends one command to `chromedriver` at `base` + `path`, with `body` as JSON, and returns the answer's "value". A
    /// WebDriver error in the answer, or an answer that is not WebDriver's JSON, is thrown as a `WebDriverError`.
    private static func call(_ base: String, _ method: String, _ path: String, _ body: JSONValue?) async throws -> JSONValue {
        let command = "\(method) \(path.isEmpty ? "/session" : path)"
        let text = try body.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        // Through curl: chromedriver writes its header lines without a space after the colon,
        // which Foundation's URLSession on Linux refuses ("Failed writing header").
        var arguments = ["curl", "-sS", "-X", method, "-w", "\n%{http_code}", base + path]
        if let text { arguments += ["-H", "Content-Type: application/json; charset=utf-8", "--data-binary", text] }
        let (exit, output) = try await ProcessLaunch.output(arguments)
        guard exit == 0, let newline = output.lastIndex(of: "\n"), let status = Int(output[output.index(after: newline)...]) else {
            throw WebDriverError(code: "unreachable", message: "curl exited \(exit): \(output.suffix(500))", context: command)
        }
        let answer = String(output[..<newline])
        guard let reply = try? JSONDecoder().decode(JSONValue.self, from: Data(answer.utf8)), let value = reply["value"] else {
            throw WebDriverError(
                code: "unreadable answer", message: "HTTP \(status), not WebDriver's JSON: \(answer.prefix(1000))", context: command)
        }
        if let code = value["error"]?.stringValue {
            // The message repeats the code, and ends with a line naming the browser's version and a stack trace (left out).
            let lines = (value["message"]?.stringValue ?? "").split(separator: "\n").filter { !$0.hasPrefix("  (Session info:") }
            let message = lines.joined(separator: "\n")
            throw WebDriverError(code: code, message: message.hasPrefix(code) ? message : "\(code): \(message)", context: command)
        }
        guard status == 200 else {
            throw WebDriverError(code: "unexpected answer", message: "HTTP \(status): \(answer.prefix(1000))", context: command)
        }
        return value
    }

    /// Sends one command of this session: `path` is relative to the session's URL (empty for the session itself), and a
    /// POST needs a `body`, if only `[:]`. It returns the answer's "value".
    @discardableResult
    func command(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        try await Self.call(session, method, path, body)
    }

    /// Opens `url` and returns once the page has loaded.
    func open(_ url: String) async throws {
        try await command("POST", "/url", ["url": .string(url)])
    }

    /// The URL of the page shown, after any redirects.
    func currentURL() async throws -> String {
        try await command("GET", "/url").text ?? ""
    }

    /// The page's title.
    func title() async throws -> String {
        try await command("GET", "/title").text ?? ""
    }

    /// The first element that `css` matches; it throws an error naming the selector and the page if none does.
    func find(_ css: String) async throws -> Element {
        do {
            let found = try await command("POST", "/element", ["using": "css selector", "value": .string(css)])
            return try element(found, name: "`\(css)`")
        } catch let error as WebDriverError where error.code == "no such element" {
            let page = (try? await currentURL()) ?? "the page"
            throw WebDriverError(code: error.code, message: "no element matches the CSS selector `\(css)` on \(page)")
        }
    }

    /// Every element that `css` matches, in document order; none is not an error.
    func findAll(_ css: String) async throws -> [Element] {
        let found = try await command("POST", "/elements", ["using": "css selector", "value": .string(css)])
        return try (found.arrayValue ?? []).map { try element($0, name: "`\(css)`") }
    }

    /// Waits for an element that `css` matches and whose visible text satisfies `until`, asking again every 100 ms, and
    /// returns the first such element. It throws after `timeout`, naming the selector and the text it last saw.
    func wait(for css: String, timeout: Duration = .seconds(15), until: @Sendable (String) -> Bool = { _ in true }) async throws -> Element {
        let deadline = ContinuousClock.now + timeout
        // The texts of the elements that matched at the last look; nil while nothing matched.
        var seen: [String]? = nil
        while true {
            do {
                let elements = try await findAll(css)
                var texts: [String] = []
                for element in elements {
                    let text = try await element.text()
                    if until(text) { return element }
                    texts.append(text)
                }
                if !elements.isEmpty { seen = texts }
            } catch let error as WebDriverError where ["no such element", "stale element reference"].contains(error.code) {
                // The page changed between finding the elements and reading them: they are looked for again.
            }
            guard ContinuousClock.now < deadline else {
                let quoted = seen.map { texts in texts.map { text in "\"\(text.prefix(500))\"" }.joined(separator: ", ") }
                let last = quoted.map { "the text last seen: \($0)" } ?? "nothing matched"
                let page = (try? await currentURL()) ?? "the page"
                throw WebDriverError(code: "timeout", message: "no element matching `\(css)` on \(page) was as expected within \(timeout); \(last)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Runs `script` as the body of a function in the page, with `args` as its `arguments`, and returns what it returns
    /// (an element comes back as an object with `Browser.elementKey`). A script that throws throws a "javascript error".
    @discardableResult
    func execute(_ script: String, _ args: [String] = []) async throws -> JSONValue {
        try await command("POST", "/execute/sync", ["script": .string(script), "args": .array(args.map(JSONValue.string))])
    }

    /// Saves what the window shows, 1280 by 1000 pixels, as a PNG file at `path`, creating its directory if needed.
    func screenshot(to path: String) async throws {
        let encoded = try await command("GET", "/screenshot")
        guard let text = encoded.stringValue, let png = Data(base64Encoded: text) else {
            throw WebDriverError(code: "unexpected answer", message: "the screenshot is not Base64: \(encoded.description.prefix(200))")
        }
        let file = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try png.write(to: file)
    }

    /// Presses and releases each character of `keys` in turn, as a person typing, on whatever element has the focus. A
    /// character from `Browser.Key` presses that key (Tab, Enter, …); modifier keys are not held down across characters.
    func pressKeys(_ keys: String) async throws {
        let strokes: [JSONValue] = keys.flatMap { key -> [JSONValue] in
            [["type": "keyDown", "value": .string(String(key))], ["type": "keyUp", "value": .string(String(key))]]
        }
        let keyboard: JSONValue = ["type": "key", "id": "keyboard", "actions": .array(strokes)]
        try await command("POST", "/actions", ["actions": [keyboard]])
    }

    /// The element that has the focus (the page's body when no other has it).
    func activeElement() async throws -> Element {
        let active = try await command("GET", "/element/active")
        return try element(active, name: "the active element")
    }

    /// The cookies that the current page can see, including those marked HttpOnly.
    func cookies() async throws -> [Cookie] {
        let cookies = try await command("GET", "/cookie")
        return (cookies.arrayValue ?? []).map { cookie in
            Cookie(
                name: cookie["name"]?.stringValue ?? "", value: cookie["value"]?.stringValue ?? "",
                domain: cookie["domain"]?.stringValue ?? "", path: cookie["path"]?.stringValue ?? "",
                httpOnly: cookie["httpOnly"]?.boolValue ?? false, secure: cookie["secure"]?.boolValue ?? false,
                sameSite: cookie["sameSite"]?.stringValue ?? "", expiry: cookie["expiry"]?.numberValue.flatMap { Int(exactly: $0) })
        }
    }

    /// Ends the session, which closes the browser, then `chromedriver`, and removes the browser's profile. The browser is
    /// killed if it is still running a few seconds later. Calling it again does nothing.
    func quit() async {
        let first = ended.withLock { ended in
            defer { ended = true }
            return !ended
        }
        guard first else { return }
        let closed = (try? await command("DELETE", "")) != nil
        driver.signal(SIGTERM)
        if await driver.exitStatus(within: .seconds(3)) == nil {
            driver.signal(SIGKILL)
            _ = await driver.exitStatus(within: .seconds(2))
        }
        if let browserProcess {
            // chromedriver leaves the browser running when it ends without closing the session first.
            let grace: Duration = closed ? .seconds(3) : .zero
            let deadline = ContinuousClock.now + grace
            while Self.isRunning(browserProcess), ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(50))
            }
            if Self.isRunning(browserProcess) { kill(browserProcess, SIGKILL) }
        }
        try? FileManager.default.removeItem(at: profile)
    }

    /// The element that `value` names in a WebDriver answer; `name` says how it was found, for error messages.
    func element(_ value: JSONValue, name: String) throws -> Element {
        guard let id = value[Self.elementKey]?.stringValue else {
            throw WebDriverError(code: "unexpected answer", message: "expected an element for \(name), got \(value.description.prefix(300))")
        }
        return Element(browser: self, id: id, name: name)
    }

    /// Whether process `pid` exists and has not ended; one that ended but whose parent has not yet reaped it has ended.
    private static func isRunning(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let name = stat.lastIndex(of: ")") else {
            return true
        }
        return !stat[name...].dropFirst(2).hasPrefix("Z")
    }

    deinit {
        guard !ended.withLock({ $0 }) else { return }
        if let browserProcess, Self.isRunning(browserProcess) { kill(browserProcess, SIGKILL) }
        driver.signal(SIGKILL)
        try? FileManager.default.removeItem(at: profile)
    }
}

/// An element of the page a `Browser` shows. It keeps its browser running for as long as it exists; it goes stale (a
/// "stale element reference" error) when the page that held it is replaced.
struct Element: Sendable, CustomStringConvertible {
    let browser: Browser
    /// WebDriver's id of the element.
    let id: String
    /// How the element was found, for error messages: its CSS selector in backticks, or a description.
    let name: String

    var description: String { name }

    /// Sends one command about this element; an error names `action` and the element.
    @discardableResult
    private func command(_ action: String, _ method: String, _ suffix: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        do {
            return try await browser.command(method, "/element/\(id)\(suffix)", body)
        } catch let error as WebDriverError {
            throw WebDriverError(code: error.code, message: error.message, context: "\(action) \(name)")
        }
    }

    /// An element name as a single segment of a command's path.
    private static func segment(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? name
    }

    /// Clicks the middle of the element, scrolling it into view first, as a person would.
    func click() async throws {
        try await command("click on", "POST", "/click", [:])
    }

    /// Focuses the element and types `text` at the end of its value; characters from `Browser.Key` press those keys.
    func type(_ text: String) async throws {
        try await command("typing into", "POST", "/value", ["text": .string(text)])
    }

    /// Empties an input or a text area.
    func clear() async throws {
        try await command("clearing", "POST", "/clear", [:])
    }

    /// The element's text as it is shown (hidden text left out, whitespace as rendered).
    func text() async throws -> String {
        try await command("reading the text of", "GET", "/text").text ?? ""
    }

    /// The value of the HTML attribute `name` as written in the page, or nil if the element has no such attribute.
    func attribute(_ name: String) async throws -> String? {
        try await command("reading attribute \(name) of", "GET", "/attribute/\(Self.segment(name))").text
    }

    /// The DOM property `name` (such as "value", "checked" or "selectedIndex") as text, or nil if it is null or undefined;
    /// numbers and Booleans are written as JavaScript writes them, arrays and objects as JSON.
    func property(_ name: String) async throws -> String? {
        try await command("reading property \(name) of", "GET", "/property/\(Self.segment(name))").text
    }

    /// The first element inside this one that `css` matches; it throws an error naming both if none does.
    func find(_ css: String) async throws -> Element {
        do {
            let found = try await command("finding `\(css)` in", "POST", "/element", ["using": "css selector", "value": .string(css)])
            return try browser.element(found, name: "`\(css)` in \(name)")
        } catch let error as WebDriverError where error.code == "no such element" {
            throw WebDriverError(code: error.code, message: "no element inside \(name) matches the CSS selector `\(css)`")
        }
    }

    /// Chooses the `<option>` of this `<select>` whose value is `value`, by clicking it, which fires "input" and "change" as
    /// a person's choice does.
    func selectOption(value: String) async throws {
        let quoted = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        try await find("option[value=\"\(quoted)\"]").click()
    }
}

/// An error that `chromedriver` answered, or that `Browser` found itself.
struct WebDriverError: Error, CustomStringConvertible {
    /// WebDriver's error code ("no such element", "javascript error", "invalid selector" and so on), or "timeout",
    /// "chromedriver", "unreadable answer" or "unexpected answer" for those that `Browser` found itself.
    var code: String
    /// What went wrong.
    var message: String
    /// What was being done: the command sent, or the action on an element; empty when the message says it all.
    var context = ""

    var description: String { context.isEmpty ? message : "\(context): \(message)" }
}

/// A JSON value, as WebDriver's commands take and answer them.
enum JSONValue: Sendable, Equatable, Codable, CustomStringConvertible, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .number(Double(value)) }
    init(floatLiteral value: Double) { self = .number(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
    init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements) { _, last in last }) }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            if let integer = Int64(exactly: value) { try container.encode(integer) } else { try container.encode(value) }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The member `key` of an object; nil for a value that is not an object or has no such member.
    subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The element at `index` of an array; nil for a value that is not an array or too short.
    subscript(index: Int) -> JSONValue? {
        if case .array(let elements) = self, elements.indices.contains(index) { return elements[index] }
        return nil
    }

    var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    var numberValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The value as text: a string as it is, a number or a Boolean as JavaScript writes it, an array or an object as JSON,
    /// and null as nil.
    var text: String? {
        switch self {
        case .null: return nil
        case .string(let value): return value
        case .bool(let value): return String(value)
        case .number(let value): return Int64(exactly: value).map { String($0) } ?? String(value)
        case .array, .object: return description
        }
    }

    /// The value as compact JSON, its members sorted by name.
    var description: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "(not JSON)"
    }
}
