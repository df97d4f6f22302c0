// A model's vocabulary as the matcher sees it: the bytes each token id writes,
// arranged in a trie (a byte-string prefix tree) so that a mask is computed by
// one walk that abandons a whole subtree at the first byte the grammar refuses.
//
// Tokens that write no bytes and special tokens (control and user-defined
// tokens: BOS, <|im_start|>, <tool_call>, ...) are not in the trie: they are
// never allowed inside a document. End-of-generation tokens are allowed where
// the document is complete. Ids past the tokenizer's vocabulary (padding rows
// of a model's output layer) are never allowed.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tandem {
class Tokenizer;
}

namespace tandem::structured {

class TokenVocabulary {
 public:
  // n_ids: the length of the logits vectors masks apply to (at least the
  // tokenizer's vocabulary size; a model may have more output rows).
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const Tokenizer& tok, int n_ids = 0);
  // token_bytes[id]: what the token writes, nullopt for a token never allowed.
  TokenVocabulary(const std::vector<std::optional<std::string>>& token_bytes,
                  std::vector<int> eog_ids);

  int n_ids() const { return n_ids_; }
  const std::vector<int>& eog_ids() const { return eog_ids_; }
  // Bytes of a token in the trie; nullptr for one that never is allowed.
  const std::string* bytes(int id) const;
  bool is_eog(int id) const;

  // The trie in depth-first preorder: node i's children follow it, and its
  // subtree ends where skip(i) starts. Depth 0 nodes hang from the (implicit)
  // root; node i stands for the bytes on the path to it, its last byte byte(i).
  struct Node {
    int32_t skip;  // the first node after this one's subtree
    uint16_t depth;
    uint8_t byte;
    uint8_t has_tokens;  // some token's bytes end here
  };
  int n_nodes() const { return static_cast<int>(nodes_.size()); }
  const Node* nodes() const { return nodes_.data(); }
  uint8_t byte(int node) const { return nodes_[node].byte; }
  int depth(int node) const { return nodes_[node].depth; }
  int skip(int node) const { return nodes_[node].skip; }
  // The ids of the tokens whose bytes end at `node`.
  const int32_t* tokens_begin(int node) const { return token_ids_.data() + token_begin_[node]; }
  const int32_t* tokens_end(int node) const { return token_ids_.data() + token_begin_[node + 1]; }
  int max_depth() const { return max_depth_; }

 private:
  int n_ids_ = 0;
  std::vector<std::string> bytes_;  // per id; empty: not in the trie
  std::vector<int> eog_ids_;
  std::vector<uint8_t> is_eog_;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_begin_;  // n_nodes + 1
  std::vector<int32_t> token_ids_;
  int max_depth_ = 0;
};

}  // namespace tandem::structured
