#!/usr/bin/env bash
# One platform's worker against pushhub sim on this machine, beside h2load against the same
# endpoint: bench-pns.sh apns|fcm|wns|webpush|hms|adm|xiaomi|baidu. Starts kafka-dev (1 broker), pushhub sim (attached to
# a fresh development hub) and one release pushhub-<platform>-worker; `pushhub bench worker`
# produces TARGETS targets in DeliveryBatches and counts the results. Then h2load sends TARGETS
# copies of the request the worker sends for one push (`pushhub bench pns-request`) to the same
# simulator endpoint. CPU per delivery comes from /proc/PID/stat; figures go to docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
platform=${1:?usage: bench-pns.sh apns|fcm|wns|webpush|hms|adm|xiaomi|baidu}
bin=${SCRATCH:-.build}/release
targets=${TARGETS:-200000}
dir=$(mktemp -d /tmp/pushhub-bench-pns.XXXXXX)
pids=()
names=()
# Stops the processes in the reverse order of their start (`stop`, bench-lib.sh).
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop "${names[$i]}" "${pids[$i]}"; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
source scripts/bench-lib.sh

"$bin/pushhub" kafka-dev --brokers 1 --partitions 4 >"$dir/kafka" 2>"$dir/kafka.err" </dev/null &
pids+=($!)
names+=("pushhub kafka-dev")
kafka_pid=$!
wait_for PUSHHUB_KAFKA= "$dir/kafka"
export PUSHHUB_KAFKA=$(sed -n 's/^PUSHHUB_KAFKA=//p' "$dir/kafka")
export PUSHHUB_LOG_LEVEL=warning

# The simulator keeps (and for Web Push decrypts) the first 1,000 handles' deliveries, not every
# one: a push service does not decrypt, and the figures are to measure PushHub, not the stand-in.
# The simulated FCM project's quota is raised: at FCM's default (600,000 a minute) the FCM
# worker measured the quota, 10,000/s, not itself.
"$bin/pushhub" sim --config "$dir/pushhub.yaml" --attach pushhub-dev --data-dir "$dir/sim-data" --recorded-handles 1000 \
  --fcm-quota 60000000 >"$dir/sim" 2>"$dir/sim.err" &
pids+=($!)
names+=("pushhub sim")
sim_pid=$!
wait_for PUSHHUB_PNS_CA= "$dir/sim"
# WNS channels and Web Push endpoints at the simulator's HTTP/2 listener, as the real services speak.
sim_url=$(sed -n 's/^PUSHHUB_SIM_APNS_URL=//p' "$dir/sim")
export PUSHHUB_PNS_CA=$(sed -n 's/^PUSHHUB_PNS_CA=//p' "$dir/sim")

"$bin/pushhub-$platform-worker" --config "$dir/pushhub.yaml" ${WORKER_ARGS:-} >"$dir/worker" 2>"$dir/worker.err" &
pids+=($!)
names+=("pushhub-$platform-worker")
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
run_measured "$dir/harness-cpu" "$bin/pushhub" bench worker --platform "$platform" --hub pushhub-dev --targets "$targets" \
  --sim-url "$sim_url" | tee "$dir/bench"
worker_ticks=$(($(cpu_ticks "$worker_pid") - worker_before)); sim_ticks=$(($(cpu_ticks "$sim_pid") - sim_before))
if [ -n "${PERF_OUT:-}" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
kafka_ticks=$(($(cpu_ticks "$kafka_pid") - kafka_before))
rate=$(sed -n 's/^DELIVERIES_PER_SECOND=//p' "$dir/bench")
rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$worker_pid/status")
sim_rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$sim_pid/status")

# The request the worker sends for one push, sent TARGETS times by h2load: HTTP/2 with 4
# connections of 100 streams where the request is https (every service at the simulator's
# HTTP/2 listener), else 16 HTTP/1.1 connections.
"$bin/pushhub" bench pns-request --config "$dir/pushhub.yaml" --hub pushhub-dev --platform "$platform" --sim-url "$sim_url" \
  --body-file "$dir/payload" >"$dir/request"
url=$(sed -n 's/^URL=//p' "$dir/request")
protocol=$(sed -n 's/^PROTOCOL=//p' "$dir/request")
headers=()
while IFS= read -r line; do headers+=(-H "$line"); done < <(sed -n 's/^HEADER=//p' "$dir/request")
if [ "$protocol" = h2 ]; then shape=(-c 4 -m 100); shape_text="4 connections × 100 streams"; else shape=(--h1 -c 16 -m 1); shape_text="16 HTTP/1.1 connections"; fi
sim_before=$(cpu_ticks "$sim_pid")
# SIM_PERF_OUT=file keeps a call-graph profile of the simulator under h2load.
if [ -n "${SIM_PERF_OUT:-}" ]; then
  perf record -F 499 -g -p "$sim_pid" -o "$SIM_PERF_OUT" >"$dir/sim-perf.log" 2>&1 &
  sim_perf_pid=$!
fi
run_measured "$dir/h2load-cpu" h2load -n "$targets" "${shape[@]}" "${headers[@]}" -d "$dir/payload" "$url" | tee "$dir/h2load"
sim_h2load_ticks=$(($(cpu_ticks "$sim_pid") - sim_before))
if [ -n "${SIM_PERF_OUT:-}" ]; then kill -INT "$sim_perf_pid"; wait "$sim_perf_pid" || true; fi

python3 - "$platform" "$dir/h2load" "$rate" "$rss_kb" "$sim_rss_kb" "$targets" "$(ticks_per_second)" "$worker_ticks" "$sim_ticks" \
  "$kafka_ticks" "$(cat "$dir/harness-cpu")" "$(cat "$dir/h2load-cpu")" "$sim_h2load_ticks" "$shape_text" <<'PY'
import datetime, os, re, sys
platform, report = sys.argv[1], open(sys.argv[2]).read()
rate, rss_kb, sim_rss_kb, targets, hz = (int(v) for v in sys.argv[3:8])
worker_us, sim_us, kafka_us = (int(t) / hz * 1e6 / targets for t in sys.argv[8:11])
harness_us, h2load_us = (float(s) * 1e6 / targets for s in sys.argv[11:13])
sim_h2load_us = int(sys.argv[13]) / hz * 1e6 / targets
shape = sys.argv[14]
ceiling = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", report).group(1))
ok = re.search(r"status codes: (\d+) 2xx", report).group(1)
names = {"apns": "APNs", "fcm": "FCM", "wns": "WNS", "webpush": "Web Push", "hms": "Huawei Push Kit", "adm": "ADM", "xiaomi": "Xiaomi", "baidu": "Baidu"}
# The new services are held to FCM's and WNS's target: one JSON or form request a device.
worker_target = {"apns": 20, "fcm": 25, "wns": 25, "webpush": 150}.get(platform, 25)
table = f"""Measured {datetime.date.today()} on this machine ({os.cpu_count()} cores shared by Kafka, the simulator, the worker and the load): {targets:,} {names[platform]} targets in DeliveryBatches of 500 through one release `pushhub-{platform}-worker` to `pushhub sim`; then h2load ({shape}) sending the worker's own request for one push to the same simulator endpoint, the ceiling.

| | requests/s | peak RSS |
|---|---:|---:|
| pushhub-{platform}-worker → sim (Kafka in, results out) | {rate:,} | {rss_kb // 1024} MB (worker) |
| h2load → sim | {ceiling:,.0f} ({ok} 2xx) | {sim_rss_kb // 1024} MB (simulator) |

Throughput: worker / h2load = **{rate / ceiling:.2f}×** (target ≥ 0.7×).

CPU per delivery by process, from /proc/PID/stat (the harness's and h2load's from wait4), in the same run:

| process | worker run (µs per delivery) | h2load run (µs per request) |
|---|---:|---:|
| pushhub-{platform}-worker (Kafka in, results out) | {worker_us:.1f} | |
| h2load | | {h2load_us:.1f} |
| simulator (`pushhub sim`) | {sim_us:.1f} | {sim_h2load_us:.1f} |
| embedded Kafka (`pushhub kafka-dev`) | {kafka_us:.1f} | |
| harness (`pushhub bench worker`: batches in, results counted) | {harness_us:.1f} | |

Targets: the worker ≤ {worker_target} µs per delivery, the simulator ≤ 15 µs per request."""
sys.path.insert(0, "scripts")
from benchmark_section import write_section
title = "APNs worker and simulator (`make bench-apns`)" if platform == "apns" else f"{names[platform]} worker and simulator (`make bench-pns`)"
write_section(f"{platform}-benchmark" if platform != "apns" else "apns-benchmark", title, table)
PY
