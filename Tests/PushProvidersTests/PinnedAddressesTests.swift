import Testing

@testable import PushProviders

@Suite("Addresses pinned by a Web Push endpoint's check")
struct PinnedAddressesTests {
    @Test("a pinned client connects to its host's latest pin, named in any case or brackets, and to nothing once the pins started again")
    func pins() throws {
        let pins = PinnedAddresses()
        let source = pins.source(host: "push.example", port: 443)
        #expect(source() == nil, "never pinned: nothing to connect to")
        pins.pin(PinnedAddresses.key(host: "Push.Example", port: 443), ["192.0.2.1"])
        #expect(source() == ["192.0.2.1"])
        #expect(pins.addresses(host: "push.example", port: 8443) == nil, "another port is another origin")
        pins.pin(PinnedAddresses.key(host: "push.example", port: 443), ["192.0.2.2", "192.0.2.3"])
        #expect(source() == ["192.0.2.2", "192.0.2.3"], "each check replaces the addresses")
        pins.pin(PinnedAddresses.key(host: "[2001:db8::1]", port: 443), ["2001:db8::1"])
        #expect(pins.addresses(host: "2001:db8::1", port: 443) == ["2001:db8::1"])
        for index in 0..<PinnedAddresses.maximum { pins.pin(PinnedAddresses.key(host: "h\(index)", port: 443), ["192.0.2.9"]) }
        #expect(source() == nil, "started again past the bound: no address to connect to until the next check")
        pins.pin(PinnedAddresses.key(host: "push.example", port: 443), ["192.0.2.4"])
        #expect(source() == ["192.0.2.4"])
    }
}
