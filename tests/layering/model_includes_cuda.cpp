// The CUDA backend (src/cuda) is used by nothing above it yet: the model does
// not declare it, so it cannot include it.
#include "cuda/weight_layout.h"
