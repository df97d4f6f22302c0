// The model layer does not see the CUDA backend (src/cuda): the CUDA forward
// pass lives above both (src/cuda_model), so the model cannot include it.
#include "cuda/weight_layout.h"
