// New positions into the paged KV cache (cuda_kernels.h: kv_store): one thread
// per stored value, through the sequence's block table.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/cuda_kernels.h"
#include "cuda/device/check.cuh"
#include "cuda/device/kv_element.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;

// blockIdx.y: the row; x covers its row_elems values of both K and V.
template <typename KV>
__global__ void __launch_bounds__(kThreads)
    kv_store_kernel(const float* __restrict__ k, const float* __restrict__ v, int row_elems,
                    const int* __restrict__ seq, const int* __restrict__ pos,
                    const int* __restrict__ block_tables, int table_stride, KV* k_pool, KV* v_pool,
                    int block_size) {
  const int r = blockIdx.y;
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= row_elems) return;
  const int p = pos[r];
  const int64_t block = block_tables[int64_t{seq[r]} * table_stride + p / block_size];
  const int64_t dst = (block * block_size + p % block_size) * row_elems + i;
  store_kv(k_pool + dst, k[int64_t{r} * row_elems + i]);
  store_kv(v_pool + dst, v[int64_t{r} * row_elems + i]);
}

template <typename KV>
void launch(const float* k, const float* v, int rows, int row_elems, const int* seq, const int* pos,
            const int* block_tables, int table_stride, const PagedKV& kv, Stream stream) {
  const dim3 grid((row_elems + kThreads - 1) / kThreads, rows);
  kv_store_kernel<KV><<<grid, kThreads, 0, stream>>>(k, v, row_elems, seq, pos, block_tables,
                                                     table_stride, static_cast<KV*>(kv.k_pool),
                                                     static_cast<KV*>(kv.v_pool), kv.block_size);
}

}  // namespace

void kv_store(const float* k, const float* v, int rows, int row_elems, const int* seq,
              const int* pos, const int* block_tables, int table_stride, const PagedKV& kv,
              Stream stream) {
  if (rows < 1 || row_elems < 1) return;
  if (kv.block_size < 1) raise_error("cuda::kv_store: block size must be at least 1");
  if (kv.type == DType::F32) {
    launch<float>(k, v, rows, row_elems, seq, pos, block_tables, table_stride, kv, stream);
  } else if (kv.type == DType::F16) {
    launch<__half>(k, v, rows, row_elems, seq, pos, block_tables, table_stride, kv, stream);
  } else {
    raise_error("cuda::kv_store: the KV cache must be F32 or F16");
  }
  check_launch("cuda::kv_store");
}

}  // namespace tandem::cuda
