import Synchronization
import Testing

@testable import PushStore

@Suite("Statement texts made once")
struct SQLTextsTests {
    @Test("a shape's text is made once and kept; past the limit all are dropped and made again as they come")
    func madeOnceAndBounded() {
        let texts = SQLTexts<Int>(limit: 3)
        let made = Mutex(0)
        let make = { (shape: Int) -> String in
            made.withLock { $0 += 1 }
            return "SELECT \(shape)"
        }
        #expect(texts.text(for: 1, make: make) == "SELECT 1")
        #expect(texts.text(for: 1, make: make) == "SELECT 1")
        #expect(made.withLock { $0 } == 1)
        for shape in 2...3 { _ = texts.text(for: shape, make: make) }
        #expect(texts.count == 3 && made.withLock { $0 } == 3)
        #expect(texts.text(for: 4, make: make) == "SELECT 4")
        #expect(texts.count == 1, "the fourth shape dropped the three before it")
        #expect(texts.text(for: 2, make: make) == "SELECT 2")
        #expect(made.withLock { $0 } == 5)
    }
}
