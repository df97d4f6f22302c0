#include "tokenizer/spm_tokenizer.h"

#include <queue>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tandem {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

std::string escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ')
      out += kSpace;
    else
      out += c;
  }
  return out;
}

}  // namespace

SpmTokenizer::SpmTokenizer(Vocab vocab, const SpecialIds& ids, bool add_space_prefix)
    : VocabTokenizer(std::move(vocab), ids, "default", {}), add_space_prefix_(add_space_prefix) {
  check(vocab_.scores.size() == vocab_.pieces.size(), "{}: {} scores for {} tokens", vocab_.source,
        vocab_.scores.size(), vocab_.pieces.size());
  strip_leading_space_ = add_space_prefix;
  mergeable_.resize(vocab_.size());
  for (int id = 0; id < vocab_.size(); ++id) {
    TokenType t = vocab_.types[id];
    mergeable_[id] =
        t == TokenType::Normal || t == TokenType::Undefined || t == TokenType::UserDefined;
  }
  for (int b = 0; b < 256; ++b)
    byte_ids_[b] = vocab_.find(fmt::format("<0x{:02X}>", b)).value_or(-1);
}

std::vector<int> SpmTokenizer::encode(std::string_view text, bool add_bos,
                                      bool parse_special) const {
  std::vector<int> out;
  if (add_bos) {
    check(bos_id_ >= 0, "{}: cannot add BOS: the tokenizer has no BOS token", vocab_.source);
    out.push_back(bos_id_);
  }
  bool after_special = true;  // the start of the text counts as following a special token
  for (const auto& f : partition(text, parse_special)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      after_special = true;
      continue;
    }
    std::string piece = add_space_prefix_ && after_special ? " " : "";
    piece.append(text.substr(f.begin, f.end - f.begin));
    encode_text(escape_spaces(piece), out);
    after_special = false;
  }
  return out;
}

void SpmTokenizer::encode_text(std::string_view text, std::vector<int>& out) const {
  // Symbols are the UTF-8 characters (an invalid byte is a symbol of its own),
  // in a linked list; candidate merges wait in a queue ordered by score, then
  // position, and are checked against the list when they come up.
  struct Symbol {
    size_t begin, len;
    int prev, next;
  };
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  uint32_t cp;
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8::decode(text, i, cp);
    if (n == 0) n = 1;
    int k = static_cast<int>(sym.size());
    sym.push_back({i, n, k - 1, -1});
    if (k > 0) sym[k - 1].next = k;
    i += n;
  }
  if (sym.empty()) return;

  struct Candidate {
    float score;
    int left, right;
    size_t len;                                 // of the merged text, to recognise stale candidates
    bool operator<(const Candidate& o) const {  // std::priority_queue pops the largest
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Candidate> queue;
  auto consider = [&](int left) {
    if (left < 0 || sym[left].next < 0) return;
    int right = sym[left].next;
    size_t len = sym[left].len + sym[right].len;
    auto id = vocab_.find(text.substr(sym[left].begin, len));
    if (id && mergeable_[*id]) queue.push({vocab_.scores[*id], left, right, len});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) consider(i);

  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len || l.next != c.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (l.next >= 0) sym[l.next].prev = c.left;
    consider(l.prev);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = sym[i].next) emit_symbol(text.substr(sym[i].begin, sym[i].len), out);
}

void SpmTokenizer::emit_symbol(std::string_view s, std::vector<int>& out) const {
  if (auto id = vocab_.find(s)) {
    out.push_back(*id);
    return;
  }
  for (char c : s) {  // byte fallback
    int id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) {
      check(unk_id_ >= 0, "{}: no piece, byte token or <unk> for byte 0x{:02X}", vocab_.source,
            static_cast<uint8_t>(c));
      id = unk_id_;
    }
    out.push_back(id);
  }
}

std::string SpmTokenizer::normal_token_bytes(int id) const {
  const std::string& p = vocab_.pieces[id];
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size();) {
    if (p.compare(i, kSpace.size(), kSpace) == 0) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += p[i++];
    }
  }
  return out;
}

}  // namespace tandem
