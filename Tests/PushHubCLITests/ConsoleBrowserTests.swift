import Foundation
import PushTestSupport
import Testing

/// The web console as a person uses it: `pushhub dev`, and headless Chromium driven through
/// chromedriver. Sign-in by keyboard, a device search, a test send watched to its results,
/// the send's page, the live charts, and an accessibility pass on every page. Screenshots go
/// to `$PUSHHUB_CONSOLE_SCREENSHOTS` (`make console-screenshots` writes docs/console/).
@Suite("Web console in a browser", .timeLimit(.minutes(4)))
struct ConsoleBrowserTests {
    /// Every form control has a label; every text's contrast against its background is at
    /// least 4.5:1 (WCAG AA), and the page has one h1 and a main landmark. Answers the problems.
    static let accessibilityCheck = """
        const problems = [];
        for (const field of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
          if (!(field.labels && field.labels.length) && !field.getAttribute("aria-label")) problems.push("no label: " + (field.id || field.name));
        }
        if (document.querySelectorAll("h1").length !== 1) problems.push("h1 count " + document.querySelectorAll("h1").length);
        if (!document.querySelector("main")) problems.push("no main");
        const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
        const luminance = ([r, g, b]) => {
          const channel = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
          return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
        };
        const background = (element) => {
          for (let node = element; node; node = node.parentElement) {
            const color = rgb(getComputedStyle(node).backgroundColor);
            if (color.length === 3 || (color.length === 4 && color[3] > 0.5)) return color.slice(0, 3);
          }
          return [255, 255, 255];
        };
        for (const element of document.body.querySelectorAll("*")) {
          const own = [...element.childNodes].some((node) => node.nodeType === 3 && node.textContent.trim());
          if (!own || element.closest("svg") || element.offsetParent === null) continue;
          const fore = luminance(rgb(getComputedStyle(element).color).slice(0, 3));
          const back = luminance(background(element));
          const ratio = (Math.max(fore, back) + 0.05) / (Math.min(fore, back) + 0.05);
          if (ratio < 4.5) problems.push("contrast " + ratio.toFixed(2) + ": " + element.tagName + " " + element.textContent.trim().slice(0, 40));
        }
        return problems.join("\\n");
        """

    static func check(_ browser: Browser, page: String, screenshots: URL) async throws {
        let problems = try await browser.execute(accessibilityCheck).text ?? ""
        #expect(problems.isEmpty, "\(page): \(problems)")
        let shot = screenshots.appendingPathComponent("\(page).png")
        try await browser.screenshot(to: shot.path)
        let png = try Data(contentsOf: shot)
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 10_000, "\(page): a screenshot with something on it, \(png.count) bytes")
    }

    @Test("sign in by keyboard, search devices, send a test push and watch it arrive, on pages that pass an accessibility check")
    func consoleInBrowser() async throws {
        let keep = ProcessInfo.processInfo.environment["PUSHHUB_CONSOLE_SCREENSHOTS"]
        let screenshots =
            keep.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-console-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: screenshots, withIntermediateDirectories: true)
        defer { if keep == nil { try? FileManager.default.removeItem(at: screenshots) } }
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-console-dev-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let stack = try await DevCommandTests.Stack.start(data: data)
        defer { stack.process.signal(SIGKILL) }
        try await DevCommandTests.register(stack)

        let browser = try await Browser.start()
        do {
            try await run(browser, stack: stack, screenshots: screenshots)
        } catch {
            await browser.quit()
            throw error
        }
        await browser.quit()
    }

    func run(_ browser: Browser, stack: DevCommandTests.Stack, screenshots: URL) async throws {
        let console = "\(stack.url)/console"
        // The accessibility check finds what it looks for: a faint text and an unlabelled field.
        try await browser.open("data:text/html,<main><h1>x</h1><p style='color:%23aaa'>faint</p><input id=q></main>")
        let found = try await browser.execute(Self.accessibilityCheck).text ?? ""
        #expect(found.contains("contrast") && found.contains("faint") && found.contains("no label: q"), "\(found)")
        // Not signed in: the console sends a person to sign in.
        try await browser.open(console)
        _ = try await browser.wait(for: "h1") { $0 == "Sign in" }
        #expect(try await browser.currentURL().hasSuffix("/console/signin"))
        try await Self.check(browser, page: "signin", screenshots: screenshots)

        // Keyboard only: the skip link, the hub, the connection string, Enter.
        try await browser.pressKeys(Browser.Key.tab)
        #expect(try await browser.activeElement().text() == "Skip to content", "the skip link comes first")
        try await browser.pressKeys(Browser.Key.tab)
        #expect(try await browser.activeElement().attribute("id") == "key-hub")
        try await browser.pressKeys(stack.hub + Browser.Key.tab)
        #expect(try await browser.activeElement().attribute("id") == "connection-string")
        try await browser.pressKeys(stack.connectionString + Browser.Key.enter)
        _ = try await browser.wait(for: "h1") { $0 == "Overview of \(stack.hub)" }
        let cookie = try #require(try await browser.cookies().first { $0.name == "pushhub_console" })
        #expect(cookie.httpOnly && cookie.sameSite == "Strict" && cookie.path == "/console")
        #expect(try await browser.execute("return document.cookie").text?.contains("pushhub_console") != true, "scripts cannot read the session")
        let devices = try await browser.find("#devices-heading + table tfoot td").text()
        #expect(Int(devices) ?? 0 >= 3, "the three registered devices: \(devices)")
        try await Self.check(browser, page: "overview", screenshots: screenshots)

        // Devices: the `breaking` tag on APNs finds the tutorial's device and the phone's two
        // registrations (native, and its template's), not the tablet.
        try await browser.find("nav a[href='/console/devices']").click()
        _ = try await browser.wait(for: "h1") { $0 == "Devices" }
        try await browser.find("#tags").type("breaking")
        try await browser.find("#platform").selectOption(value: "apns")
        try await browser.find("form.search button").click()
        let matched = try await browser.wait(for: "#found") { $0.contains("matching device") }
        #expect(try await matched.text() == "3 matching devices.")
        let rows = try await browser.findAll("#devices tbody tr")
        #expect(rows.count == 3)
        #expect(try await browser.find("#devices").text().contains("installation.phone"))
        #expect(!(try await browser.find("#devices").text().contains("tablet")))
        try await Self.check(browser, page: "devices", screenshots: screenshots)
        try await browser.find("#devices a[href$='installation.phone']").click()
        _ = try await browser.wait(for: "h1") { $0 == "Device installation.phone" }
        #expect(try await browser.find("main").text().contains("$(message)"), "the installation's template")
        try await Self.check(browser, page: "device", screenshots: screenshots)

        // Test send: the payload is checked as it is typed, then a template send to `breaking`.
        try await browser.find("nav a[href='/console/send']").click()
        _ = try await browser.wait(for: "h1") { $0 == "Test send" }
        _ = try await browser.wait(for: "#payload-check") { $0.hasPrefix("Looks right") }
        let payload = try await browser.find("#payload")
        try await payload.clear()
        try await payload.type("[1]")
        _ = try await browser.wait(for: "#payload-check") { $0.contains("body") && $0.contains("JSON object") }
        #expect(try await browser.find("#payload-check").attribute("class") == "check bad")
        try await browser.find("#format").selectOption(value: "template")
        try await payload.clear()
        try await payload.type(#"{"message":"Hello from the console"}"#)
        try await browser.find("#tags").type("breaking")
        _ = try await browser.wait(for: "#payload-check") { $0.hasPrefix("Looks right: a template notification") }
        try await Self.check(browser, page: "send", screenshots: screenshots)
        try await browser.find("#send-form button[type=submit]").click()
        let summary = try await browser.wait(for: "#summary", timeout: .seconds(30))
        #expect(try await summary.text() == "2 devices matched; sent to 2: 2 delivered.", "the phone and the tablet have templates")
        let results = try await browser.find("#results").text()
        #expect(results.contains("apns") && results.contains("fcm"))
        #expect(results.components(separatedBy: "successfully sent").count - 1 == 2, "\(results)")
        try await Self.check(browser, page: "sent", screenshots: screenshots)

        // The send's page: accepted, dispatched, results, Completed.
        try await browser.find("main a[href^='/console/notifications/']").click()
        _ = try await browser.wait(for: "#state", timeout: .seconds(30)) { $0 == "Completed" }
        let timeline = try await browser.find(".timeline").text()
        #expect(
            timeline.contains("accepted and enqueued") && timeline.contains("dispatched: 2 targets") && timeline.contains("ended Completed"),
            "\(timeline)")
        let counts = try await browser.find("#results").text()
        #expect(counts.contains("apns delivered 1") && counts.contains("fcm delivered 1"), "\(counts)")
        try await Self.check(browser, page: "notification", screenshots: screenshots)
        try await browser.find("nav a[href='/console/notifications']").click()
        _ = try await browser.wait(for: "tbody td") { $0.contains("UTC") }
        try await Self.check(browser, page: "notifications", screenshots: screenshots)

        // Live: the charts redraw themselves from the processes' metrics.
        try await browser.find("nav a[href='/console/live']").click()
        _ = try await browser.wait(for: "h1") { $0 == "Live" }
        let deadline = ContinuousClock.now + .seconds(20)
        while try await browser.findAll("#charts svg polyline").isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(250))
        }
        let lines = try await browser.findAll("#charts svg polyline")
        #expect(!lines.isEmpty, "a line per platform once two samples were taken")
        #expect(try await browser.findAll("#charts svg").count == 3)
        try await Self.check(browser, page: "live", screenshots: screenshots)

        // Signing out ends the session.
        try await browser.find(".signout button").click()
        _ = try await browser.wait(for: "h1") { $0 == "Sign in" }
        try await browser.open("\(console)/overview")
        _ = try await browser.wait(for: "h1") { $0 == "Sign in" }
    }
}
