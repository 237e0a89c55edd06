#!/usr/bin/env bash
# Builds the libFuzzer targets (Sources/PushFuzz, with -sanitize=fuzzer,address) and runs each
# for FUZZ_SECONDS (default 30), starting from the committed seeds in Fuzz/seeds/<target>.
# A crash leaves its input in Fuzz/crashes/<target>/ and fails the run: move it to
# Fuzz/regressions/<target>/, where `make test` replays it, once it is fixed.
#
#   scripts/fuzz.sh                      every target, 30 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh     ten minutes each
#   scripts/fuzz.sh tag-expression atom  some targets
#   FUZZ_SEED=1 scripts/fuzz.sh          the same mutations each run (make test sets it)
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${FUZZ_SECONDS:-30}
SCRATCH=${FUZZ_SCRATCH:-.build-fuzz}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tag-expression template atom installation patch wire)

swift build --scratch-path "$SCRATCH" --product pushhub-fuzz \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -parse-as-library 2>&1 | grep -v "Cannot export local symbol" || true
binary="$SCRATCH/debug/pushhub-fuzz"
[ -x "$binary" ] || { echo "fuzz: $binary was not built" >&2; exit 1; }

status=0
for target in "${targets[@]}"; do
  corpus="$SCRATCH/corpus/$target"
  crashes="Fuzz/crashes/$target"
  mkdir -p "$corpus" "$crashes"
  log="$SCRATCH/fuzz-$target.log"
  # Swift's runtime keeps caches for the life of the process: leak reports would be noise.
  if PUSHHUB_FUZZ_TARGET="$target" ASAN_OPTIONS=detect_leaks=0 "$binary" "$corpus" "Fuzz/seeds/$target" \
      -max_total_time="$SECONDS_EACH" -max_len=16384 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$crashes/" ${FUZZ_SEED:+-seed=$FUZZ_SEED} >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "fuzz $target: ${SECONDS_EACH}s, $runs inputs, no crash"
  else
    echo "fuzz $target: FAILED, see $log and $crashes/" >&2
    tail -30 "$log" >&2
    status=1
  fi
done
# The working corpus is kept between runs (under $SCRATCH); crashes dirs that stayed empty go.
find Fuzz/crashes -type d -empty -delete 2>/dev/null || true
exit $status
