#!/usr/bin/env bash
# The APNs worker against pushhub sim on this machine, beside h2load against the same endpoint.
# Starts kafka-dev (1 broker), pushhub sim (attached to a fresh development hub) and one
# release pushhub-apns-worker; `pushhub bench worker` produces TARGETS targets in
# DeliveryBatches and counts the results. Then h2load sends TARGETS requests to the simulator's
# APNs endpoint with a valid provider token (the ceiling). Figures go to docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SCRATCH:-.build}/release
targets=${TARGETS:-200000}
dir=$(mktemp -d /tmp/pushhub-bench-apns.XXXXXX)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
source scripts/bench-lib.sh

"$bin/pushhub" kafka-dev --brokers 1 --partitions 4 >"$dir/kafka" 2>"$dir/kafka.err" </dev/null &
pids+=($!)
wait_for PUSHHUB_KAFKA= "$dir/kafka"
export PUSHHUB_KAFKA=$(sed -n 's/^PUSHHUB_KAFKA=//p' "$dir/kafka")
export PUSHHUB_LOG_LEVEL=warning

"$bin/pushhub" sim --config "$dir/pushhub.yaml" --attach pushhub-dev --data-dir "$dir/sim-data" >"$dir/sim" 2>"$dir/sim.err" &
pids+=($!)
sim_pid=$!
wait_for PUSHHUB_PNS_CA= "$dir/sim"
apns_url=$(sed -n 's/^PUSHHUB_SIM_APNS_URL=//p' "$dir/sim")
export PUSHHUB_PNS_CA=$(sed -n 's/^PUSHHUB_PNS_CA=//p' "$dir/sim")

"$bin/pushhub-apns-worker" --config "$dir/pushhub.yaml" ${WORKER_ARGS:-} >"$dir/worker" 2>"$dir/worker.err" &
pids+=($!)
worker_pid=$!
sleep 2

"$bin/pushhub" bench worker --platform apns --hub pushhub-dev --targets "$targets" | tee "$dir/bench"
rate=$(sed -n 's/^DELIVERIES_PER_SECOND=//p' "$dir/bench")
rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$worker_pid/status")
sim_rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$sim_pid/status")

eval "$("$bin/pushhub" bench apns-token --config "$dir/pushhub.yaml" --hub pushhub-dev | sed 's/^/export /')"
echo '{"aps":{"alert":{"title":"Benchmark","body":"A notification of ordinary size for the benchmark"},"badge":1}}' >"$dir/payload"
token=$(printf 'ab%.0s' $(seq 32))
h2load -n "$targets" -c 4 -m 100 -H "authorization: bearer $APNS_TOKEN" -H "apns-topic: $APNS_TOPIC" -H "apns-push-type: alert" \
  -d "$dir/payload" "$apns_url/3/device/$token" | tee "$dir/h2load"

python3 - "$dir/h2load" "$rate" "$rss_kb" "$sim_rss_kb" "$targets" <<'PY'
import datetime, os, re, sys
report, rate, rss_kb, sim_rss_kb, targets = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ceiling = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", report).group(1))
ok = re.search(r"status codes: (\d+) 2xx", report).group(1)
table = f"""Measured {datetime.date.today()} on this machine ({os.cpu_count()} cores shared by Kafka, the simulator, the worker and the load): {targets:,} APNs targets in DeliveryBatches of 500 through one release `pushhub-apns-worker` (4 HTTP/2 connections of its own client, at most 400 requests in flight) to `pushhub sim` over TLS; then h2load (4 connections × 100 streams) at the same simulator endpoint with the same payload, the ceiling.

| | requests/s | peak RSS |
|---|---:|---:|
| pushhub-apns-worker → sim (Kafka in, results out) | {rate:,} | {rss_kb // 1024} MB (worker) |
| h2load → sim | {ceiling:,.0f} ({ok} 2xx) | {sim_rss_kb // 1024} MB (simulator) |

Target: ≥ 20,000 deliveries/s and RSS ≤ 150 MB for the worker — {'met' if rate >= 20000 and rss_kb <= 150 * 1024 else 'missed'}; the simulator aims at ≥ 50,000 requests/s — {'met' if ceiling >= 50000 else 'missed'}."""
sys.path.insert(0, "scripts")
from benchmark_section import write_section
write_section("apns-benchmark", "APNs worker and simulator (`make bench-apns`)", table)
PY
