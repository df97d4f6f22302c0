#include "structured/pattern.h"

#include "core/error.h"

namespace tandem::structured {

struct Pattern::Node {
  Kind kind = Kind::Empty;
  ByteSet bytes;
  int rule = -1;
  std::vector<Pattern> items;
  int min = 0, max = 0;
  std::vector<bool> required;
  std::vector<Pattern> separator;  // Members: one element
};

Pattern::Pattern() : node_(std::make_shared<Node>()) {}

Pattern Pattern::bytes(const ByteSet& set) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Bytes;
  n->bytes = set;
  return Pattern(std::move(n));
}

Pattern Pattern::literal(std::string_view text) {
  std::vector<Pattern> items;
  items.reserve(text.size());
  for (char c : text) items.push_back(byte(static_cast<uint8_t>(c)));
  return seq(std::move(items));
}

Pattern Pattern::call(int rule) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Call;
  n->rule = rule;
  return Pattern(std::move(n));
}

Pattern Pattern::seq(std::vector<Pattern> items) {
  if (items.empty()) return Pattern();
  if (items.size() == 1) return items[0];
  auto n = std::make_shared<Node>();
  n->kind = Kind::Seq;
  n->items = std::move(items);
  return Pattern(std::move(n));
}

Pattern Pattern::alt(std::vector<Pattern> items) {
  check(!items.empty(), "internal: an alternation of no patterns");
  if (items.size() == 1) return items[0];
  auto n = std::make_shared<Node>();
  n->kind = Kind::Alt;
  n->items = std::move(items);
  return Pattern(std::move(n));
}

Pattern Pattern::repeat(Pattern p, int min, int max) {
  check(min >= 0 && (max == -1 || max >= min), "internal: repeat {{{},{}}}", min, max);
  if (min == 1 && max == 1) return p;
  if (max == 0) return Pattern();
  auto n = std::make_shared<Node>();
  n->kind = Kind::Repeat;
  n->items = {std::move(p)};
  n->min = min;
  n->max = max;
  return Pattern(std::move(n));
}

Pattern Pattern::members(std::vector<Pattern> items, std::vector<bool> required, Pattern separator,
                         int min_present, int max_present) {
  check(items.size() == required.size(), "internal: members and flags differ in number");
  check(min_present >= 0 && (max_present == -1 || max_present >= min_present),
        "internal: members {{{},{}}}", min_present, max_present);
  auto n = std::make_shared<Node>();
  n->kind = Kind::Members;
  n->min = min_present;
  n->max = max_present;
  n->items = std::move(items);
  n->required = std::move(required);
  n->separator = {std::move(separator)};
  return Pattern(std::move(n));
}

Pattern::Kind Pattern::kind() const { return node_->kind; }
const ByteSet& Pattern::byte_set() const { return node_->bytes; }
int Pattern::rule() const { return node_->rule; }
const std::vector<Pattern>& Pattern::items() const { return node_->items; }
int Pattern::min() const { return node_->min; }
int Pattern::max() const { return node_->max; }
const std::vector<bool>& Pattern::required() const { return node_->required; }
const Pattern& Pattern::separator() const { return node_->separator.at(0); }

void Pattern::collect_byte_sets(std::vector<ByteSet>& out) const {
  if (node_->kind == Kind::Bytes) out.push_back(node_->bytes);
  for (const auto& p : node_->items) p.collect_byte_sets(out);
  for (const auto& p : node_->separator) p.collect_byte_sets(out);
}

}  // namespace tandem::structured
