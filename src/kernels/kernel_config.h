// The knobs of the compute kernels: which kernels run, whether weights are
// repacked at load, and the prefetch distances of the AVX-512 matmuls. Fixed
// when a model is loaded (packing) and when a Kernels object is made (the rest);
// nothing reads them from the environment behind the caller's back.
#pragma once
#include <cstdint>
#include <functional>

namespace tandem::kernels {

struct KernelConfig {
  // The scalar reference kernels instead of the SIMD ones (debugging, A/B
  // comparisons); the weights are then not repacked.
  bool reference = false;
  // Copy the matrices at load into the packed layout, where the chosen target's
  // matmul reads it (kernels::pack_weights).
  bool pack = true;
  // The Highway target to run (one bit, e.g. HWY_AVX2), which this build must
  // have compiled and this CPU must support; 0: the best this CPU supports.
  // Tests sweep every compiled target with it.
  int64_t simd_target = 0;
  // How far ahead (bytes) the AVX-512 matmul over the file's layout prefetches
  // the weights into L2 (0: off); docs/decisions.md, "Software prefetch".
  int64_t prefetch_bytes = 6144;
  // The same for the packed layout, whose panels are one contiguous stream.
  // Longer than the file layout's: with several activation rows a record's
  // compute nearly covers its streaming time, and a shorter lead leaves the
  // matmul slower (docs/decisions.md, "Software prefetch").
  int64_t prefetch_packed_bytes = 8192;
  // Time every kernel call (kernels/profiling_kernels.h): `bench decode --profile`.
  bool profile = false;
};

// The defaults above overridden by environment variables, for front ends that
// read the environment once at start-up; `lookup(name)` returns a variable's
// value or null (a wrapper of std::getenv):
//   TANDEM_KERNELS=ref|simd        reference
//   TANDEM_PACK=0|1                pack
//   TANDEM_PREFETCH=bytes          prefetch_bytes
//   TANDEM_PREFETCH_PACKED=bytes   prefetch_packed_bytes
// Throws tandem::Error naming the variable for a value it cannot use.
KernelConfig kernel_config_from_env(const std::function<const char*(const char*)>& lookup);
// The same from the process environment (std::getenv).
KernelConfig kernel_config_from_env();

}  // namespace tandem::kernels
