#include "cuda/device/raise_error.h"

#include "core/error.h"

namespace tandem::cuda {

void raise_error(const std::string& message) { throw Error(message); }

}  // namespace tandem::cuda
