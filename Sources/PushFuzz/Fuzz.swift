// PushFuzz: the `pushhub-fuzz` executable that `make fuzz` builds with libFuzzer; an ordinary build
// replays files through a fuzz target.

import Foundation
import PushFuzzing

/// libFuzzer's entry point: `make fuzz` builds this with `-sanitize=fuzzer,address` and runs it
/// once per target, named by `PUSHHUB_FUZZ_TARGET`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    selectedTarget.run(Data(bytes: data, count: size))
    return 0
}

let selectedTarget: FuzzTarget = {
    guard let target = FuzzTarget.fromEnvironment else {
        FileHandle.standardError.write(
            Data("set PUSHHUB_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))\n".utf8))
        exit(2)
    }
    return target
}()

#if FUZZING
    /// SwiftPM links an executable's entry point as `PushFuzz_main`; under libFuzzer that entry
    /// hands over to libFuzzer's driver.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    @_cdecl("PushFuzz_main")
    public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments, fuzzOne)
    }
#else
    /// Without libFuzzer (an ordinary build): replays files through a target, e.g. a crash input.
    @main
    struct Replay {
        static func main() {
            for path in CommandLine.arguments.dropFirst() {
                guard let data = FileManager.default.contents(atPath: path) else { continue }
                selectedTarget.run(data)
                print("ok \(path)")
            }
        }
    }
#endif
