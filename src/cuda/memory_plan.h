// How the CUDA backend divides one device's memory: the weights, the
// activations and scratch of the largest forward pass, and as many paged KV
// cache blocks as the rest holds, within a budget that leaves a reserve to the
// driver and the CUDA graphs.
//
// Everything is allocated once, at load, in one allocation carved into regions
// (each aligned to kRegionAlign): a forward pass allocates nothing, and a
// request is admitted only while KV blocks remain. Pure host arithmetic; the
// allocation is later work (issue #27).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace tandem::cuda {

constexpr size_t kRegionAlign = 256;

// What of the model the plan needs to know.
struct ModelDims {
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int d_ff = 0;
  int vocab = 0;
};

struct MemoryPlanRequest {
  size_t device_bytes = 0;  // memory the backend may use (e.g. what the device reports free)
  size_t reserve_bytes =
      0;  // of that, left unplanned: the driver's context, graphs, cuBLAS-free slack
  size_t weight_bytes =
      0;  // the repacked weights (sum of WeightLayout::total_bytes, norms included)
  ModelDims dims;
  DType kv_type = DType::F16;  // F16 or F32
  int kv_block_size = 16;      // positions per KV block
  int max_rows = 1;            // positions of the largest forward pass (the largest graph bucket)
  int max_context = 0;         // positions of the longest sequence: its blocks must fit
  size_t input_bytes = 0;      // a step's inputs (tokens, positions, block tables, remaps)
};

struct MemoryRegion {
  size_t offset = 0;
  size_t bytes = 0;
  size_t end() const { return offset + bytes; }
};

struct MemoryPlan {
  MemoryRegion weights;
  MemoryRegion activations;        // per-row buffers of one pass, max_rows rows
  MemoryRegion attention_scratch;  // the split-K partials of attention (attention_scratch_floats)
  MemoryRegion inputs;             // a step's inputs, input_bytes (fixed addresses for graphs)
  MemoryRegion kv_cache;           // kv_blocks blocks of kv_block_bytes
  size_t kv_block_bytes = 0;       // K and V of every layer for kv_block_size positions
  int kv_blocks = 0;
  size_t total_bytes = 0;  // end of the last region
};

// Floats of activation buffers one position of a forward pass needs (the CUDA
// forward pass's, cuda_model/cuda_transformer.cpp): the residual stream, its
// normed copy and a block's output, Q, K, V and the attention output, gate, up
// and their SwiGLU, and the logits.
int64_t activation_floats_per_row(const ModelDims& dims);

// The plan: weights first, then activations, attention scratch, inputs and KV blocks,
// with as many KV blocks as fit in device_bytes - reserve_bytes. Throws
// tandem::Error when the weights and buffers alone do not fit, or when fewer
// blocks fit than one sequence of max_context positions needs.
MemoryPlan plan_device_memory(const MemoryPlanRequest& request);

}  // namespace tandem::cuda
