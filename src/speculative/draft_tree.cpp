// Draft's tree helpers (drafter.h).
#include <algorithm>

#include "speculative/drafter.h"

namespace tandem {

int Draft::chain_length() const {
  if (!is_tree()) return static_cast<int>(tokens.size());
  int n = 0;
  while (n < static_cast<int>(parent.size()) && parent[n] == n - 1) ++n;
  return n;
}

int Draft::depth() const {
  if (!is_tree()) return static_cast<int>(tokens.size());
  std::vector<int> d(parent.size());
  int deepest = 0;
  for (size_t j = 0; j < parent.size(); ++j) {
    d[j] = parent[j] < 0 ? 1 : d[static_cast<size_t>(parent[j])] + 1;
    deepest = std::max(deepest, d[j]);
  }
  return deepest;
}

void Draft::prune(int chain, int extra) {
  const int n = static_cast<int>(tokens.size()), main_chain = chain_length();
  chain = std::clamp(chain, 0, main_chain);
  if (!is_tree()) {
    tokens.resize(static_cast<size_t>(chain));
    if (q.size() > tokens.size()) q.resize(tokens.size());
    if (confidence.size() > tokens.size()) confidence.resize(tokens.size());
    return;
  }
  // new_index[j]: node j's index after pruning (-1: dropped).
  std::vector<int> new_index(static_cast<size_t>(n), -1), depth(static_cast<size_t>(n), 0);
  int kept = 0, kept_extra = 0;
  for (int j = 0; j < n; ++j) {
    const int p = parent[j];
    depth[j] = p < 0 ? 1 : depth[p] + 1;
    const bool on_chain = j < main_chain;
    const bool keep = on_chain
                          ? j < chain
                          : kept_extra < extra && depth[j] <= chain && (p < 0 || new_index[p] >= 0);
    if (!keep) continue;
    if (!on_chain) ++kept_extra;
    new_index[j] = kept++;
  }
  Draft out;
  for (int j = 0; j < n; ++j) {
    if (new_index[j] < 0) continue;
    out.tokens.push_back(tokens[j]);
    out.parent.push_back(parent[j] < 0 ? -1 : new_index[parent[j]]);
    if (!q.empty()) out.q.push_back(std::move(q[j]));
    if (j < chain && static_cast<size_t>(j) < confidence.size())
      out.confidence.push_back(confidence[j]);
  }
  if (kept_extra == 0) out.parent.clear();
  tokens = std::move(out.tokens);
  parent = std::move(out.parent);
  q = std::move(out.q);
  confidence = std::move(out.confidence);
}

}  // namespace tandem
