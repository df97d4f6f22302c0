#include "spec/lookup_first_drafter.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/sequence.h"
#include "spec/ngram_drafter.h"

namespace tandem {

LookupFirstDrafter::LookupFirstDrafter(std::unique_ptr<ModelDrafter> model, int max_n, int min_n)
    : model_(std::move(model)), max_n_(max_n), min_n_(min_n) {
  check(model_ != nullptr, "lookup-first drafting needs a draft model");
  check(min_n_ >= 1 && max_n_ >= min_n_, "lookup match lengths {}..{} are not a range", min_n_,
        max_n_);
}

LookupFirstDrafter::Evidence& LookupFirstDrafter::evidence(const Sequence& seq) {
  auto [it, fresh] = evidence_.try_emplace(seq.id());
  // A lookup starts at 0.8, worth 2 trials: above the model's starting estimate,
  // so that lookups get tried; a few rejections put them below it.
  if (fresh) it->second.lookup.assign(max_n_ + 1, AcceptanceEstimate(0.98, 1.6, 2));
  return it->second;
}

int LookupFirstDrafter::lookup_length(double alpha, int k) {
  if (k <= 0) return 0;
  if (alpha <= 0) return 1;
  if (alpha >= 1) return k;
  const int n = static_cast<int>(std::floor(std::log(kMinReach) / std::log(alpha)));
  return std::clamp(n, 1, k);
}

double LookupFirstDrafter::propose(const std::vector<Sequence*>& seqs, const std::vector<int>& k,
                                   std::vector<Draft>& out, const DraftStop* stop) {
  // Lookups first; the model drafts for the requests they do not serve.
  std::vector<Draft> lookups(seqs.size());
  model_k_.assign(k.begin(), k.end());
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (k[i] <= 0) continue;
    Evidence& ev = evidence(*seqs[i]);
    int n = 0;
    auto tokens = NgramDrafter::lookup(seqs[i]->tokens(), k[i], max_n_, min_n_, &n);
    if (tokens.empty() || ev.lookup[n].alpha() < ev.model.alpha()) continue;
    tokens.resize(std::min<size_t>(tokens.size(), lookup_length(ev.lookup[n].alpha(), k[i])));
    lookups[i].tokens = std::move(tokens);
    lookups[i].tag = n;
    lookups[i].alpha = ev.lookup[n].alpha();
    model_k_[i] = 0;
  }
  const double step_ms = model_->propose(seqs, model_k_, out, stop);
  for (size_t i = 0; i < seqs.size(); ++i)
    if (!lookups[i].tokens.empty()) out[i] = std::move(lookups[i]);
  return step_ms;
}

void LookupFirstDrafter::sync(const Sequence& seq, const Draft& draft, int accepted) {
  if (!draft.tokens.empty()) {
    Evidence& ev = evidence(seq);
    const bool rejected = accepted < static_cast<int>(draft.tokens.size());
    if (draft.tag > 0 && draft.tag <= max_n_)
      ev.lookup[draft.tag].update(accepted, rejected);
    else
      ev.model.update(accepted, rejected);
  }
  model_->sync(seq, draft, accepted);
}

void LookupFirstDrafter::release(const Sequence& seq) {
  evidence_.erase(seq.id());
  model_->release(seq);
}

}  // namespace tandem
