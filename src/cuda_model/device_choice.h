// --device cpu|cuda: the forward pass a front end asks for, as the factory the
// engine and a draft model take (model/forward_pass.h). Built in every build,
// so that asking for CUDA where it cannot run is a clear error, never a crash.
#pragma once
#include <string>

#include "cuda_model/cuda_transformer.h"
#include "model/forward_pass.h"

namespace tandem::cuda_model {

enum class Device { Cpu, Cuda };

// "cpu" or "cuda"; throws tandem::Error naming --device for anything else.
Device parse_device(const std::string& name);

// Why --device cuda cannot run here: "" when it can; else the error, e.g.
// "--device cuda: this build has no CUDA kernels (configure with
// -DTANDEM_CUDA=ON)" or "--device cuda: no CUDA device found".
std::string cuda_unavailable_reason();

// The factory for `device`: empty for the CPU (the engine's default), the CUDA
// pass for cuda. Throws tandem::Error with cuda_unavailable_reason() when CUDA
// cannot run here.
ForwardPassFactory forward_pass_factory(Device device, const CudaOptions& options = {});

}  // namespace tandem::cuda_model
