#include "tokenizer/bpe_tokenizer.h"

#include <queue>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode_nfc.h"

namespace tandem {

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(
    Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    const SpecialIds& ids, BpeOptions opts, std::vector<SpecialTokenText> specials)
    : VocabTokenizer(std::move(vocab), ids, opts.pre, std::move(specials)),
      opts_(std::move(opts)),
      splitter_(opts_.split_patterns, vocab_.source) {
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    joined.assign(a).append(b);
    auto left = vocab_.find(a), right = vocab_.find(b), result = vocab_.find(joined);
    if (!left || !right || !result)
      fail("{}: merge {} '{} {}' refers to text that is not in the vocabulary ('{}')",
           vocab_.source, rank, a, b,
           !left    ? a
           : !right ? b
                    : joined);
    merges_.emplace(pair_key(*left, *right), Merge{static_cast<int>(rank), *result});
  }
  for (int b = 0; b < 256; ++b)
    byte_ids_[b] = vocab_.find(byte_level::byte_text(static_cast<uint8_t>(b))).value_or(-1);
}

std::vector<int> ByteLevelBpeTokenizer::encode(std::string_view text, bool add_bos,
                                               bool parse_special) const {
  std::vector<int> out;
  if (add_bos) {
    check(bos_id_ >= 0, "{}: cannot add BOS: the tokenizer has no BOS token", vocab_.source);
    out.push_back(bos_id_);
  }
  for (const auto& f : partition(text, parse_special)) {
    if (f.id >= 0)
      out.push_back(f.id);
    else
      encode_text(text.substr(f.begin, f.end - f.begin), out);
  }
  return out;
}

void ByteLevelBpeTokenizer::encode_text(std::string_view text, std::vector<int>& out) const {
  std::string buf;
  if (opts_.nfc) {
    buf = nfc_normalize(text);
    text = buf;
  }
  if (opts_.add_prefix_space && !text.empty() && text[0] != ' ') {
    std::string prefixed = " ";
    prefixed += text;
    buf = std::move(prefixed);
    text = buf;
  }
  for (std::string_view word : splitter_.split(text)) encode_word(word, out);
}

void ByteLevelBpeTokenizer::encode_word(std::string_view word, std::vector<int>& out) const {
  auto byte_token = [&](char c) {
    int id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) {
      check(unk_id_ >= 0, "{}: the vocabulary has no token for byte 0x{:02X}", vocab_.source,
            static_cast<uint8_t>(c));
      id = unk_id_;
    }
    return id;
  };
  if (word.size() == 1) {
    out.push_back(byte_token(word[0]));
    return;
  }
  if (opts_.ignore_merges) {
    if (auto id = vocab_.find(byte_level::encode(word))) {
      out.push_back(*id);
      return;
    }
  }

  // Symbols form a linked list; candidate merges wait in a queue ordered by
  // rank, then position, and are checked against the list when they come up.
  struct Symbol {
    int id, prev, next;
  };
  std::vector<Symbol> sym(word.size());
  const int n = static_cast<int>(word.size());
  for (int i = 0; i < n; ++i) sym[i] = {byte_token(word[i]), i - 1, i + 1 < n ? i + 1 : -1};

  struct Candidate {
    int rank, left, right, left_id, right_id, result;
    bool operator<(const Candidate& o) const {  // std::priority_queue pops the largest
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate> queue;
  auto consider = [&](int left) {
    if (left < 0) return;
    int right = sym[left].next;
    if (right < 0) return;
    auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
    if (it != merges_.end())
      queue.push({it->second.rank, left, right, sym[left].id, sym[right].id, it->second.result});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);

  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    if (l.id != c.left_id || l.next != c.right || sym[c.right].id != c.right_id) continue;  // stale
    l.id = c.result;
    l.next = sym[c.right].next;
    if (l.next >= 0) sym[l.next].prev = c.left;
    sym[c.right].id = -1;  // merged away
    consider(l.prev);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

std::string ByteLevelBpeTokenizer::normal_token_bytes(int id) const {
  std::string out;
  byte_level::decode(vocab_.pieces[id], out);
  return out;
}

}  // namespace tandem
