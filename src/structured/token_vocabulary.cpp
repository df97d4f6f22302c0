#include "structured/token_vocabulary.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tandem::structured {

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(const Tokenizer& tok,
                                                                       int n_ids) {
  const int n_tok = tok.vocab_size();
  std::vector<std::optional<std::string>> bytes(std::max(n_ids, n_tok));
  for (int id = 0; id < n_tok; ++id) {
    if (tok.is_special(id)) continue;
    // Unknown and unused tokens decode to nothing without include_special.
    std::string b = tok.token_bytes(id, false);
    if (!b.empty()) bytes[id] = std::move(b);
  }
  return std::make_shared<TokenVocabulary>(bytes, tok.eog_ids());
}

TokenVocabulary::TokenVocabulary(const std::vector<std::optional<std::string>>& token_bytes,
                                 std::vector<int> eog_ids)
    : n_ids_(static_cast<int>(token_bytes.size())), eog_ids_(std::move(eog_ids)) {
  bytes_.resize(n_ids_);
  is_eog_.assign(n_ids_, 0);
  for (int id : eog_ids_) {
    check(id >= 0 && id < n_ids_, "end-of-generation id {} is outside the vocabulary [0, {})", id,
          n_ids_);
    is_eog_[id] = 1;
  }
  std::vector<int32_t> order;
  for (int id = 0; id < n_ids_; ++id)
    if (token_bytes[id] && !token_bytes[id]->empty() && !is_eog_[id]) {
      bytes_[id] = *token_bytes[id];
      order.push_back(id);
    }
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b; });

  // Insert in sorted order: each string shares its longest common prefix with
  // the previous one, so only the rest needs new nodes, appended in preorder.
  std::vector<int32_t> path;  // node at each depth of the current string
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes_[id];
    check(s.size() <= 0xFFFF, "token {} is {} bytes long, too long for the trie", id, s.size());
    size_t common = 0;
    if (prev)
      while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
    // Nodes deeper than the common prefix are complete: their subtrees end here.
    for (size_t d = common; d < path.size(); ++d)
      nodes_[path[d]].skip = static_cast<int32_t>(nodes_.size());
    path.resize(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back({-1, static_cast<uint16_t>(d), static_cast<uint8_t>(s[d]), 0});
      token_begin_.push_back(static_cast<int32_t>(token_ids_.size()));
    }
    token_ids_.push_back(id);  // its node is the last one created (equal strings share it)
    nodes_.back().has_tokens = 1;
    max_depth_ = std::max(max_depth_, static_cast<int>(s.size()));
    prev = &s;
  }
  for (int32_t node : path) nodes_[node].skip = static_cast<int32_t>(nodes_.size());
  token_begin_.push_back(static_cast<int32_t>(token_ids_.size()));
}

const std::string* TokenVocabulary::bytes(int id) const {
  if (id < 0 || id >= n_ids_ || bytes_[id].empty()) return nullptr;
  return &bytes_[id];
}

bool TokenVocabulary::is_eog(int id) const { return id >= 0 && id < n_ids_ && is_eog_[id]; }

}  // namespace tandem::structured
