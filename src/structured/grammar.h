// A compiled grammar: a set of rules, each a deterministic automaton over bytes
// whose edges may also call another rule (a recursive transition network, the
// automaton form of a context-free grammar). All rules' states share one
// numbering so that a parser configuration is a stack of state numbers.
//
// Immutable once built: one Grammar may serve any number of matchers on any
// threads.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "structured/automaton.h"
#include "structured/pattern.h"

namespace tandem::structured {

class Grammar {
 public:
  struct Call {
    int32_t callee_start;  // the called rule's start state
    int32_t resume;        // the caller's state once the callee has matched
  };

  int n_states() const { return static_cast<int>(accepting_.size()); }
  int root_start() const { return root_start_; }
  // The state after byte b, or -1.
  int32_t next(int32_t state, uint8_t b) const {
    return next_[static_cast<size_t>(state) * n_classes_ + class_of_[b]];
  }
  // A rule may end in this state (its caller resumes; at the root, the document is complete).
  bool accepting(int32_t state) const { return accepting_[state]; }
  // Calls of other rules that may start in this state.
  const Call* calls_begin(int32_t state) const { return calls_.data() + call_begin_[state]; }
  const Call* calls_end(int32_t state) const { return calls_.data() + call_begin_[state + 1]; }
  // Whether a parser in this state may leave the current rule's automaton
  // (end it, or call another rule) instead of reading a byte within it.
  bool has_exits(int32_t state) const { return exits_[state]; }

 private:
  friend class GrammarBuilder;
  int n_classes_ = 0;
  std::array<uint8_t, 256> class_of_{};
  std::vector<int32_t> next_;
  std::vector<uint8_t> accepting_, exits_;
  std::vector<uint32_t> call_begin_;
  std::vector<Call> calls_;
  int root_start_ = 0;
};

// Rules are declared first (so that patterns can call rules not yet defined,
// for recursion), then defined, then built together.
class GrammarBuilder {
 public:
  // Limits that keep a grammar's memory and build time bounded (a schema
  // beyond them is refused): the states of the whole grammar, of one rule's
  // automaton (a regex whose automaton grows past it is usually exponential),
  // and the entries of the transition table (states times byte classes, 4
  // bytes each: 64 MiB).
  static constexpr int kMaxStates = 1 << 20;
  static constexpr int kMaxRuleStates = 1 << 16;
  static constexpr int64_t kMaxTableEntries = int64_t{1} << 24;

  int declare_rule(std::string name);
  void define_rule(int rule, Pattern p);

  // Throws tandem::Error for an undefined rule, a rule that matches the empty
  // string or nothing, a rule that can call itself before reading a byte, or a
  // grammar beyond the limits (max_rule_states: a lower limit for one rule).
  std::shared_ptr<const Grammar> build(int root_rule, int max_rule_states = kMaxRuleStates) const;

 private:
  std::vector<std::string> names_;
  std::vector<Pattern> patterns_;
  std::vector<bool> defined_;
};

}  // namespace tandem::structured
