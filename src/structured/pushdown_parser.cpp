#include "structured/pushdown_parser.h"

#include <algorithm>

namespace tandem::structured {

PushdownParser::PushdownParser(std::shared_ptr<const Grammar> g) : grammar_(std::move(g)) {}

int32_t PushdownParser::push(int32_t below, int32_t resume) {
  const uint64_t key = (uint64_t(uint32_t(below)) << 32) | uint32_t(resume);
  auto [it, fresh] = index_.emplace(key, static_cast<int32_t>(frames_.size()));
  if (fresh) frames_.push_back({below, resume});
  return it->second;
}

void PushdownParser::closure(const Config* begin, const Config* end, std::vector<Config>& out) {
  out.assign(begin, end);
  const Grammar& g = *grammar_;
  auto add = [&](Config c) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  // The grammar has no rule that can call itself before reading a byte and no
  // rule that matches the empty string, so this terminates.
  for (size_t i = 0; i < out.size(); ++i) {
    const Config c = out[i];
    if (!g.has_exits(c.state)) continue;
    if (g.accepting(c.state) && c.below >= 0) {
      const Frame f = frames_[c.below];
      add({f.below, f.resume});
    }
    for (const Grammar::Call* k = g.calls_begin(c.state); k != g.calls_end(c.state); ++k)
      add({push(c.below, k->resume), k->callee_start});
  }
}

void PushdownParser::step(const Config* begin, const Config* end, uint8_t b,
                          std::vector<Config>& out) {
  out.clear();
  const Grammar& g = *grammar_;
  // The common case: one configuration that cannot leave its rule here.
  if (end - begin == 1 && !g.has_exits(begin->state)) {
    const int32_t t = g.next(begin->state, b);
    if (t >= 0) out.push_back({begin->below, t});
    return;
  }
  closure(begin, end, scratch_);
  for (const Config& c : scratch_) {
    const int32_t t = g.next(c.state, b);
    if (t >= 0) out.push_back({c.below, t});
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

bool PushdownParser::complete(const Config* begin, const Config* end) {
  closure(begin, end, scratch_);
  for (const Config& c : scratch_)
    if (c.below < 0 && grammar_->accepting(c.state)) return true;
  return false;
}

}  // namespace tandem::structured
