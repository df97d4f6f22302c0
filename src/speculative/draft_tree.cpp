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

namespace {

// Per-node scratch of depth() and prune(), grown once per thread: a round's
// trees allocate nothing.
std::vector<int>& scratch(int which, size_t n) {
  constexpr size_t kNodes = 128;  // more nodes than a round verifies
  thread_local std::vector<int> buffers[2] = {std::vector<int>(kNodes), std::vector<int>(kNodes)};
  buffers[which].assign(n, 0);
  return buffers[which];
}

}  // namespace

void Draft::reserve(int n) {
  tokens.reserve(static_cast<size_t>(n));
  parent.reserve(static_cast<size_t>(n));
  confidence.reserve(static_cast<size_t>(n));
  scratch(0, 0);  // this thread's scratch, made now rather than at the first tree
}

int Draft::depth() const {
  if (!is_tree()) return static_cast<int>(tokens.size());
  std::vector<int>& d = scratch(0, parent.size());
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
    q.shrink_to(tokens.size());
    if (confidence.size() > tokens.size()) confidence.resize(tokens.size());
    return;
  }
  // new_index[j]: node j's index after pruning (-1: dropped); never above j.
  std::vector<int>& new_index = scratch(0, static_cast<size_t>(n));
  std::vector<int>& depth = scratch(1, static_cast<size_t>(n));
  int kept = 0, kept_extra = 0;
  for (int j = 0; j < n; ++j) {
    const int p = parent[j];
    depth[j] = p < 0 ? 1 : depth[p] + 1;
    const bool on_chain = j < main_chain;
    const bool keep = on_chain
                          ? j < chain
                          : kept_extra < extra && depth[j] <= chain && (p < 0 || new_index[p] >= 0);
    new_index[j] = keep ? kept++ : -1;
    if (keep && !on_chain) ++kept_extra;
  }
  // Compaction in place: kept nodes move down to their new indices, in order.
  const bool with_q = !q.empty();
  size_t confidences = 0;
  for (int j = 0; j < n; ++j) {
    const int to = new_index[j];
    if (to < 0) continue;
    tokens[to] = tokens[j];
    parent[to] = parent[j] < 0 ? -1 : new_index[parent[j]];
    if (with_q) q.move_entry(static_cast<size_t>(j), static_cast<size_t>(to));
    if (j < chain && static_cast<size_t>(j) < confidence.size())
      confidence[confidences++] = confidence[j];
  }
  tokens.resize(static_cast<size_t>(kept));
  parent.resize(static_cast<size_t>(kept));
  if (with_q) q.shrink_to(static_cast<size_t>(kept));
  confidence.resize(confidences);
  if (kept_extra == 0) parent.clear();
}

}  // namespace tandem
