import Foundation
import PushFuzzing
import Testing

/// Every committed seed, and every input a fuzzer once crashed on, goes through its target again
/// in the ordinary build: a crash here fails the run.
@Suite("Fuzz seeds and regressions")
struct FuzzRegressionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    @Test("seeds and past crashes run through their targets", arguments: FuzzTarget.allCases)
    func replay(_ target: FuzzTarget) throws {
        var count = 0
        for folder in ["seeds", "regressions"] {
            let directory = Self.root.appendingPathComponent(folder).appendingPathComponent(target.rawValue)
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            for file in files.sorted() {
                let data = try Data(contentsOf: directory.appendingPathComponent(file))
                target.run(data)
                count += 1
            }
        }
        #expect(count > 0, "every target has seeds")
    }
}
