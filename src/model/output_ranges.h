// The token-id ranges a forward pass may restrict its LM head to
// (ForwardPass::restrict_output), checked in one place for every device.
#pragma once
#include <utility>
#include <vector>

#include "core/error.h"

namespace tandem {

// Throws tandem::Error for a range that is empty or leaves [0, vocab_size).
inline void check_output_ranges(const std::vector<std::pair<int, int>>& ranges, int vocab_size) {
  for (auto [b, e] : ranges)
    check(0 <= b && b < e && e <= vocab_size, "output range [{}, {}) outside the vocabulary {}", b,
          e, vocab_size);
}

}  // namespace tandem
