// PushMetrics: a small Prometheus registry: counters, gauges, histograms and the text format, with
// no dependencies.
