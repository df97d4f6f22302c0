// Logits for every position of a token sequence, from an empty cache: what
// `tandem logits` writes and what the reference comparisons check.
#pragma once
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace tandem {

class Model;

// ids.size() rows of vocab_size logits.
std::vector<float> prompt_logits(const Model& model, ThreadPool& pool, const std::vector<int>& ids,
                                 DType kv_type = DType::F16);

}  // namespace tandem
