// The control: the CUDA forward pass's layer sees the model's interface and
// the CUDA kernels' headers, which it declares.
#include "cuda/cuda_kernels.h"
#include "model/forward_pass.h"
