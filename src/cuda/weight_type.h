// The one switch from a weight type known at run time (the same for a whole
// team or warp on the device) to the decoders' compile-time one:
// f(std::integral_constant<DType, T>{}) for each type tandem loads. Any other
// type reads as Q6_K; the host admits none (checks that name an unsupported
// type, as cuda::gemm's, come before).
#pragma once
#include <type_traits>

#include "core/dtype.h"
#include "cuda/host_device.h"

namespace tandem::cuda {

// f is a device lambda in the kernels and a host one in the host tests: the
// check that a __host__ __device__ function calls only what both sides have is
// left to the instantiation that runs.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename F>
TANDEM_HD void with_weight_type(DType type, F&& f) {
  switch (type) {
    case DType::F32:
      return f(std::integral_constant<DType, DType::F32>{});
    case DType::F16:
      return f(std::integral_constant<DType, DType::F16>{});
    case DType::BF16:
      return f(std::integral_constant<DType, DType::BF16>{});
    case DType::Q4_0:
      return f(std::integral_constant<DType, DType::Q4_0>{});
    case DType::Q4_1:
      return f(std::integral_constant<DType, DType::Q4_1>{});
    case DType::Q5_0:
      return f(std::integral_constant<DType, DType::Q5_0>{});
    case DType::Q8_0:
      return f(std::integral_constant<DType, DType::Q8_0>{});
    case DType::Q4_K:
      return f(std::integral_constant<DType, DType::Q4_K>{});
    case DType::Q5_K:
      return f(std::integral_constant<DType, DType::Q5_K>{});
    default:
      return f(std::integral_constant<DType, DType::Q6_K>{});
  }
}

}  // namespace tandem::cuda
