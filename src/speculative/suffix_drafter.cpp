#include "speculative/suffix_drafter.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "speculative/ngram_drafter.h"

namespace tandem {
namespace {

constexpr size_t kContinuationReserve = 64;  // tokens, as long as drafts go

// How many tokens before `from` equal the tokens before the end of `tokens`
// (the match's full length, up to SuffixIndex::kMaxMatch).
int match_length(std::span<const int> tokens, int from) {
  const int len = static_cast<int>(tokens.size());
  int n = 0;
  while (n < SuffixIndex::kMaxMatch && from - 1 - n >= 0 &&
         tokens[from - 1 - n] == tokens[len - 1 - n])
    ++n;
  return n;
}

}  // namespace

int SuffixDrafter::tag_of(int match_length, bool shared) {
  if (match_length <= 0) return 0;
  // 1-4 exactly, then 5-7, 8-15, 16-31, 32 and more: long matches are rare and
  // alike in how reliable they are.
  const int bucket = match_length <= 4   ? match_length
                     : match_length < 8  ? 5
                     : match_length < 16 ? 6
                     : match_length < 32 ? 7
                                         : 8;
  return shared ? kBuckets + bucket : bucket;
}

SuffixDrafter::SuffixDrafter(SuffixDrafterOptions options)
    : opt_(options),
      index_(options.budget_tokens),
      overall_(2 * kBuckets + 1, AcceptanceEstimate(0.995, 1, 2)) {
  check(opt_.min_n >= 1 && opt_.max_n >= opt_.min_n, "suffix drafter: lookup lengths {}..{}",
        opt_.min_n, opt_.max_n);
  check(opt_.branches >= 1, "suffix drafter: branches must be >= 1, got {}", opt_.branches);
  own_.reserve(kContinuationReserve);
  shared_.reserve(kContinuationReserve);
  conts_.resize(2);
  for (auto& c : conts_) c.reserve(kContinuationReserve);
}

std::vector<AcceptanceEstimate>& SuffixDrafter::evidence(int request_id) {
  auto [it, fresh] = evidence_.try_emplace(request_id);
  if (fresh)
    for (int t = 0; t <= 2 * kBuckets; ++t)
      it->second.emplace_back(0.98, 2 * std::max(opt_.prior, overall_[t].alpha()), 2);
  return it->second;
}

void SuffixDrafter::propose_one(const DraftContext& req, int k, Draft& d) {
  int n = 0, from = 0;
  NgramDrafter::lookup_into(req.tokens, k, opt_.max_n, opt_.min_n, own_, &n, &from);
  const int own_len = n > 0 ? match_length(req.tokens, from) : 0;
  const SuffixIndex::Match shared =
      index_.lookup(req.tenant, req.tokens, k, opt_.min_shared_match, shared_);
  // The longer match wins; the request's own text on a tie.
  const bool use_shared = shared.length > own_len;
  std::vector<int>& best = use_shared ? shared_ : own_;
  std::vector<int>& other = use_shared ? own_ : shared_;
  if (opt_.branches > 1 && !req.constraint && !other.empty() && other != best) {
    conts_[0].assign(best.begin(), best.end());
    conts_[1].assign(other.begin(), other.end());
    NgramDrafter::merge_into(std::span<const std::vector<int>>(conts_.data(), 2), d);
  } else {
    d.tokens.assign(best.begin(), best.end());
    if (req.constraint) NgramDrafter::keep_within(*req.constraint, d.tokens);
  }
  d.tag = d.tokens.empty() ? 0 : tag_of(use_shared ? shared.length : own_len, use_shared);
  d.alpha = evidence(req.id)[d.tag].alpha();
}

double SuffixDrafter::propose(std::span<const DraftContext> reqs, std::span<const int> k,
                              std::vector<Draft>& out, const DraftStop*) {
  const auto t0 = std::chrono::steady_clock::now();
  out.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    out[i].clear();
    if (k[i] > 0) propose_one(reqs[i], k[i], out[i]);
  }
  // The whole lookup is one "step": its cost does not grow with K.
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void SuffixDrafter::sync(const DraftContext& req, const Draft& draft, int accepted) {
  // `accepted` counts the main chain's tokens: what the match's evidence is about.
  if (draft.tokens.empty() || draft.tag <= 0 || draft.tag > 2 * kBuckets) return;
  const bool rejected = accepted < draft.chain_length();
  evidence(req.id)[draft.tag].update(accepted, rejected);
  overall_[draft.tag].update(accepted, rejected);
}

void SuffixDrafter::finished(const DraftContext& req) { index_.add(req.tenant, req.tokens); }

void SuffixDrafter::release(int request_id) { evidence_.erase(request_id); }

}  // namespace tandem
