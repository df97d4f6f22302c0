#include "speculative/lookup_first_drafter.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tandem {

LookupFirstDrafter::LookupFirstDrafter(std::unique_ptr<ModelDrafter> model, int max_n, int min_n)
    : LookupFirstDrafter(std::move(model), std::make_unique<NgramDrafter>(max_n, min_n, 0.8)) {}

LookupFirstDrafter::LookupFirstDrafter(std::unique_ptr<ModelDrafter> model,
                                       std::unique_ptr<Drafter> lookup)
    : model_(std::move(model)), lookup_(std::move(lookup)) {
  check(model_ != nullptr, "lookup-first drafting needs a draft model");
  check(lookup_ != nullptr && lookup_->free_proposals(),
        "lookup-first drafting needs a lookup drafter whose proposals are free");
}

AcceptanceEstimate& LookupFirstDrafter::model_evidence(int request_id) {
  return model_evidence_.try_emplace(request_id, 0.97).first->second;
}

int LookupFirstDrafter::lookup_length(double alpha, int k) {
  if (k <= 0) return 0;
  if (alpha <= 0) return 1;
  if (alpha >= 1) return k;
  const int n = static_cast<int>(std::floor(std::log(kMinReach) / std::log(alpha)));
  return std::clamp(n, 1, k);
}

double LookupFirstDrafter::propose(std::span<const DraftContext> reqs, std::span<const int> k,
                                   std::vector<Draft>& out, const DraftStop* stop) {
  // Lookups first; the model drafts for the requests they do not serve.
  lookup_->propose(reqs, k, lookups_);
  model_k_.assign(k.begin(), k.end());
  for (size_t i = 0; i < reqs.size(); ++i) {
    Draft& l = lookups_[i];
    if (l.tokens.empty() || l.alpha < model_evidence(reqs[i].id).alpha()) {
      l.tokens.clear();
      continue;
    }
    l.tokens.resize(std::min<size_t>(l.tokens.size(), lookup_length(l.alpha, k[i])));
    model_k_[i] = 0;
  }
  const double step_ms = model_->propose(reqs, model_k_, out, stop);
  for (size_t i = 0; i < reqs.size(); ++i)
    if (!lookups_[i].tokens.empty()) std::swap(out[i], lookups_[i]);
  return step_ms;
}

void LookupFirstDrafter::sync(const DraftContext& req, const Draft& draft, int accepted) {
  if (draft.tag > 0)
    lookup_->sync(req, draft, accepted);
  else if (!draft.tokens.empty())
    model_evidence(req.id).update(accepted, accepted < static_cast<int>(draft.tokens.size()));
  model_->sync(req, draft, accepted);
}

void LookupFirstDrafter::finished(const DraftContext& req) {
  lookup_->finished(req);
  model_->finished(req);
}

void LookupFirstDrafter::release(int request_id) {
  lookup_->release(request_id);
  model_evidence_.erase(request_id);
  model_->release(request_id);
}

}  // namespace tandem
