#!/usr/bin/env bash
# Fuzzes every target of tests/fuzz in turn (`make fuzz`):
#   scripts/fuzz.sh SECONDS [RUNS]
# Each target runs for SECONDS, or until RUNS executions when RUNS is given,
# under libFuzzer with ASan + UBSan (clang, build-fuzz/), starting from the
# generated seed corpora, the committed seeds and the committed regression
# inputs; what it learns accumulates in build-fuzz/fuzz-corpus/TARGET. A crash,
# a sanitizer report, a broken invariant, an input slower than 10 s, or a single
# allocation over FUZZ_MALLOC_MB (64 MB; no fuzz input exceeds 256 KB) stops the
# target and leaves the input in build-fuzz/fuzz-artifacts/. Without clang (and
# no way to install it) the standalone driver of the normal build mutates
# instead, deterministically. Prints one line of figures per target.
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET="${1:-60}"
RUNS="${2:-0}"
MALLOC_MB="${FUZZ_MALLOC_MB:-64}"
PY="${TANDEM_PYTHON:-${TANDEM_CACHE:-$HOME/.cache/tandem}/venv/bin/python}"
TARGETS=(gguf safetensors hf_config tokenizer_json tokenizer_config chat_template openai_request)
max_len() {
  case "$1" in
    gguf|safetensors) echo 262144 ;;
    *) echo 65536 ;;
  esac
}

committed_inputs() {
  for d in tests/fuzz/seeds/"$1" tests/fuzz/regressions/"$1"; do [ -d "$d" ] && echo "$d"; done
}

if scripts/setup.sh --fuzz && command -v clang++-14 >/dev/null; then
  B=build-fuzz
  cmake -S . -B "$B" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTANDEM_FUZZ=ON -DTANDEM_PYTHON="$PY" >/dev/null || exit 1
  cmake --build "$B" -j "$(nproc)" --target fuzz_all || exit 1
  "$B"/tests/fuzz/fuzz_seeds "$B"/fuzz-seeds >/dev/null || exit 1
  mkdir -p "$B"/fuzz-artifacts "$B"/fuzz-logs
  runs=-1  # libFuzzer: no limit
  [ "$RUNS" -gt 0 ] && runs="$RUNS"
  status=0
  printf '%-17s %12s %9s %8s %s\n' target executions exec/s corpus result
  for t in "${TARGETS[@]}"; do
    mkdir -p "$B/fuzz-corpus/$t"
    log="$B/fuzz-logs/$t.log"
    # shellcheck disable=SC2046
    "$B/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_PER_TARGET" -runs="$runs" \
      -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb="$MALLOC_MB" \
      -print_final_stats=1 -artifact_prefix="$B/fuzz-artifacts/$t-" \
      "$B/fuzz-corpus/$t" "$B/fuzz-seeds/$t" $(committed_inputs "$t") >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    corpus=$(ls "$B/fuzz-corpus/$t" | wc -l)
    result="ok"
    if [ $rc -ne 0 ]; then
      result="FAILED (exit $rc; see $log and $B/fuzz-artifacts/)"
      status=1
    fi
    printf '%-17s %12s %9s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$result"
  done
  exit $status
fi

echo "fuzz: clang with libFuzzer is not available: mutating with the standalone driver instead"
B="${BUILD:-build}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DTANDEM_PYTHON="$PY" >/dev/null || exit 1
cmake --build "$B" -j "$(nproc)" --target fuzz_all || exit 1
"$B"/tests/fuzz/fuzz_seeds "$B"/fuzz-seeds >/dev/null || exit 1
mutations=$(( RUNS > 0 ? RUNS : SECONDS_PER_TARGET * 1000 ))
status=0
for t in "${TARGETS[@]}"; do
  # shellcheck disable=SC2046
  "$B/tests/fuzz/fuzz_$t" --mutations "$mutations" --max-len "$(max_len "$t")" \
    --crash-dir "$B" "$B/fuzz-seeds/$t" $(committed_inputs "$t") || status=1
done
exit $status
