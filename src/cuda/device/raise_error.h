// tandem::Error thrown from the .cu files, which keep fmt (core/error.h) out of
// nvcc's sight.
#pragma once
#include <string>

namespace tandem::cuda {

[[noreturn]] void raise_error(const std::string& message);

}  // namespace tandem::cuda
