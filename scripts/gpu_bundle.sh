#!/usr/bin/env bash
# `make gpu-bundle`: everything a run on the GPU machine needs, in one folder
# (../shared/gpu/README.md: nothing can be installed there, 64 MiB travel):
#
#   bin/   tandem, the CUDA backend's GPU tests (tests/cuda) and three host tests
#   lib/   the non-system shared libraries they load (found with ldd: PCRE2,
#          Highway, fmt, cpp-httplib, OpenSSL, Brotli); cudart is linked in
#          statically, and the driver's libcuda is the machine's own
#   gpu_check.sh  the prepared check (scripts/gpu_check.sh)
#
# Usage: scripts/gpu_bundle.sh BUILD_DIR OUT_DIR
set -euo pipefail
build="${1:?build directory}"
out="${2:?output directory}"
limit=$((64 * 1024 * 1024))
cd "$(dirname "$0")/.."

if ! ls "$build"/tests/cuda/*_gpu_test >/dev/null 2>&1; then
  echo "gpu-bundle: no GPU tests in $build/tests/cuda: the CUDA kernels were not built" \
       "(is nvcc on the PATH? see docs/cuda.md)" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/tandem" "$build"/tests/cuda/*_gpu_test "$out/bin/"
# Three host tests of the device code's planning, a second opinion on the
# device machine's host (cuda_step_inputs_test stays behind: it links the whole
# model, 12 MB, and runs in every CPU build).
for t in cuda_weight_layout_test cuda_graph_buckets_test cuda_memory_plan_test; do
  cp "$build/tests/$t" "$out/bin/"
done
strip --strip-unneeded "$out"/bin/*  # no symbols needed there: the bundle must stay under 64 MiB
cp scripts/gpu_check.sh scripts/gpu_bench.sh "$out/"

# The libraries the machine lacks: what ldd resolves outside glibc, libstdc++
# and libgcc (Ubuntu 24.04's are newer than the ones these were built against).
system='^(linux-vdso|ld-linux|libc\.|libm\.|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libz\.)'
for b in "$out"/bin/*; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ "$name" =~ $system ]]; then cp -L "$path" "$out/lib/$name"; fi
done

size=$(du -sb "$out" | cut -f1)
echo "gpu-bundle: $out, $((size / 1024)) KiB:"
(cd "$out" && find . -type f | sort | while read -r f; do printf '  %-40s %6d KiB\n' "$f" $(($(stat -c %s "$f") / 1024)); done)
if [ "$size" -ge "$limit" ]; then
  echo "gpu-bundle: $size bytes is over the 64 MiB that can travel" >&2
  exit 1
fi
