#!/usr/bin/env bash
# Installation upserts through HTTP on the SQLite store: a fresh release pushhub-ingress on
# loopback, driven by wrk (scripts/wrk-installations.lua) for DURATION with CONNECTIONS
# connections. Prints wrk's report and writes the figures into docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SCRATCH:-.build}/release
duration=${DURATION:-20s}
connections=${CONNECTIONS:-32}
dir=$(mktemp -d /tmp/pushhub-bench-ingress.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

PUSHHUB_LOG_LEVEL=warning "$bin/pushhub-ingress" --port 0 --config "$dir/pushhub.yaml" --database "$dir/pushhub.sqlite" >"$dir/banner" 2>"$dir/log" &
pid=$!
for _ in $(seq 100); do grep -q '^DefaultFullSharedAccessSignature: ' "$dir/banner" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^PUSHHUB_URL=//p' "$dir/banner")
hub=$(sed -n 's/^PUSHHUB_HUB=//p' "$dir/banner")
connection=$(sed -n 's/^DefaultListenSharedAccessSignature: //p' "$dir/banner")
token=$("$bin/pushhub" token "$connection" "/$hub")

wrk -t2 -c"$connections" -d"$duration" --latency -s scripts/wrk-installations.lua "$url" -- "$token" "$hub" | tee "$dir/wrk"
rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")

python3 - "$dir/wrk" "$connections" "$duration" "$rss_kb" <<'PY'
import datetime, os, re, sys
report, connections, duration, rss_kb = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], int(sys.argv[4])
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", report).group(1))
def ms(label):
    value, unit = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", report, re.M).groups()
    return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", report)
table = f"""Measured {datetime.date.today()} on this machine ({os.cpu_count()} cores, wrk and the ingress sharing them): {duration} of PUTs of new installations (3 tags each) with {connections} connections, release build, SQLite store.

| installations/s | p50 | p90 | p99 | non-2xx | ingress peak RSS |
|---:|---:|---:|---:|---:|---:|
| {rate:.0f} | {ms('50%'):.1f} ms | {ms('90%'):.1f} ms | {ms('99%'):.1f} ms | {errors.group(1) if errors else 0} | {rss_kb // 1024} MB |

Target: ≥ 5,000/s with p99 < 20 ms — {'met' if rate >= 5000 and ms('99%') < 20 else 'missed'}."""
sys.path.insert(0, "scripts")
from benchmark_section import write_section
write_section("ingress-benchmark", "Installation upserts through HTTP", table)
PY
