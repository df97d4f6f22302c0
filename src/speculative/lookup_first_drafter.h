// A draft model with prompt lookup in front of it (the CLI's default with a
// draft model; `--no-draft-lookup` turns it off). Where the text repeats itself
// (edits, renames, quotes, code that reuses its names) an n-gram match proposes
// a long run for free; elsewhere the draft model drafts as usual. Per request
// and per match length it learns how often lookups are accepted, and takes the
// lookup only where that is at least as good as the draft model's own
// acceptance: a lookup costs no draft steps, so at equal acceptance it is the
// better proposal. The draft model's cache catches up on the tokens it did not
// draft at its next step (its step 0 feeds what it lacks).
#pragma once
#include <memory>
#include <unordered_map>

#include "speculative/adaptive_k.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"

namespace tandem {

class LookupFirstDrafter final : public Drafter {
 public:
  // Matches of max_n down to min_n tokens are taken; shorter ones are too often
  // a coincidence to beat a draft model.
  explicit LookupFirstDrafter(std::unique_ptr<ModelDrafter> model, int max_n = 4, int min_n = 2);
  // The lookups from another free drafter (a SuffixDrafter: lookups across
  // requests too), whose drafts carry a tag > 0 and its acceptance estimate.
  LookupFirstDrafter(std::unique_ptr<ModelDrafter> model, std::unique_ptr<Drafter> lookup);

  std::string name() const override {
    return (lookup_->name() == "ngram" ? "lookup+" : lookup_->name() + "+") + model_->name();
  }
  double propose(std::span<const DraftContext> reqs, std::span<const int> k,
                 std::vector<Draft>& out, const DraftStop* stop = nullptr) override;
  void sync(const DraftContext& req, const Draft& draft, int accepted) override;
  void finished(const DraftContext& req) override;
  void release(int request_id) override;
  // The draft model's costs and cache are its own.
  const DraftCostHints* cost_hints() const override { return model_->cost_hints(); }
  DraftMemory* memory() override { return model_->memory(); }

  // The longest lookup worth verifying at acceptance alpha: the run is cut where
  // the chance that the target accepts all of it falls below kMinReach.
  static int lookup_length(double alpha, int k);
  static constexpr double kMinReach = 0.25;

 private:
  AcceptanceEstimate& model_evidence(int request_id);

  std::unique_ptr<ModelDrafter> model_;
  // The lookups, and their evidence per request and match length. It starts at
  // 0.8, above the model's starting estimate, so that lookups get tried; a few
  // rejections put them below it.
  std::unique_ptr<Drafter> lookup_;
  std::unordered_map<int, AcceptanceEstimate> model_evidence_;  // by request id
  std::vector<Draft> lookups_;                                  // this round's, reused
  std::vector<int> model_k_;
};

}  // namespace tandem
