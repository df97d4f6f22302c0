// Counters of one request's generation, filled by the speculative runner as it
// prefills and decodes, and reported with the result.
#pragma once

namespace tandem {

// Times in milliseconds.
struct RequestStats {
  int n_prompt = 0;
  // Prompt tokens found in the prefix cache when first admitted (their prefill
  // was skipped): OpenAI's usage.prompt_tokens_details.cached_tokens.
  int n_cached_prompt = 0;
  int n_generated = 0;
  int rounds = 0;       // target forward passes after the prefill (decode steps or verifies)
  int spec_rounds = 0;  // rounds that verified at least one drafted token
  int drafted = 0;      // drafted tokens proposed to the target
  // Drafted tokens the target accepted that are part of the output (a request
  // that ends inside a round leaves the rest of an accepted draft unused).
  int accepted = 0;
  int rejections = 0;  // rounds that ended by rejecting a draft
  // Draft trees: positions verified beside the main chains, and rounds whose
  // accepted path left the main chain (a sibling or another lookup won).
  int tree_nodes = 0;
  int off_chain_accepts = 0;
  double prefill_ms = 0, decode_ms = 0;
  double draft_ms = 0, verify_ms = 0;  // decode_ms = draft_ms + verify_ms + the rest
  double spec_verify_ms = 0;           // the part of verify_ms in rounds with drafts

  // One decode round of this request: `n_drafted` tokens verified, `n_kept` of
  // them accepted into the output, the draft rejected or not; the round's
  // drafting and verifying took draft_ms and verify_ms.
  void add_round(int n_drafted, int n_kept, bool rejected, double round_draft_ms,
                 double round_verify_ms) {
    add_round(n_drafted, n_kept, rejected, round_draft_ms, round_verify_ms, 0, false);
  }
  // The same for a draft tree of `n_tree_nodes` nodes beside its main chain
  // (n_drafted: its depth), whose accepted path left the main chain or not.
  void add_round(int n_drafted, int n_kept, bool rejected, double round_draft_ms,
                 double round_verify_ms, int n_tree_nodes, bool off_chain) {
    tree_nodes += n_tree_nodes;
    off_chain_accepts += off_chain;
    rounds++;
    if (n_drafted > 0) {
      spec_rounds++;
      drafted += n_drafted;
      accepted += n_kept;
      rejections += rejected;
      spec_verify_ms += round_verify_ms;
    }
    draft_ms += round_draft_ms;
    verify_ms += round_verify_ms;
  }

  double acceptance_rate() const { return drafted ? double(accepted) / drafted : 0.0; }
  // Tokens that decoding produced: the first generated token comes from the prefill.
  int decoded() const { return n_generated > 0 ? n_generated - 1 : 0; }
  double decode_tok_per_s() const { return decode_ms > 0 ? decoded() * 1000.0 / decode_ms : 0.0; }
  // Tokens emitted per round after the prefill (1 for plain decoding).
  double tokens_per_round() const { return rounds ? double(decoded()) / rounds : 0.0; }
};

}  // namespace tandem
