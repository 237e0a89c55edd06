import ArgumentParser
struct BenchCommand: AsyncParsableCommand { static let configuration = CommandConfiguration(commandName: "bench") }
