// The embedding lookup (cuda_kernels.h: get_rows): a thread block per looked-up
// row, thread t decoding groups t, t + 128, ... with group_decode.h, so each
// float is the reference dequantization's, bit for bit.
#include <cuda_runtime.h>

#include "cuda/cuda_kernels.h"
#include "cuda/device/check.cuh"
#include "cuda/group_decode.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 128;

template <DType T>
__global__ void __launch_bounds__(kThreads)
    get_rows_kernel(WeightPlanes w, int64_t k, const int* __restrict__ ids,
                    float* __restrict__ out) {
  const int64_t row = ids[blockIdx.x];
  float* dst = out + int64_t{blockIdx.x} * k;
  for (int64_t g = threadIdx.x; g < k / kGroup; g += kThreads) {
    float v[kGroup];
    decode_group<T>(w, row, g, v);
    for (int i = 0; i < kGroup; ++i) dst[g * kGroup + i] = v[i];
  }
}

template <DType T>
void launch(const DeviceMatrix& W, const int* ids, int rows, float* out, Stream stream) {
  get_rows_kernel<T>
      <<<rows, kThreads, 0, stream>>>(weight_planes(W.layout, W.data), W.layout.k, ids, out);
}

}  // namespace

void get_rows(const DeviceMatrix& W, const int* ids, int rows, float* out, Stream stream) {
  if (rows < 1) return;
  switch (W.layout.type) {
    case DType::F32:
      launch<DType::F32>(W, ids, rows, out, stream);
      break;
    case DType::F16:
      launch<DType::F16>(W, ids, rows, out, stream);
      break;
    case DType::BF16:
      launch<DType::BF16>(W, ids, rows, out, stream);
      break;
    case DType::Q4_0:
      launch<DType::Q4_0>(W, ids, rows, out, stream);
      break;
    case DType::Q4_1:
      launch<DType::Q4_1>(W, ids, rows, out, stream);
      break;
    case DType::Q5_0:
      launch<DType::Q5_0>(W, ids, rows, out, stream);
      break;
    case DType::Q8_0:
      launch<DType::Q8_0>(W, ids, rows, out, stream);
      break;
    case DType::Q4_K:
      launch<DType::Q4_K>(W, ids, rows, out, stream);
      break;
    case DType::Q5_K:
      launch<DType::Q5_K>(W, ids, rows, out, stream);
      break;
    case DType::Q6_K:
      launch<DType::Q6_K>(W, ids, rows, out, stream);
      break;
    default:
      raise_error("cuda::get_rows: no kernel for this weight type");
  }
  check_launch("cuda::get_rows");
}

}  // namespace tandem::cuda
