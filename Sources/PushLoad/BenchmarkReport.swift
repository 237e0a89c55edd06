import Foundation

/// Figures as Markdown, and their place in docs/benchmarks.md.
public enum BenchmarkReport {
    public static func kafkaTable(_ figures: [KafkaThroughputBenchmark.Figure], options: KafkaThroughputBenchmark.Options) -> String {
        var lines = [
            "Measured \(RFC3339Day.today()) on this machine (\(ProcessInfo.processInfo.activeProcessorCount) cores): \(options.records) records of \(options.recordSize) bytes, embedded cluster with \(options.brokers) brokers, \(options.partitionCount) partitions.",
            "",
            "| run | records | seconds | records/s | MB/s |",
            "|---|---:|---:|---:|---:|",
        ]
        for figure in figures {
            lines.append(
                "| \(figure.name) | \(figure.records) | \(String(format: "%.2f", figure.seconds)) | \(Int(figure.recordsPerSecond.rounded())) | \(String(format: "%.1f", figure.megabytesPerSecond)) |"
            )
        }
        for kind in ["produce", "consume"] {
            let pair = figures.filter { $0.name.hasPrefix(kind) }
            if pair.count == 2 {
                let ratio = pair[0].recordsPerSecond / pair[1].recordsPerSecond
                lines.append("")
                lines.append(
                    "\(kind.capitalized): PushHub / kcat = **\(String(format: "%.2f", ratio))×**" + (kind == "produce" ? " (target ≥ 0.8×)." : "."))
            }
        }
        return lines.joined(separator: "\n")
    }

    public static func storeTable(
        _ figures: [StorePagingBenchmark.Figure], upserts: [StorePagingBenchmark.UpsertFigure] = [],
        listings: [StorePagingBenchmark.ListingFigure] = [], seedSeconds: Double, options: StorePagingBenchmark.Options
    ) -> String {
        var lines = [
            "Measured \(RFC3339Day.today()) on this machine (\(ProcessInfo.processInfo.activeProcessorCount) cores): \(options.registrations) registrations in \(options.location), seeded in \(String(format: "%.1f", seedSeconds)) s; pages of \(options.pageSize).",
            "",
            "Each expression is paged as the dispatcher reads it (delivery candidates: the columns a delivery needs), then as whole registrations (what the hub API lists).",
            "",
            "| tag expression | targets | seconds | targets/s | whole registrations: seconds | registrations/s |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for figure in figures {
            lines.append(
                "| `\(figure.expression)` | \(figure.targets) | \(String(format: "%.2f", figure.seconds)) | \(Int(figure.targetsPerSecond.rounded())) | \(String(format: "%.2f", figure.registrationSeconds)) | \(Int(figure.registrationsPerSecond.rounded())) |"
            )
        }
        if !upserts.isEmpty {
            lines += [
                "",
                "Installation upserts (three tags each) into the same store, \(options.upsertConcurrency) at a time, as the hub API makes them:",
                "",
                "| upserts of | upserts | seconds | upserts/s | p50 | p99 |",
                "|---|---:|---:|---:|---:|---:|",
            ]
            for figure in upserts {
                lines.append(
                    "| \(figure.phase) | \(figure.upserts) | \(String(format: "%.1f", figure.seconds)) | \(Int(figure.upsertsPerSecond.rounded())) | \(String(format: "%.1f", figure.p50 * 1000)) ms | \(String(format: "%.1f", figure.p99 * 1000)) ms |"
                )
            }
        }
        if !listings.isEmpty {
            lines += [
                "",
                "Installation queries (`GET /{hub}/installations`'s store call, which hands the stored documents to the answer unread) over \(options.installations) installations of a hub of their own, with the same tags, pages of \(options.pageSize):",
                "",
                "| filter | installations | seconds | installations/s |",
                "|---|---:|---:|---:|",
            ]
            for figure in listings {
                lines.append(
                    "| `\(figure.filter)` | \(figure.installations) | \(String(format: "%.2f", figure.seconds)) | \(Int(figure.installationsPerSecond.rounded())) |"
                )
            }
        }
        return lines.joined(separator: "\n")
    }

    public static func dispatchTable(_ figures: DispatchBenchmark.Figures) -> String {
        let curve = stride(from: 0, to: figures.rssSamples.count, by: max(1, figures.rssSamples.count / 8)).map {
            "\(String(format: "%.1f", Double(figures.rssSamples[$0].tenthsOfSecond) / 10)) s: \(Int(figures.rssSamples[$0].mb)) MB"
        }.joined(separator: ", ")
        return """
            Measured \(RFC3339Day.today()) on this machine (\(ProcessInfo.processInfo.activeProcessorCount) cores): a broadcast to \(figures.registrations) registrations (SQLite, seeded in \(String(format: "%.1f", figures.seedSeconds)) s) through the dispatcher on the embedded cluster, \(figures.batches) DeliveryBatches.

            | targets | dispatch seconds | targets/s | RSS before | RSS peak while dispatching |
            |---:|---:|---:|---:|---:|
            | \(figures.registrations) | \(String(format: "%.1f", figures.dispatchSeconds)) | \(Int(Double(figures.registrations) / figures.dispatchSeconds)) | \(Int(figures.rssBeforeMB)) MB | \(Int(figures.rssPeakMB)) MB |

            RSS over the run: \(curve).
            """
    }

    /// Replaces what stands between `<!-- NAME:start -->` and `<!-- NAME:end -->`.
    public static func replaceSection(_ name: String, in file: URL, with text: String) throws {
        let document = try String(contentsOf: file, encoding: .utf8)
        let start = "<!-- \(name):start -->"
        let end = "<!-- \(name):end -->"
        guard let startRange = document.range(of: start), let endRange = document.range(of: end), startRange.upperBound <= endRange.lowerBound else {
            throw BenchmarkError(message: "\(file.path) has no \(start) … \(end) section")
        }
        let updated = document[..<startRange.upperBound] + "\n" + text + "\n" + document[endRange.lowerBound...]
        try String(updated).write(to: file, atomically: true, encoding: .utf8)
    }
}

enum RFC3339Day {
    static func today() -> String {
        Date.ISO8601FormatStyle().year().month().day().format(Date())
    }
}
