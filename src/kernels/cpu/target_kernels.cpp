// Choosing the SIMD target and looking up its kernels, once per CpuKernels.
#include "kernels/cpu/hwy_targets.h"  // first: the Highway targets every kernel file compiles

#include <hwy/targets.h>

#include "core/error.h"
#include "kernels/cpu/target_kernels.h"

namespace tandem::kernels::cpu {
namespace {

// The position of `target`'s functions in the HWY_EXPORT tables of the kernel
// files (all compiled for the targets of hwy_targets.h, as this file is): what
// Highway's dispatcher computes from its process-wide choice, here from ours.
size_t dispatch_index(int64_t target) {
  hwy::ChosenTarget chosen;
  chosen.Update(target);
  return chosen.GetIndex();
}

int64_t checked_target(int64_t requested) {
  const int64_t available = hwy::SupportedTargets() & HWY_TARGETS;
  if (requested == 0) return available & -available;  // lower bits are better targets
  check((requested & (requested - 1)) == 0 && (requested & HWY_TARGETS) != 0,
        "SIMD target {:#x} is not one this build compiled", requested);
  check((requested & available) != 0, "SIMD target {} is not supported by this CPU",
        hwy::TargetName(requested));
  return requested;
}

}  // namespace

TargetKernels target_kernels(int64_t requested) {
  TargetKernels k;
  const int64_t target = checked_target(requested);
  k.name = hwy::TargetName(target);
  const size_t index = dispatch_index(target);
  resolve_matmul_float(index, k);
  resolve_matmul_legacy(index, k);
  resolve_matmul_kquant(index, k);
  resolve_matmul_packed(index, k);
  resolve_quantize_acts(index, k);
  resolve_attention(index, k);
  resolve_elementwise(index, k);
  resolve_gumbel(index, k);
  return k;
}

const TargetKernels& best_target_kernels() {
  static const TargetKernels best = target_kernels(0);
  return best;
}

}  // namespace tandem::kernels::cpu
