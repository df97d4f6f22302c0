#!/usr/bin/env bash
# The device check, run on the GPU machine from the folder `make gpu-bundle`
# made (docs/cuda.md): prints the device, checks that tandem starts with the
# bundled libraries, then runs every test executable of bin/ with
# TANDEM_REQUIRE_CUDA=1 (a GPU test that finds no device fails instead of
# skipping) and reports each one's passed/failed/skipped counts. gtest's JSON
# reports go to $OUT when it is set (the device tool brings it back), else
# beside this script. Exits non-zero when any test fails.
#
# Usage: ./gpu_check.sh [gtest filter]    e.g. ./gpu_check.sh 'CudaGemm.*'
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
report="${OUT:-$here}"
filter="${1:-*}"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TANDEM_REQUIRE_CUDA=1

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader \
  || echo "nvidia-smi failed"
echo "== tandem starts"
"$here/bin/tandem" --help >/dev/null && echo "ok" || echo "tandem --help failed"

failed=0
for t in "$here"/bin/*_test; do
  name="$(basename "$t")"
  log="$report/$name.log"
  timeout 300 "$t" --gtest_filter="$filter" --gtest_output="json:$report/$name.json" >"$log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$log")
  failures=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$log")
  skipped=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$log")
  printf '== %-28s rc %3d  passed %3d  failed %3d  skipped %3d\n' "$name" "$rc" "$passed" "$failures" "$skipped"
  if [ "$rc" -ne 0 ]; then
    failed=1
    grep -B1 -A6 'Failure$' "$log" | head -60  # the first failures, with their messages
  fi
  grep '^device:' "$log" || true
done
[ "$failed" -eq 0 ] && echo "== gpu_check: all passed" || echo "== gpu_check: FAILURES"
exit "$failed"
