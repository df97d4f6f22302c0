// Log-probabilities of emitted tokens, as an API reports them. They are those of
// the distribution the request draws from: the target's logits after the
// repetition penalty and any constraint mask, at the request's temperature,
// after top-k, top-p and min-p. A greedy request (temperature 0) reports the
// plain softmax of those logits (temperature 1, no filters), of which its token
// is the argmax. Tokens the filters removed have probability 0 and are not
// listed among the alternatives. Verified positions have bit-identical logits to
// plain decoding's, so speculation reports the same figures.
#pragma once
#include <vector>

#include "sampling/sampler.h"

namespace tandem {

struct TokenLogprob {
  int token = -1;
  float logprob = 0;
};

struct TokenLogprobs {
  TokenLogprob chosen;            // the emitted token
  std::vector<TokenLogprob> top;  // the most likely tokens, most likely first
};

// For `token` drawn from one row of n_vocab logits (penalty and mask applied):
// p is the request's distribution over that row (null for a greedy request),
// top_n the alternatives wanted.
TokenLogprobs token_logprobs(int token, const float* logits, int n_vocab,
                             const SamplingDistribution* p, int top_n);

}  // namespace tandem
