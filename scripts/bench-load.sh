#!/usr/bin/env bash
# PushHub under `pushhub load` on this machine, each part its own release process on the
# embedded defaults: kafka-dev, pushhub sim, pushhub-ingress (SQLite), pushhub-dispatcher and
# the four workers. In order:
#   1. register DEVICES devices through the hub API (APNs 60 %, FCM 30 %, WNS 5 %, Web Push 5 %);
#   2. one template broadcast to all of them, with every process's peak RSS during it;
#   3. native sends to single users at RATE/s for DURATION s;
#   4. an APNs-only broadcast with one APNs worker, profiled with perf, then with two;
# and writes the figures into docs/benchmarks.md. Reports of each run are kept in OUT.
# PHASES picks some of them (`PHASES="register send"`; "register broadcast send scaling" is
# all); a run of some phases only prints each one's CPU table and leaves the docs alone.
# PERF=1 records the ingress, the dispatcher and the APNs worker with `perf record -g` during
# the registrations, the broadcast, the sends and the first APNs-only broadcast (profiles and
# reports in OUT, named after the phase); PERF_PROCESSES names others
# (`PERF_PROCESSES="wns-worker dispatcher"`), and PERF_CALLGRAPH how stacks are taken
# (`PERF_CALLGRAPH="--call-graph dwarf"` unwinds Swift's frames better than the default `-g`).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SCRATCH:-.build}/release
devices=${DEVICES:-1000000}
rate=${RATE:-2000}
duration=${DURATION:-60}
partitions=${PARTITIONS:-32}
all_phases="register broadcast send scaling"
phases=${PHASES:-$all_phases}
phase() { [[ " $phases " == *" $1 "* ]]; }
out=${OUT:-$(mktemp -d /tmp/pushhub-bench-load.XXXXXX)}
dir=$(mktemp -d /tmp/pushhub-bench-load-run.XXXXXX)
mkdir -p "$out"
declare -A pids=()
order=()
# Stops the processes in the reverse order of their start (`stop`, bench-lib.sh).
cleanup() {
  for ((i = ${#order[@]} - 1; i >= 0; i--)); do stop "${order[$i]}" "${pids[${order[$i]}]}"; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
source scripts/bench-lib.sh
value() { sed -n "s/^$1//p" "$2" | head -1; }
start() { # name, output file, command...
  local name=$1 file=$2; shift 2
  "$@" >"$file" 2>"$file.err" </dev/null &
  pids[$name]=$!
  order+=("$name")
}
export PUSHHUB_LOG_LEVEL=warning

start kafka "$dir/kafka" "$bin/pushhub" kafka-dev --brokers 1 --partitions "$partitions"
wait_for PUSHHUB_KAFKA= "$dir/kafka"
export PUSHHUB_KAFKA=$(value PUSHHUB_KAFKA= "$dir/kafka")
config="$dir/pushhub.yaml"
# The ingress writes the development hub and prints its connection strings; the simulator
# then gives the hub simulated credentials.
start ingress "$dir/ingress" "$bin/pushhub-ingress" --port 0 --config "$config" --database "$dir/pushhub.sqlite"
wait_for DefaultFullSharedAccessSignature: "$dir/ingress"
export PUSHHUB_URL=$(value PUSHHUB_URL= "$dir/ingress")
export PUSHHUB_HUB=$(value PUSHHUB_HUB= "$dir/ingress")
export PUSHHUB_CONNECTION_STRING=$(value "DefaultFullSharedAccessSignature: " "$dir/ingress")
# The first 1,000 handles' deliveries are kept (and Web Push payloads decrypted), not a million.
# The simulated FCM project's quota is raised: FCM's default, 600,000 a minute, alone would
# make a broadcast's 300,000 FCM targets take 30 s, whatever PushHub costs.
start sim "$dir/sim" "$bin/pushhub" sim --config "$config" --attach "$PUSHHUB_HUB" --data-dir "$dir/sim-data" --recorded-handles 1000 \
  --fcm-quota 60000000
wait_for PUSHHUB_PNS_CA= "$dir/sim"
export PUSHHUB_SIM_URL=$(value PUSHHUB_SIM_URL= "$dir/sim")
# Devices' WNS channels and Web Push endpoints at the HTTP/2 listener, as the real services are.
export PUSHHUB_SIM_APNS_URL=$(value PUSHHUB_SIM_APNS_URL= "$dir/sim")
export PUSHHUB_PNS_CA=$(value PUSHHUB_PNS_CA= "$dir/sim")
# The ingress read the hub before the simulator allowed its listeners as WNS channels and Web
# Push endpoints: it starts again with the hub as the simulator left it.
kill "${pids[ingress]}" && wait "${pids[ingress]}" || true
start ingress "$dir/ingress" "$bin/pushhub-ingress" --port 0 --config "$config" --database "$dir/pushhub.sqlite"
wait_for PUSHHUB_URL= "$dir/ingress"
export PUSHHUB_URL=$(value PUSHHUB_URL= "$dir/ingress")
start dispatcher "$dir/dispatcher" "$bin/pushhub-dispatcher" --config "$config" --database "$dir/pushhub.sqlite"
for platform in apns fcm wns webpush; do
  start "$platform-worker" "$dir/$platform" "$bin/pushhub-$platform-worker" --config "$config"
done
for name in dispatcher apns fcm wns webpush; do wait_for PUSHHUB_OPS_URL= "$dir/$name"; done
sleep 5 # the consumer groups settle

cpu() { # each process's CPU seconds so far (utime + stime)
  local name
  for name in "${!pids[@]}"; do echo "$name $(awk '{print ($14 + $15) / 100}' "/proc/${pids[$name]}/stat" 2>/dev/null || echo 0)"; done
}
load() { # name, arguments...; also the CPU seconds each process spent during the run
  local name=$1; shift
  echo "== pushhub load $*" >&2
  cpu >"$dir/cpu-before"
  /usr/bin/time -f "load %U %S" -o "$dir/load-cpu" "$bin/pushhub" load "$@" --json "$out/$name.json" --html "$out/$name.html" 2>"$out/$name.progress" \
    | tee "$out/$name.txt" || echo "pushhub load $name did not finish cleanly; see $out/$name.progress" >&2
  cpu | awk 'NR == FNR { before[$1] = $2; next } { printf "%s %.2f\n", $1, $2 - before[$1] }' "$dir/cpu-before" - >"$out/$name.cpu"
  awk '/^load/ { printf "pushhub-load %.2f\n", $2 + $3 }' "$dir/load-cpu" >>"$out/$name.cpu"
}
peaks() { # reset (clear_refs 5) or read each process's peak RSS
  local name
  for name in "${!pids[@]}"; do
    if [ "$1" = reset ]; then echo 5 >"/proc/${pids[$name]}/clear_refs"; else echo "$name $(awk '/VmHWM/ {print $2}' "/proc/${pids[$name]}/status")"; fi
  done
}

perf_pids=()
perf_start() { # phase: records the ingress, the dispatcher and the APNs worker until perf_stop
  [ -n "${PERF:-}" ] || return 0
  perf_phase=$1
  perf_pids=()
  for name in ${PERF_PROCESSES:-ingress dispatcher apns-worker}; do
    perf record -F 999 ${PERF_CALLGRAPH:--g} -o "$out/$perf_phase-$name.perf" -p "${pids[$name]}" >"$out/$perf_phase-$name.perf.log" 2>&1 &
    perf_pids+=($!)
  done
}
perf_stop() {
  [ -n "${PERF:-}" ] || return 0
  for pid in "${perf_pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${perf_pids[@]}"; do wait "$pid" || true; done
  for name in ${PERF_PROCESSES:-ingress dispatcher apns-worker}; do
    perf report -i "$out/$perf_phase-$name.perf" --children --sort symbol --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -80 \
      | swift demangle --simplified >"$out/$perf_phase-$name.profile.txt" || true
  done
}

if phase register; then
  perf_start register
  load register register --devices "$devices" --concurrency 32
  perf_stop
fi
if phase broadcast; then
  peaks reset
  perf_start broadcast
  load broadcast broadcast --devices "$devices" --drain-timeout 600
  perf_stop
  peaks read >"$out/broadcast.rss"
fi
if phase send; then
  perf_start send
  load send send --devices "$devices" --rate "$rate" --duration "$duration" --audience user --format native --concurrency 256
  perf_stop
fi

if phase scaling; then
  # Scaling: the same APNs-only broadcast with one APNs worker (profiled), then two.
  perf record -F 999 -g -o "$dir/perf.data" -p "${pids[apns-worker]}" -- sleep 20 >"$out/perf.log" 2>&1 &
  perf_pid=$!
  perf_start apns-1
  load apns-1 broadcast --devices "$devices" --format native --platform apns --drain-timeout 600
  perf_stop
  wait "$perf_pid" || true
  start apns-worker-2 "$dir/apns2" "$bin/pushhub-apns-worker" --config "$config"
  wait_for PUSHHUB_OPS_URL= "$dir/apns2"
  sleep 15 # the group rebalances over both workers
  load apns-2 broadcast --devices "$devices" --format native --platform apns --drain-timeout 600
  perf report -i "$dir/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12 >"$out/profile-dso.txt" || true
  perf report -i "$dir/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -25 | swift demangle --simplified >"$out/profile-symbols.txt" || true
fi

if [ "$phases" != "$all_phases" ]; then
  for file in "$out"/*.cpu; do echo "== $(basename "$file" .cpu): CPU seconds per process"; cat "$file"; done
  echo "reports in $out (docs/benchmarks.md left alone: not every phase ran)"
  exit 0
fi
python3 scripts/bench-load-report.py "$out" "$devices" "$rate" "$duration" "$partitions"
echo "reports in $out"
