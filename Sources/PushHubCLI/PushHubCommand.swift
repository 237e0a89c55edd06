import ArgumentParser
@main struct PushHubCommand: ParsableCommand { func run() {} }
