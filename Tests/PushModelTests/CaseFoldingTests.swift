import Foundation
import PushModel
import Testing

@Suite("Names compared without their case")
struct CaseFoldingTests {
    @Test("ASCII letters fold, nothing else does; other text folds as Foundation folds it")
    func folding() {
        #expect(CaseFolding.equal("MyHub", "myhub"))
        #expect(CaseFolding.equal("X-WNS-Status", "x-wns-status"))
        #expect(!CaseFolding.equal("myhub", "myhub2"))
        #expect(!CaseFolding.equal("myhu", "myhub"))
        // `[` and `{`, `@` and `` ` `` differ by the case bit but are not letters.
        #expect(!CaseFolding.equal("a[", "a{"))
        #expect(!CaseFolding.equal("@", "`"))
        #expect(!CaseFolding.equal("hub-1", "hub_1"))
        // Other text: as Foundation's caseInsensitiveCompare, e.g. É and é, and the Kelvin sign.
        for (a, b) in [("Émoji", "émoji"), ("\u{212A}elvin", "kelvin"), ("straße", "STRASSE"), ("Ä", "a")] {
            #expect(CaseFolding.equal(a, b) == (a.caseInsensitiveCompare(b) == .orderedSame), "\(a) \(b)")
        }
    }
}
