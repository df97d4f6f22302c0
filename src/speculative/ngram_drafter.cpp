#include "speculative/ngram_drafter.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace tandem {

std::vector<int> NgramDrafter::lookup(std::span<const int> tokens, int k, int max_n, int min_n,
                                      int* n_out) {
  std::vector<int> out;
  lookup_into(tokens, k, max_n, min_n, out, n_out);
  return out;
}

void NgramDrafter::lookup_into(std::span<const int> tokens, int k, int max_n, int min_n,
                               std::vector<int>& out, int* n_out, int* from_out) {
  const int len = static_cast<int>(tokens.size());
  out.clear();
  if (n_out) *n_out = 0;
  if (k <= 0) return;
  for (int n = std::min(max_n, len - 1); n >= std::max(min_n, 1); --n) {
    const int* tail = tokens.data() + len - n;
    // Most recent earlier occurrence: its match must end before the tail starts
    // ending, i.e. start at most len - n - 1.
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(tail, tail + n, tokens.data() + start)) continue;
      const int from = start + n;
      const int take = std::min(k, len - from);
      if (n_out) *n_out = n;
      if (from_out) *from_out = from;
      out.assign(tokens.begin() + from, tokens.begin() + from + take);
      return;
    }
  }
}

std::vector<std::vector<int>> NgramDrafter::continuations(std::span<const int> tokens, int k,
                                                          int max_n, int min_n, int count,
                                                          int* n_out) {
  std::vector<std::vector<int>> out;
  out.resize(static_cast<size_t>(std::max(count, 0)));
  out.resize(continuations_into(tokens, k, max_n, min_n, count, out, n_out));
  return out;
}

size_t NgramDrafter::continuations_into(std::span<const int> tokens, int k, int max_n, int min_n,
                                        int count, std::vector<std::vector<int>>& out, int* n_out) {
  const int len = static_cast<int>(tokens.size());
  if (n_out) *n_out = 0;
  if (k <= 0 || count <= 0) return 0;
  if (out.size() < static_cast<size_t>(count)) out.resize(static_cast<size_t>(count));
  size_t found = 0;
  for (int n = std::min(max_n, len - 1); n >= std::max(min_n, 1); --n) {
    const int* tail = tokens.data() + len - n;
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(tail, tail + n, tokens.data() + start)) continue;
      const int from = start + n;
      // The candidate in the next free entry; kept unless an earlier one has it.
      std::vector<int>& cont = out[found];
      cont.assign(tokens.begin() + from, tokens.begin() + from + std::min(k, len - from));
      if (std::find(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(found), cont) !=
          out.begin() + static_cast<std::ptrdiff_t>(found))
        continue;
      if (found == 0 && n_out) *n_out = n;
      if (++found == static_cast<size_t>(count)) return found;
    }
  }
  return found;
}

void NgramDrafter::merge_into(const std::vector<std::vector<int>>& conts, Draft& d) {
  merge_into(std::span<const std::vector<int>>(conts), d);
}

void NgramDrafter::merge_into(std::span<const std::vector<int>> conts, Draft& d) {
  d.tokens.clear();
  d.parent.clear();
  for (const auto& cont : conts) {
    int node = -1;  // walk the tree along cont while it agrees
    size_t i = 0;
    for (; i < cont.size(); ++i) {
      int next = -1;
      for (size_t j = 0; j < d.tokens.size() && next < 0; ++j)
        if (d.parent[j] == node && d.tokens[j] == cont[i]) next = static_cast<int>(j);
      if (next < 0) break;
      node = next;
    }
    for (; i < cont.size(); ++i) {
      d.tokens.push_back(cont[i]);
      d.parent.push_back(node);
      node = static_cast<int>(d.tokens.size()) - 1;
    }
  }
  // One path: a chain (no parent list).
  const bool chain = std::all_of(d.parent.begin(), d.parent.end(),
                                 [j = 0](int p) mutable { return p == j++ - 1; });
  if (chain) d.parent.clear();
}

NgramDrafter::NgramDrafter(int max_n, int min_n, double prior, int branches)
    : max_n_(max_n),
      min_n_(min_n),
      prior_(prior),
      branches_(branches),
      overall_(max_n + 1, AcceptanceEstimate(0.995, 1, 2)) {
  check(min_n >= 1 && max_n >= min_n, "n-gram match lengths {}..{} are not a range", min_n, max_n);
  check(branches >= 1, "n-gram branches must be >= 1, got {}", branches);
  // Room for the continuations of every branch, made now: lookups allocate nothing.
  conts_.resize(static_cast<size_t>(branches_));
  for (auto& c : conts_) c.reserve(kContinuationReserve);
}

std::vector<AcceptanceEstimate>& NgramDrafter::evidence(int request_id) {
  // Slower fading than a request's overall estimate, and a prior worth 2 trials:
  // prior_, or what all requests so far say of that match length where it is higher.
  auto [it, fresh] = evidence_.try_emplace(request_id);
  if (fresh) {
    for (int n = 0; n <= max_n_; ++n)
      it->second.emplace_back(0.98, 2 * std::max(prior_, overall_[n].alpha()), 2);
  }
  return it->second;
}

void NgramDrafter::keep_within(const TokenConstraint& constraint, std::vector<int>& tokens) {
  auto state = constraint.fork();
  size_t n = 0;
  for (; n < tokens.size() && state->allows(tokens[n]); ++n) state->advance(tokens[n]);
  tokens.resize(n);
}

double NgramDrafter::propose(std::span<const DraftContext> reqs, std::span<const int> k,
                             std::vector<Draft>& out, const DraftStop*) {
  const auto t0 = std::chrono::steady_clock::now();
  out.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    out[i].clear();
    int n = 0;
    // Under a constraint the proposal stays a chain, cut at its first refused token.
    if (branches_ > 1 && !reqs[i].constraint) {
      const size_t found =
          continuations_into(reqs[i].tokens, k[i], max_n_, min_n_, branches_, conts_, &n);
      merge_into(std::span<const std::vector<int>>(conts_.data(), found), out[i]);
    } else {
      lookup_into(reqs[i].tokens, k[i], max_n_, min_n_, out[i].tokens, &n);
      if (reqs[i].constraint) keep_within(*reqs[i].constraint, out[i].tokens);
    }
    out[i].tag = n;
    out[i].alpha = evidence(reqs[i].id)[n].alpha();
  }
  // The whole lookup is one "step": its cost does not grow with K.
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void NgramDrafter::sync(const DraftContext& req, const Draft& draft, int accepted) {
  // `accepted` counts the main chain's tokens: what the match's evidence is about.
  if (draft.tokens.empty() || draft.tag <= 0 || draft.tag > max_n_) return;
  const bool rejected = accepted < draft.chain_length();
  evidence(req.id)[draft.tag].update(accepted, rejected);
  overall_[draft.tag].update(accepted, rejected);
}

void NgramDrafter::release(int request_id) { evidence_.erase(request_id); }

}  // namespace tandem
