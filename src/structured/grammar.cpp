#include "structured/grammar.h"

#include <algorithm>
#include <functional>
#include <string_view>

#include "core/error.h"

namespace tandem::structured {

int GrammarBuilder::declare_rule(std::string name) {
  names_.push_back(std::move(name));
  patterns_.emplace_back();
  defined_.push_back(false);
  return static_cast<int>(names_.size()) - 1;
}

void GrammarBuilder::define_rule(int rule, Pattern p) {
  patterns_.at(rule) = std::move(p);
  defined_.at(rule) = true;
}

std::shared_ptr<const Grammar> GrammarBuilder::build(int root_rule, int max_rule_states) const {
  const int n_rules = static_cast<int>(names_.size());
  check(root_rule >= 0 && root_rule < n_rules, "internal: root rule {} is not declared", root_rule);
  for (int r = 0; r < n_rules; ++r)
    check(defined_[r], "internal: grammar rule '{}' is declared but not defined", names_[r]);

  std::vector<ByteSet> sets;
  for (const auto& p : patterns_) p.collect_byte_sets(sets);
  std::sort(sets.begin(), sets.end(), [](const ByteSet& a, const ByteSet& b) {
    return std::lexicographical_compare(
        reinterpret_cast<const uint8_t*>(&a), reinterpret_cast<const uint8_t*>(&a) + sizeof a,
        reinterpret_cast<const uint8_t*>(&b), reinterpret_cast<const uint8_t*>(&b) + sizeof b);
  });
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  const ByteClasses classes = ByteClasses::partition(sets);

  std::vector<RuleDfa> dfas;
  std::vector<int> offset(n_rules + 1, 0);
  for (int r = 0; r < n_rules; ++r) {
    const int64_t by_table = kMaxTableEntries / classes.count() - offset[r];
    const int budget =
        static_cast<int>(std::min<int64_t>({kMaxStates - offset[r], by_table, max_rule_states}));
    check(budget > 0, "the schema is too large: its grammar exceeds {} states",
          std::min<int64_t>(kMaxStates, kMaxTableEntries / classes.count()));
    try {
      dfas.push_back(build_rule_dfa(patterns_[r], classes, budget));
    } catch (const Error& e) {
      // Name the limit that was reached: the grammar's, not what was left of it.
      if (budget < max_rule_states &&
          std::string_view(e.what()).find("too large") != std::string_view::npos)
        fail("the schema is too large: its grammar exceeds {} states ({} byte classes)",
             offset[r] + budget, classes.count());
      throw;
    }
    check(!dfas.back().accepting[0], "internal: grammar rule '{}' matches the empty string",
          names_[r]);
    offset[r + 1] = offset[r] + dfas.back().n_states;
  }

  auto g = std::make_shared<Grammar>();
  g->n_classes_ = classes.count();
  g->class_of_ = classes.class_of;
  g->root_start_ = offset[root_rule];
  const int n_states = offset[n_rules];
  g->next_.reserve(static_cast<size_t>(n_states) * g->n_classes_);
  g->call_begin_.push_back(0);
  for (int r = 0; r < n_rules; ++r) {
    const RuleDfa& d = dfas[r];
    for (int32_t t : d.next) g->next_.push_back(t >= 0 ? t + offset[r] : -1);
    for (int s = 0; s < d.n_states; ++s) {
      g->accepting_.push_back(d.accepting[s]);
      for (auto [callee, resume] : d.calls[s])
        g->calls_.push_back({offset[callee], resume + offset[r]});
      g->call_begin_.push_back(static_cast<uint32_t>(g->calls_.size()));
      g->exits_.push_back(d.accepting[s] || !d.calls[s].empty());
    }
  }

  // A rule that can reach a call of itself without reading a byte would make a
  // parser push frames forever: look for such a cycle among start-state calls.
  std::vector<int> color(n_rules, 0);  // 0 new, 1 on the path, 2 done
  std::function<void(int)> visit = [&](int r) {
    color[r] = 1;
    for (auto [callee, resume] : dfas[r].calls[0]) {
      if (color[callee] == 1)
        fail("the schema is left-recursive: '{}' can contain itself before any text",
             names_[callee]);
      if (color[callee] == 0) visit(callee);
    }
    color[r] = 2;
  };
  for (int r = 0; r < n_rules; ++r)
    if (color[r] == 0) visit(r);
  return g;
}

}  // namespace tandem::structured
