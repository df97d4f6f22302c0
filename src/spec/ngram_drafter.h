// Prompt lookup: if the last n tokens (n = max_n down to 1) occurred earlier in
// the prompt or the generated text, propose what followed their most recent
// earlier occurrence. No model, near-zero cost, and very effective when the
// output copies from the input (edits, summaries with quotes, code refactors).
#pragma once
#include "spec/drafter.h"

namespace tandem {

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(int max_n = 4) : max_n_(max_n) {}
  std::string name() const override { return "ngram"; }
  void propose(const std::vector<Sequence*>& seqs, const std::vector<int>& k,
               std::vector<Draft>& out) override;
  bool uses_model() const override { return false; }

  // The lookup itself, on a plain token list: up to k continuation tokens.
  static std::vector<int> lookup(const std::vector<int>& tokens, int k, int max_n);

 private:
  int max_n_;
};

}  // namespace tandem
