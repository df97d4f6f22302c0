// One unit of matmul work, as handed by the driver (matmul_cpu.cpp) to the
// per-family SIMD kernels: output columns [n0, n1) of one weight matrix for all
// activation rows [m0, m1).
//
// The kernels walk the columns in order (weight rows are contiguous, so the
// hardware prefetcher streams them) and apply each piece of a weight row to every
// activation row while it is in registers or L1. Each activation row goes
// through the same per-row code whatever rows share the call, so its result
// never depends on them (batch invariance).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/activations.h"

namespace tandem::kernels::cpu {

struct WorkerScratch;

struct MatmulChunk {
  DType type;
  const uint8_t* w;                 // row n starts at w + n * row_bytes
  const uint8_t* packed = nullptr;  // the same rows in the packed layout, or null
  size_t row_bytes;
  int64_t K;
  int64_t n0, n1;
  int m0, m1;
  const float* x = nullptr;     // float activations, M x K (float weight types)
  const QActs* acts = nullptr;  // quantized activations (quantized weight types)
  float* y;                     // y[m * ldy + n]
  int64_t ldy;
  WorkerScratch* scratch = nullptr;  // the buffers of the thread running the chunk
  int64_t prefetch_bytes = 0;        // how far ahead to prefetch the weights (0: off)
  // Weights that the kernel reads once (one tile of activation rows) may be
  // prefetched non-temporally (KernelConfig::stream_prefetch); the kernel
  // decides whether its tiling reads them once.
  bool non_temporal = false;
};

// Which activation form a weight type's kernel consumes.
enum class ActKind { Float, Q8, Q8K };  // Q8: scale per 32 elements, Q8K: per 256
ActKind act_kind(DType t);

// The per-family kernels take a chunk each; one instance per Highway target,
// called through TargetKernels (target_kernels.h): matmul_float (F32, F16,
// BF16), matmul_legacy (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), matmul_kquant (Q2_K ..
// Q6_K), and matmul_packed (Q4_K, Q6_K, Q4_0, Q4_1, Q5_0, Q8_0 in the packed
// layout of packed_layout.h; n0, n1 multiples of 16).
//
// Portable fallback for targets without usable SIMD (Highway's scalar target):
// dequantize each weight row and take float dot products with the float x.
void matmul_chunk_dequant(const MatmulChunk& c);

}  // namespace tandem::kernels::cpu
