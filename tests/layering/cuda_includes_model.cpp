// The CUDA kernels' layer (src/cuda) sits below the model: it cannot include
// the model's headers (the CUDA forward pass, src/cuda_model, joins them).
#include "model/forward_pass.h"
