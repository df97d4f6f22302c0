#include "structured/automaton.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.h"

namespace tandem::structured {
namespace {

struct Nfa {
  struct Edge {
    enum Kind : uint8_t { Epsilon, Bytes, Call } kind;
    int to;
    ByteSet bytes;
    int rule = -1;
  };
  std::vector<std::vector<Edge>> edges;
  size_t limit;

  int add_state() {
    if (edges.size() >= limit)
      fail("the schema is too large: its automaton exceeds {} states", limit);
    edges.emplace_back();
    return static_cast<int>(edges.size()) - 1;
  }
  void epsilon(int from, int to) { edges[from].push_back({Edge::Epsilon, to, {}}); }
};

struct Fragment {
  int start, end;
};

Fragment build(const Pattern& p, Nfa& nfa);

Fragment build_repeat(const Pattern& p, Nfa& nfa) {
  const Pattern& item = p.items()[0];
  const int start = nfa.add_state();
  int cur = start;
  for (int i = 0; i < p.min(); ++i) {
    Fragment f = build(item, nfa);
    nfa.epsilon(cur, f.start);
    cur = f.end;
  }
  const int end = nfa.add_state();
  if (p.max() == -1) {
    Fragment f = build(item, nfa);
    nfa.epsilon(cur, f.start);
    nfa.epsilon(f.end, cur);
    nfa.epsilon(cur, end);
    return {start, end};
  }
  for (int i = p.min(); i < p.max(); ++i) {
    nfa.epsilon(cur, end);
    Fragment f = build(item, nfa);
    nfa.epsilon(cur, f.start);
    cur = f.end;
  }
  nfa.epsilon(cur, end);
  return {start, end};
}

// Members x0..xn-1 with the present ones separated: tail[k][c] is the entry of
// the rest after member k-1 with c members present so far, shared by every way
// of reaching it, so that the automaton grows linearly with the number of
// members (times the counts tracked). Counts are tracked up to `cap`: the
// maximum when there is one, else the minimum (every count from it on is alike).
Fragment build_members(const Pattern& p, Nfa& nfa) {
  const auto& items = p.items();
  const auto& required = p.required();
  const int n = static_cast<int>(items.size());
  const int lo = p.min(), hi = p.max();
  const int cap = std::min(hi >= 0 ? hi : lo, n);
  auto after_one_more = [&](int c) { return std::min(c + 1, cap); };
  const bool may_add = hi != 0;
  const int start = nfa.add_state();
  const int end = nfa.add_state();
  std::vector<std::vector<int>> tail(n + 1, std::vector<int>(cap + 1));
  for (int c = 0; c <= cap; ++c) {
    tail[n][c] = nfa.add_state();
    if (c >= lo) nfa.epsilon(tail[n][c], end);
  }
  for (int k = n - 1; k >= 0; --k) {
    for (int c = 0; c <= cap; ++c) {
      tail[k][c] = nfa.add_state();
      if (!required[k]) nfa.epsilon(tail[k][c], tail[k + 1][c]);
      if (!may_add || (hi >= 0 && c + 1 > hi)) continue;
      Fragment sep = build(p.separator(), nfa);
      Fragment item = build(items[k], nfa);
      nfa.epsilon(tail[k][c], sep.start);
      nfa.epsilon(sep.end, item.start);
      nfa.epsilon(item.end, tail[k + 1][after_one_more(c)]);
    }
  }
  // The first present member: any member up to and including the first required one.
  bool any_required = false;
  for (int j = 0; j < n && may_add; ++j) {
    Fragment item = build(items[j], nfa);
    nfa.epsilon(start, item.start);
    nfa.epsilon(item.end, tail[j + 1][after_one_more(0)]);
    if (required[j]) {
      any_required = true;
      break;
    }
  }
  if (!any_required && lo == 0) nfa.epsilon(start, end);
  return {start, end};
}

Fragment build(const Pattern& p, Nfa& nfa) {
  switch (p.kind()) {
    case Pattern::Kind::Empty: {
      int s = nfa.add_state();
      return {s, s};
    }
    case Pattern::Kind::Bytes:
    case Pattern::Kind::Call: {
      int s = nfa.add_state(), e = nfa.add_state();
      if (p.kind() == Pattern::Kind::Bytes)
        nfa.edges[s].push_back({Nfa::Edge::Bytes, e, p.byte_set()});
      else
        nfa.edges[s].push_back({Nfa::Edge::Call, e, {}, p.rule()});
      return {s, e};
    }
    case Pattern::Kind::Seq: {
      Fragment f = build(p.items()[0], nfa);
      for (size_t i = 1; i < p.items().size(); ++i) {
        Fragment g = build(p.items()[i], nfa);
        nfa.epsilon(f.end, g.start);
        f.end = g.end;
      }
      return f;
    }
    case Pattern::Kind::Alt: {
      int s = nfa.add_state(), e = nfa.add_state();
      for (const auto& item : p.items()) {
        Fragment f = build(item, nfa);
        nfa.epsilon(s, f.start);
        nfa.epsilon(f.end, e);
      }
      return {s, e};
    }
    case Pattern::Kind::Repeat:
      return build_repeat(p, nfa);
    case Pattern::Kind::Members:
      return build_members(p, nfa);
  }
  fail("internal: unknown pattern kind");
}

void epsilon_closure(const Nfa& nfa, std::vector<int>& set, std::vector<uint8_t>& seen) {
  for (int s : set) seen[s] = 1;
  for (size_t i = 0; i < set.size(); ++i)
    for (const auto& e : nfa.edges[set[i]])
      if (e.kind == Nfa::Edge::Epsilon && !seen[e.to]) {
        seen[e.to] = 1;
        set.push_back(e.to);
      }
  for (int s : set) seen[s] = 0;
  std::sort(set.begin(), set.end());
}

}  // namespace

ByteClasses ByteClasses::partition(const std::vector<ByteSet>& sets) {
  ByteClasses c;
  std::array<int, 256> cls{};  // all bytes in class 0
  int n = 1;
  for (const ByteSet& s : sets) {
    // Split every class into its part inside s and its part outside.
    std::map<std::pair<int, bool>, int> renumber;
    std::array<int, 256> next{};
    for (int b = 0; b < 256; ++b) {
      auto key = std::make_pair(cls[b], s.has(static_cast<uint8_t>(b)));
      auto [it, fresh] = renumber.emplace(key, static_cast<int>(renumber.size()));
      next[b] = it->second;
    }
    cls = next;
    n = static_cast<int>(renumber.size());
  }
  c.representative.assign(n, 0);
  std::vector<bool> have(n, false);
  for (int b = 0; b < 256; ++b) {
    c.class_of[b] = static_cast<uint8_t>(cls[b]);
    if (!have[cls[b]]) {
      have[cls[b]] = true;
      c.representative[cls[b]] = static_cast<uint8_t>(b);
    }
  }
  return c;
}

// Sets of NFA states as keys of a hash map (subset construction).
struct SetHash {
  size_t operator()(const std::vector<int>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

RuleDfa build_rule_dfa(const Pattern& p, const ByteClasses& classes, int max_states) {
  Nfa nfa;
  nfa.limit = static_cast<size_t>(max_states) * 8;
  Fragment f = build(p, nfa);
  const int n_classes = classes.count();
  // The classes each byte edge reads, listed once rather than tested per DFA state.
  std::vector<std::vector<std::vector<uint16_t>>> edge_classes(nfa.edges.size());
  for (size_t s = 0; s < nfa.edges.size(); ++s) {
    edge_classes[s].resize(nfa.edges[s].size());
    for (size_t e = 0; e < nfa.edges[s].size(); ++e)
      if (nfa.edges[s][e].kind == Nfa::Edge::Bytes)
        for (int c = 0; c < n_classes; ++c)
          if (nfa.edges[s][e].bytes.has(classes.representative[c]))
            edge_classes[s][e].push_back(static_cast<uint16_t>(c));
  }

  std::unordered_map<std::vector<int>, int, SetHash> ids;
  std::vector<std::vector<int>> sets;
  std::vector<uint8_t> seen(nfa.edges.size(), 0);
  auto intern = [&](std::vector<int> set) {
    epsilon_closure(nfa, set, seen);
    auto [it, fresh] = ids.emplace(set, static_cast<int>(sets.size()));
    if (fresh) {
      if (static_cast<int>(sets.size()) >= max_states)
        fail("the schema is too large: a rule's automaton exceeds {} states", max_states);
      sets.push_back(std::move(set));
    }
    return it->second;
  };

  RuleDfa d;
  intern({f.start});
  std::vector<std::vector<int>> by_class(n_classes);
  for (size_t i = 0; i < sets.size(); ++i) {
    for (auto& v : by_class) v.clear();
    std::map<int, std::vector<int>> by_rule;
    bool accepting = false;
    for (int s : sets[i]) {
      if (s == f.end) accepting = true;
      for (size_t k = 0; k < nfa.edges[s].size(); ++k) {
        const auto& e = nfa.edges[s][k];
        if (e.kind == Nfa::Edge::Bytes) {
          for (uint16_t c : edge_classes[s][k]) by_class[c].push_back(e.to);
        } else if (e.kind == Nfa::Edge::Call) {
          by_rule[e.rule].push_back(e.to);
        }
      }
    }
    std::vector<int32_t> row(n_classes, -1);
    for (int c = 0; c < n_classes; ++c)
      if (!by_class[c].empty()) {
        std::sort(by_class[c].begin(), by_class[c].end());
        by_class[c].erase(std::unique(by_class[c].begin(), by_class[c].end()), by_class[c].end());
        row[c] = intern(by_class[c]);
      }
    std::vector<std::pair<int, int>> calls;
    for (auto& [rule, targets] : by_rule) calls.emplace_back(rule, intern(targets));
    d.next.insert(d.next.end(), row.begin(), row.end());
    d.accepting.push_back(accepting);
    d.calls.push_back(std::move(calls));
  }
  d.n_states = static_cast<int>(sets.size());

  // Keep only the states from which an accepting state can be reached.
  std::vector<std::vector<int>> preds(d.n_states);
  for (int s = 0; s < d.n_states; ++s) {
    for (int c = 0; c < n_classes; ++c)
      if (int t = d.next[s * n_classes + c]; t >= 0) preds[t].push_back(s);
    for (auto [rule, t] : d.calls[s]) preds[t].push_back(s);
  }
  std::vector<uint8_t> live(d.n_states, 0);
  std::vector<int> work;
  for (int s = 0; s < d.n_states; ++s)
    if (d.accepting[s]) {
      live[s] = 1;
      work.push_back(s);
    }
  while (!work.empty()) {
    int t = work.back();
    work.pop_back();
    for (int s : preds[t])
      if (!live[s]) {
        live[s] = 1;
        work.push_back(s);
      }
  }
  check(live[0], "the schema admits no value (an empty enum, or bounds that exclude each other)");
  std::vector<int> renum(d.n_states, -1);
  int n_live = 0;
  for (int s = 0; s < d.n_states; ++s)
    if (live[s]) renum[s] = n_live++;
  RuleDfa out;
  out.n_states = n_live;
  for (int s = 0; s < d.n_states; ++s) {
    if (!live[s]) continue;
    for (int c = 0; c < n_classes; ++c) {
      int t = d.next[s * n_classes + c];
      out.next.push_back(t >= 0 ? renum[t] : -1);
    }
    out.accepting.push_back(d.accepting[s]);
    std::vector<std::pair<int, int>> calls;
    for (auto [rule, t] : d.calls[s])
      if (renum[t] >= 0) calls.emplace_back(rule, renum[t]);
    out.calls.push_back(std::move(calls));
  }
  return out;
}

}  // namespace tandem::structured
