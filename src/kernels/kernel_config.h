// The knobs of the compute kernels: which kernels run, whether weights are
// repacked at load, and the prefetch distances of the AVX-512 matmuls. Fixed
// when a model is loaded (packing) and when a Kernels object is made (the rest);
// nothing reads them from the environment behind the caller's back.
#pragma once
#include <cstdint>
#include <functional>

namespace tandem::kernels {

// How the quantized matmuls prefetch weights that a call reads only once (one
// tile of activation rows: decode steps, verify passes of up to 8 rows): into
// L2 (prefetcht1), or non-temporally (prefetchnta), which keeps the stream out
// of L2 and so, on AMD, out of L3, which is filled by what leaves L2. Auto: per
// CPU, kernels::non_temporal_streams (docs/decisions.md, "Weights read once,
// prefetched non-temporally").
enum class StreamPrefetch { Auto, L2, NonTemporal };

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
  // Where the weights that a call reads once are prefetched to (above).
  StreamPrefetch stream_prefetch = StreamPrefetch::Auto;
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
//   TANDEM_STREAM_PREFETCH=auto|l2|nta  stream_prefetch
// Throws tandem::Error naming the variable for a value it cannot use.
KernelConfig kernel_config_from_env(const std::function<const char*(const char*)>& lookup);
// The same from the process environment (std::getenv).
KernelConfig kernel_config_from_env();

// The name of a StreamPrefetch as TANDEM_STREAM_PREFETCH spells it.
const char* stream_prefetch_name(StreamPrefetch s);

// A CPU as cpuid names it: vendor string and family (base plus extended), e.g.
// {"AuthenticAMD", 26} for Zen 5, {"GenuineIntel", 6}.
struct CpuIdentity {
  const char* vendor;
  int family;
};
// This machine's ({"", 0} where cpuid is not available).
CpuIdentity this_cpu();

// Whether weights read once are prefetched non-temporally: `choice`, or for
// Auto, the measured choice for `cpu`. Non-temporal on AMD family 26 (Zen 5),
// where a decode step of Qwen2.5-1.5B reads at 88.5% of the machine's measured
// bandwidth against 83.5% into L2; into L2 elsewhere until measured there.
bool non_temporal_streams(StreamPrefetch choice, const CpuIdentity& cpu);

}  // namespace tandem::kernels
