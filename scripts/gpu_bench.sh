#!/usr/bin/env bash
# The GPU benchmarks of docs/cuda.md, run on the GPU machine from the folder
# `make gpu-bundle` made, after gpu_check.sh. The real model files cannot travel
# (../shared/gpu/README.md), so each shape is written there by `tandem
# synth-model` (random weights, the real tensor table and types), then timed by
# `tandem bench decode --device cuda`: the decode step at batch 1 with CUDA
# graphs and the fused launches, then without each; the verify of 4, 8 and 16
# positions against one; decode steps of 16 and 64 sequences; where a step's time
# goes, by kind of kernel (--profile, eager); for every shape the same step
# under the other GEMV mapping (--cuda-gemv groups; lanes is the default,
# docs/cuda.md). The full output goes to $OUT/bench.log (or beside this
# script); stdout gets the figures.
#
# Usage: ./gpu_bench.sh [shape ...]   (default: the four of `synth-model --list`)
#        ./gpu_bench.sh --gemv        the two mappings' decode step only, 1.5B and 3B
#                                     shapes (about a minute and a half)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
log="${OUT:-$here}/bench.log"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TANDEM_PACK=0  # the CPU's packed copy of the weights is not used on the device
tandem="$here/bin/tandem"
work="$(mktemp -d /tmp/tandem-gpu-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
gemv_only=0
if [ "${1:-}" = "--gemv" ]; then
  gemv_only=1
  shift
  set -- qwen2.5-coder-1.5b-q4_k_m llama-3.2-3b-bf16
fi
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(qwen2.5-coder-1.5b-q4_k_m qwen2.5-coder-0.5b-q4_k_m
                                   llama-3.2-3b-bf16 llama-3.2-1b-bf16)
: >"$log"

# bench NAME FLAGS...: one `bench decode` of the current model, its figures to
# stdout; it may run for $limit seconds (a hang must not take the device time).
limit=180
bench() {
  local name="$1"
  shift
  echo "-- $shape $name: tandem bench decode -m $shape.gguf --device cuda $*" | tee -a "$log"
  local t0=$SECONDS
  timeout "$limit" "$tandem" bench decode -m "$model" --device cuda "$@" >"$work/run.log" 2>&1
  local rc=$?
  cat "$work/run.log" >>"$log"
  grep -E '^(decode|verify|batch|weights read|error|terminate|device time|  )' "$work/run.log"
  echo "   (rc $rc, $((SECONDS - t0)) s)"
}

for shape in "${shapes[@]}"; do
  model="$work/$shape.gguf"
  echo "== $shape" | tee -a "$log"
  "$tandem" synth-model --shape "$shape" -o "$model" 2>&1 | tee -a "$log"
  common=(--prompt 128 --gen 128 --reps 10 -k 7)
  if [ "$gemv_only" = 1 ]; then
    bench "graphs+fused, lanes" "${common[@]}"
    bench "graphs+fused, groups" "${common[@]}" --cuda-gemv groups
    rm -f "$model"
    continue
  fi
  case "$shape" in
    qwen2.5-coder-1.5b-q4_k_m)
      bench "graphs+fused" "${common[@]}" --verify-positions 4,8,16 --batch 16,64
      bench "graphs, unfused" "${common[@]}" --no-cuda-fusion
      bench "eager, fused" "${common[@]}" --no-cuda-graphs
      bench "graphs+fused, context 1024" --prompt 1024 --gen 64 --reps 10 -k 7
      bench "profile (eager)" --prompt 128 --gen 32 --reps 2 --profile ;;
    llama-3.2-3b-bf16)  # 64 sequences' prefill alone takes half a minute here
      bench "graphs+fused" "${common[@]}" --verify-positions 4,8,16 --batch 16
      bench "profile (eager)" --prompt 128 --gen 32 --reps 2 --profile ;;
    *)
      bench "graphs+fused" "${common[@]}" --verify-positions 4,8,16 --batch 16,64 ;;
  esac
  bench "graphs+fused, groups" "${common[@]}" --cuda-gemv groups
  rm -f "$model"
done
