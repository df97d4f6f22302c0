// Named weight tensors of one model, under GGUF tensor names ("blk.3.attn_q.weight"),
// whatever file format they came from. Views point into memory maps or into
// buffers the set owns (tensors converted at load, such as permuted q/k).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tandem {

struct TensorSet {
  std::string source;  // file or directory, for error messages
  std::map<std::string, TensorView> tensors;
  std::vector<std::shared_ptr<const void>> keep_alive;  // mmaps and owned buffers

  const TensorView* find(const std::string& name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
};

}  // namespace tandem
