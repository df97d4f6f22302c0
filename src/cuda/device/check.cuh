// A CUDA runtime call's result, checked: anything but success throws
// tandem::Error naming the call.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "cuda/device/raise_error.h"

namespace tandem::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) raise_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace tandem::cuda
