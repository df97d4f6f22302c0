// Token masks for parser states, by walking the vocabulary's trie.
//
// The walk is split so that most of it is computed once per grammar state and
// reused: for a configuration whose rule automaton is in state s, the tokens
// that the automaton reads entirely without leaving its rule depend on s alone
// (the "frame-local" set, cached per state). What else is allowed starts at a
// trie node where the automaton reaches a state from which the rule may end or
// call another (an "exit"); only the subtrees below those nodes are walked
// with the whole stack, every time. Inside a string, say, the frame-local set
// is nearly the whole vocabulary, and only tokens that close the string and
// go on past the end of the enclosing object need the stack.
//
// Not thread-safe (the caches and the parser's stack pool grow as it works).
#pragma once
#include <memory>
#include <vector>

#include "structured/pushdown_parser.h"
#include "structured/token_mask.h"
#include "structured/token_vocabulary.h"

namespace tandem::structured {

class MaskComputer {
 public:
  MaskComputer(PushdownParser& parser, std::shared_ptr<const TokenVocabulary> vocab);

  // mask (resized to the vocabulary) = the tokens allowed after `state`.
  void fill(const ParserState& state, TokenMask& mask);
  const TokenVocabulary& vocab() const { return *vocab_; }

 private:
  struct FrameLocal {
    std::vector<uint64_t> bits;  // the allowed ids as a bitmap when there are many
    std::vector<int32_t> ids;    // ... or as a list when there are few
    std::vector<std::pair<int32_t, int32_t>> exits;  // (trie node, automaton state there), by state
  };
  const FrameLocal& frame_local(int32_t state);
  // Adds the tokens below `node` that are allowed from configurations `from`.
  void walk_below(int32_t node, const std::vector<Config>& from, TokenMask& mask);

  PushdownParser& parser_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<std::unique_ptr<FrameLocal>> cache_;  // by grammar state
  std::vector<std::vector<Config>> levels_;  // walk_below: configurations by depth below `node`
  std::vector<Config> closure_, exit_closure_;
  std::vector<int32_t> walk_states_;  // frame_local: automaton state by depth
  TokenMask scratch_;                 // frame_local: the allowed ids as they are found
};

}  // namespace tandem::structured
