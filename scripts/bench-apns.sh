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
kafka_pid=$!
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

# CPU per delivery, by process, from /proc/PID/stat around the worker run; the harness's own
# from wait4.
worker_before=$(cpu_ticks "$worker_pid"); sim_before=$(cpu_ticks "$sim_pid"); kafka_before=$(cpu_ticks "$kafka_pid")
# PERF_OUT=file keeps a call-graph profile of the worker during the run (perf record -g).
if [ -n "${PERF_OUT:-}" ]; then
  perf record -F 499 -g -p "$worker_pid" -o "$PERF_OUT" >"$dir/perf.log" 2>&1 &
  perf_pid=$!
fi
run_measured "$dir/harness-cpu" "$bin/pushhub" bench worker --platform apns --hub pushhub-dev --targets "$targets" | tee "$dir/bench"
worker_ticks=$(($(cpu_ticks "$worker_pid") - worker_before)); sim_ticks=$(($(cpu_ticks "$sim_pid") - sim_before))
if [ -n "${PERF_OUT:-}" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
kafka_ticks=$(($(cpu_ticks "$kafka_pid") - kafka_before))
rate=$(sed -n 's/^DELIVERIES_PER_SECOND=//p' "$dir/bench")
rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$worker_pid/status")
sim_rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$sim_pid/status")

eval "$("$bin/pushhub" bench apns-token --config "$dir/pushhub.yaml" --hub pushhub-dev | sed 's/^/export /')"
echo '{"aps":{"alert":{"title":"Benchmark","body":"A notification of ordinary size for the benchmark"},"badge":1}}' >"$dir/payload"
token=$(printf 'ab%.0s' $(seq 32))
sim_before=$(cpu_ticks "$sim_pid")
# SIM_PERF_OUT=file keeps a call-graph profile of the simulator under h2load.
if [ -n "${SIM_PERF_OUT:-}" ]; then
  perf record -F 499 -g -p "$sim_pid" -o "$SIM_PERF_OUT" >"$dir/sim-perf.log" 2>&1 &
  sim_perf_pid=$!
fi
run_measured "$dir/h2load-cpu" h2load -n "$targets" -c 4 -m 100 -H "authorization: bearer $APNS_TOKEN" -H "apns-topic: $APNS_TOPIC" \
  -H "apns-push-type: alert" -d "$dir/payload" "$apns_url/3/device/$token" | tee "$dir/h2load"
sim_h2load_ticks=$(($(cpu_ticks "$sim_pid") - sim_before))
if [ -n "${SIM_PERF_OUT:-}" ]; then kill -INT "$sim_perf_pid"; wait "$sim_perf_pid" || true; fi

python3 - "$dir/h2load" "$rate" "$rss_kb" "$sim_rss_kb" "$targets" "$(ticks_per_second)" "$worker_ticks" "$sim_ticks" "$kafka_ticks" \
  "$(cat "$dir/harness-cpu")" "$(cat "$dir/h2load-cpu")" "$sim_h2load_ticks" <<'PY'
import datetime, os, re, sys
report, rate, rss_kb, sim_rss_kb, targets = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
hz = int(sys.argv[6])
worker_us, sim_us, kafka_us = (int(t) / hz * 1e6 / targets for t in sys.argv[7:10])
harness_us, h2load_us = (float(s) * 1e6 / targets for s in sys.argv[10:12])
sim_h2load_us = int(sys.argv[12]) / hz * 1e6 / targets
ceiling = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", report).group(1))
ok = re.search(r"status codes: (\d+) 2xx", report).group(1)
table = f"""Measured {datetime.date.today()} on this machine ({os.cpu_count()} cores shared by Kafka, the simulator, the worker and the load): {targets:,} APNs targets in DeliveryBatches of 500 through one release `pushhub-apns-worker` (4 HTTP/2 connections of its own client, at most 400 requests in flight) to `pushhub sim` over TLS; then h2load (4 connections × 100 streams) at the same simulator endpoint with the same payload, the ceiling.

| | requests/s | peak RSS |
|---|---:|---:|
| pushhub-apns-worker → sim (Kafka in, results out) | {rate:,} | {rss_kb // 1024} MB (worker) |
| h2load → sim | {ceiling:,.0f} ({ok} 2xx) | {sim_rss_kb // 1024} MB (simulator) |

Throughput: worker / h2load = **{rate / ceiling:.2f}×** (target ≥ 0.7×).

CPU per delivery by process, from /proc/PID/stat (the harness's and h2load's from wait4), in the same run:

| process | worker run (µs per delivery) | h2load run (µs per request) |
|---|---:|---:|
| pushhub-apns-worker (Kafka in, results out) | {worker_us:.1f} | |
| h2load | | {h2load_us:.1f} |
| simulator (`pushhub sim`) | {sim_us:.1f} | {sim_h2load_us:.1f} |
| embedded Kafka (`pushhub kafka-dev`) | {kafka_us:.1f} | |
| harness (`pushhub bench worker`: batches in, results counted) | {harness_us:.1f} | |

Targets: the worker ≤ 20 µs per delivery, the simulator ≤ 15 µs per request.

Target: ≥ 20,000 deliveries/s and RSS ≤ 150 MB for the worker — {'met' if rate >= 20000 and rss_kb <= 150 * 1024 else 'missed'}; the simulator aims at ≥ 50,000 requests/s — {'met' if ceiling >= 50000 else 'missed'}."""
sys.path.insert(0, "scripts")
from benchmark_section import write_section
write_section("apns-benchmark", "APNs worker and simulator (`make bench-apns`)", table)
PY
