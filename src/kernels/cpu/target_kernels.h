// The entry points of the SIMD CPU kernels compiled for one Highway target,
// looked up once in the tables HWY_EXPORT makes (instead of a dynamic dispatch
// per call): a CpuKernels object holds one set and calls through it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul_chunk.h"
#include "kernels/kernels.h"

namespace tandem::kernels::cpu {

struct AttentionJob;
struct WorkerScratch;

struct TargetKernels {
  const char* name = "";
  // Matmul pieces (matmul_chunk.h); matmul_packed is null where the target has
  // no kernel for the packed layout.
  void (*matmul_float)(const MatmulChunk&) = nullptr;
  void (*matmul_legacy)(const MatmulChunk&) = nullptr;
  void (*matmul_kquant)(const MatmulChunk&) = nullptr;
  void (*matmul_packed)(const MatmulChunk&) = nullptr;
  // Activation quantization (activations.h): the codes, scales and group sums
  // of M rows, then the derived sums of out->gsum.size() groups.
  void (*quantize_acts)(const float* x, int M, int64_t K, QActs* out) = nullptr;
  void (*derived_sums)(QActs* out) = nullptr;
  // Attention jobs [j0, j1) of one call (attention_cpu.cpp).
  void (*attend)(const AttentionJob& job, int64_t j0, int64_t j1, WorkerScratch& scratch) = nullptr;
  void (*rmsnorm)(const float* x, const float* w, int n, float eps, float* out) = nullptr;
  void (*swiglu)(const float* gate, const float* up, int n, float* out) = nullptr;
  void (*add_inplace)(float* x, const float* b, int n) = nullptr;
  void (*rope)(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
               RopeStyle style) = nullptr;
  int (*argmax)(const float* x, int n) = nullptr;
  float (*sum_exp)(const float* x, int n, float shift, float scale) = nullptr;
  // kernels/gumbel_noise.h's gumbel_argmax, the key as (seed, position).
  int (*gumbel_argmax)(const float* x, const int* ids, int n, float offset, float scale,
                       uint64_t seed, uint32_t position, int hint) = nullptr;
};

// The kernels of `target` (one Highway target bit, or 0 for the best this CPU
// supports). Throws tandem::Error for a target this build did not compile or
// this CPU does not support.
TargetKernels target_kernels(int64_t target);
// The best target's kernels, looked up on first use: for the stateless entry
// points used outside a model's forward pass (the sampler's argmax, packing at
// load).
const TargetKernels& best_target_kernels();

// Each kernel file's share of a TargetKernels: its functions' entries at
// `index` of their HWY_EXPORT tables (the index target_kernels computes).
void resolve_matmul_float(size_t index, TargetKernels& k);
void resolve_matmul_legacy(size_t index, TargetKernels& k);
void resolve_matmul_kquant(size_t index, TargetKernels& k);
void resolve_matmul_packed(size_t index, TargetKernels& k);
void resolve_quantize_acts(size_t index, TargetKernels& k);
void resolve_attention(size_t index, TargetKernels& k);
void resolve_elementwise(size_t index, TargetKernels& k);
void resolve_gumbel(size_t index, TargetKernels& k);

}  // namespace tandem::kernels::cpu
