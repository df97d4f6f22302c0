// The engine sees a forward pass only through model/forward_pass.h: it cannot
// include the CUDA pass (the CLI chooses the device and hands it a factory).
#include "cuda_model/cuda_transformer.h"
