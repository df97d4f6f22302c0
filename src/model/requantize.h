// A model's matrices requantized at load into fewer bits a weight: what a draft
// model is loaded with by default (--draft-quant), since a draft step's cost is
// the bytes of its weights and its tokens are only proposals. The target
// verifies every one, so the output is the target's whatever the draft's
// weights; only how often drafts are accepted can change (docs/decisions.md,
// "A draft model's matrices in Q4_0").
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/aligned.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace tandem {

// What a load requantizes: every matrix of the layers and the output matrix (the
// LM head) into `type` where requantizes() says so. nullopt (in Model::load):
// every matrix as the file stores it.
struct Requantization {
  DType type = DType::Q4_0;
};

// --draft-quant's value: "none" (nullopt) or a type that requantize() makes
// ("q4_0"); the one list of the values. Throws tandem::Error naming the value
// otherwise.
std::optional<Requantization> parse_requantization(const std::string& value);

// Whether W is requantized into `to`: stored in more bytes a weight than `to`
// takes, and with rows whose length is a multiple of `to`'s block. The rest
// (already as small, or of a shape `to` cannot hold) stays as it is.
bool requantizes(const TensorView& W, DType to);

// W's rows dequantized and quantized into `to` (round to nearest, GGML's block
// layout), in parallel on `pool`; `requantizes(W, to)` must hold.
AlignedVector<uint8_t> requantize(const TensorView& W, DType to, ThreadPool& pool);

}  // namespace tandem
