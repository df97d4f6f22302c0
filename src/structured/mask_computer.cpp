#include "structured/mask_computer.h"

#include <algorithm>

namespace tandem::structured {

MaskComputer::MaskComputer(PushdownParser& parser, std::shared_ptr<const TokenVocabulary> vocab)
    : parser_(parser), vocab_(std::move(vocab)) {
  cache_.resize(parser_.grammar().n_states());
  levels_.resize(vocab_->max_depth() + 2);
  walk_states_.resize(vocab_->max_depth() + 2);
}

const MaskComputer::FrameLocal& MaskComputer::frame_local(int32_t state) {
  if (cache_[state]) return *cache_[state];
  auto fl = std::make_unique<FrameLocal>();
  const Grammar& g = parser_.grammar();
  const TokenVocabulary& v = *vocab_;
  const TokenVocabulary::Node* nodes = v.nodes();
  const int n = v.n_nodes();
  if (scratch_.size() != v.n_ids()) scratch_ = TokenMask(v.n_ids());
  scratch_.clear_all();
  int32_t* states = walk_states_.data();
  states[0] = state;
  // Depth-first over the trie in preorder: a node's state is its parent's
  // state after the node's byte; a dead state skips the whole subtree.
  for (int i = 0; i < n;) {
    const TokenVocabulary::Node nd = nodes[i];
    const int32_t t = g.next(states[nd.depth], nd.byte);
    if (t < 0) {
      i = nd.skip;
      continue;
    }
    if (nd.has_tokens)
      for (const int32_t* id = v.tokens_begin(i); id != v.tokens_end(i); ++id) scratch_.set(*id);
    // Tokens that go on below this node may also leave the rule here.
    if (g.has_exits(t) && nd.skip > i + 1) fl->exits.emplace_back(i, t);
    states[nd.depth + 1] = t;
    ++i;
  }
  // By exit state, so that fill() computes each state's exit closure once (the
  // walks below the nodes only add to a mask, so their order does not matter).
  std::stable_sort(fl->exits.begin(), fl->exits.end(),
                   [](const auto& a, const auto& b) { return a.second < b.second; });
  // A bitmap costs n_ids / 8 bytes; a list 4 bytes an id.
  const int count = scratch_.count();
  if (static_cast<int64_t>(count) * 32 > v.n_ids())
    fl->bits.assign(scratch_.words(), scratch_.words() + scratch_.n_words());
  else
    fl->ids = scratch_.allowed_ids();
  cache_[state] = std::move(fl);
  return *cache_[state];
}

void MaskComputer::walk_below(int32_t node, const std::vector<Config>& from, TokenMask& mask) {
  const TokenVocabulary& v = *vocab_;
  const int base = v.depth(node) + 1;
  const int end = v.skip(node);
  for (int i = node + 1; i < end;) {
    const int d = v.depth(i) - base;
    const std::vector<Config>& cur = d == 0 ? from : levels_[d];
    std::vector<Config>& next = levels_[d + 1];
    parser_.step(cur.data(), cur.data() + cur.size(), v.byte(i), next);
    if (next.empty()) {
      i = v.skip(i);
      continue;
    }
    for (const int32_t* t = v.tokens_begin(i); t != v.tokens_end(i); ++t) mask.set(*t);
    ++i;
  }
}

void MaskComputer::fill(const ParserState& state, TokenMask& mask) {
  const TokenVocabulary& v = *vocab_;
  if (mask.size() != v.n_ids()) mask = TokenMask(v.n_ids());
  mask.clear_all();
  if (state.empty()) return;
  parser_.closure(state.data(), state.data() + state.size(), closure_);
  // Nothing below writes closure_ (the exits use exit_closure_, the walks the
  // parser's and levels_' scratch).
  for (const Config& c : closure_) {
    const FrameLocal& fl = frame_local(c.state);
    if (!fl.bits.empty()) {
      uint64_t* w = mask.words();
      for (size_t k = 0; k < fl.bits.size(); ++k) w[k] |= fl.bits[k];
    } else {
      for (int32_t id : fl.ids) mask.set(id);
    }
    int32_t closed = -1;  // the exit state whose closure exit_closure_ holds
    for (auto [node, s] : fl.exits) {
      // Leaving the rule after `node`: the configurations that ending or
      // calling reach (staying in the rule is what the frame-local set covers).
      if (s != closed) {
        const Config inside{c.below, s};
        parser_.closure(&inside, &inside + 1, exit_closure_);
        exit_closure_.erase(exit_closure_.begin());
        closed = s;
      }
      if (exit_closure_.empty()) continue;
      walk_below(node, exit_closure_, mask);
    }
  }
  // The document may end here: the root rule accepts somewhere in the closure
  // (PushdownParser::complete(), on the closure already at hand).
  for (const Config& c : closure_)
    if (c.below < 0 && parser_.grammar().accepting(c.state)) {
      for (int id : v.eog_ids()) mask.set(id);
      break;
    }
}

}  // namespace tandem::structured
