#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace tandem {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

void SpecialTokenMatcher::add(SpecialTokenText t) {
  if (t.text.empty()) return;
  auto& bucket = by_first_byte_[static_cast<uint8_t>(t.text[0])];
  auto at = std::find_if(bucket.begin(), bucket.end(),
                         [&](const SpecialTokenText& o) { return o.text.size() < t.text.size(); });
  bucket.insert(at, std::move(t));
  ++count_;
}

std::vector<TextFragment> SpecialTokenMatcher::partition(std::string_view text,
                                                         bool parse_special) const {
  std::vector<TextFragment> out;
  size_t raw_begin = 0;
  auto flush_raw = [&](size_t end) {
    if (end > raw_begin) out.push_back({-1, raw_begin, end});
  };
  for (size_t i = 0; i < text.size();) {
    const SpecialTokenText* hit = nullptr;
    if (count_ != 0) {
      for (const auto& t : by_first_byte_[static_cast<uint8_t>(text[i])]) {
        if ((!t.control || parse_special) && text.compare(i, t.text.size(), t.text) == 0) {
          hit = &t;
          break;
        }
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    size_t raw_end = i;
    if (hit->lstrip)
      while (raw_end > raw_begin && is_space(text[raw_end - 1])) --raw_end;
    flush_raw(raw_end);
    out.push_back({hit->id, i, i + hit->text.size()});
    i += hit->text.size();
    if (hit->rstrip)
      while (i < text.size() && is_space(text[i])) ++i;
    raw_begin = i;
  }
  flush_raw(text.size());
  return out;
}

}  // namespace tandem
