#include "spec/lookup_first_drafter.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/sequence.h"

namespace tandem {

LookupFirstDrafter::LookupFirstDrafter(std::unique_ptr<ModelDrafter> model, int max_n, int min_n)
    : model_(std::move(model)), lookup_(max_n, min_n, 0.8) {
  check(model_ != nullptr, "lookup-first drafting needs a draft model");
}

AcceptanceEstimate& LookupFirstDrafter::model_evidence(const Sequence& seq) {
  return model_evidence_.try_emplace(seq.id(), 0.97).first->second;
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
  lookup_.propose(seqs, k, lookups_);
  model_k_.assign(k.begin(), k.end());
  for (size_t i = 0; i < seqs.size(); ++i) {
    Draft& l = lookups_[i];
    if (l.tokens.empty() || l.alpha < model_evidence(*seqs[i]).alpha()) {
      l.tokens.clear();
      continue;
    }
    l.tokens.resize(std::min<size_t>(l.tokens.size(), lookup_length(l.alpha, k[i])));
    model_k_[i] = 0;
  }
  const double step_ms = model_->propose(seqs, model_k_, out, stop);
  for (size_t i = 0; i < seqs.size(); ++i)
    if (!lookups_[i].tokens.empty()) std::swap(out[i], lookups_[i]);
  return step_ms;
}

void LookupFirstDrafter::sync(const Sequence& seq, const Draft& draft, int accepted) {
  if (draft.tag > 0)
    lookup_.sync(seq, draft, accepted);
  else if (!draft.tokens.empty())
    model_evidence(seq).update(accepted, accepted < static_cast<int>(draft.tokens.size()));
  model_->sync(seq, draft, accepted);
}

void LookupFirstDrafter::release(const Sequence& seq) {
  lookup_.release(seq);
  model_evidence_.erase(seq.id());
  model_->release(seq);
}

}  // namespace tandem
