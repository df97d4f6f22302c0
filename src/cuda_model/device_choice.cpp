#include "cuda_model/device_choice.h"

#include "core/error.h"
#include "cuda/device.h"

namespace tandem::cuda_model {

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  fail("--device: '{}' is not a device (cpu or cuda)", name);
}

std::string cuda_unavailable_reason() {
#if defined(TANDEM_HAVE_CUDA)
  if (cuda::device_count() == 0) return "--device cuda: no CUDA device found";
  return "";
#else
  return "--device cuda: this build has no CUDA kernels (configure with -DTANDEM_CUDA=ON)";
#endif
}

ForwardPassFactory forward_pass_factory(Device device, const CudaOptions& options) {
  if (device == Device::Cpu) return {};
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) fail("{}", why);
#if defined(TANDEM_HAVE_CUDA)
  return [options](const Model& model, ThreadPool&, const ForwardPassSpec& spec) {
    return std::make_unique<CudaTransformer>(model, spec, options);
  };
#else
  (void)options;
  return {};  // not reached: cuda_unavailable_reason() said why
#endif
}

}  // namespace tandem::cuda_model
