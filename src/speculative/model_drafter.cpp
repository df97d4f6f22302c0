#include "speculative/model_drafter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/kernels.h"
#include "model/transformer.h"
#include "speculative/draft_stop.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

void check_draft_compatible(const Model& draft, const Model& target) {
  const int dv = draft.config().vocab_size, tv = target.config().vocab_size;
  check(dv == tv,
        "draft model {} has a vocabulary of {} tokens, the target {} has {}: they must "
        "share one tokenizer",
        draft.path(), dv, target.path(), tv);
  const Tokenizer* dt = draft.tokenizer();
  const Tokenizer* tt = target.tokenizer();
  if (!dt || !tt) return;
  check(dt->vocab_size() == tt->vocab_size(),
        "draft model {} has a tokenizer of {} tokens, the target {} has {}", draft.path(),
        dt->vocab_size(), target.path(), tt->vocab_size());
  auto same = [&](const char* what, int a, int b) {
    check(a == b, "draft model {} has {} id {}, the target {} has {}", draft.path(), what, a,
          target.path(), b);
  };
  same("BOS", dt->bos_id(), tt->bos_id());
  same("EOS", dt->eos_id(), tt->eos_id());
  check(draft.stop_ids() == target.stop_ids(),
        "draft model {} and target {} end generation on different token ids", draft.path(),
        target.path());
}

namespace {

// [0, limit) plus every special or end-of-generation id at or above it.
std::vector<std::pair<int, int>> draft_output_ranges(const Model& m, int limit) {
  const int V = m.config().vocab_size;
  std::vector<std::pair<int, int>> ranges{{0, std::min(limit, V)}};
  const Tokenizer* tok = m.tokenizer();
  for (int id = limit; id < V; ++id) {
    const bool keep = m.is_stop(id) || (tok && id < tok->vocab_size() && tok->is_special(id));
    if (!keep) continue;
    if (ranges.back().second == id)
      ranges.back().second = id + 1;
    else
      ranges.emplace_back(id, id + 1);
  }
  return ranges;
}

}  // namespace

ModelDrafter::ModelDrafter(const Model& draft, const Model& target, ThreadPool& pool,
                           KVCacheConfig cache, int vocab_limit, int siblings,
                           const ForwardPassFactory& forward_pass)
    : draft_(draft),
      n_ctx_(std::min(cache.n_ctx, draft.config().context_length)),
      siblings_(siblings) {
  check(siblings >= 0, "draft siblings must be >= 0, got {}", siblings);
  check_draft_compatible(draft, target);
  check(vocab_limit >= 0, "draft vocabulary limit must be >= 0, got {}", vocab_limit);
  cache.n_ctx = n_ctx_;
  share_block_ = cache.share_prefixes ? cache.block_size : 0;
  ForwardPassSpec spec;  // passes of the default length, as the target's prefill chunk
  spec.max_tokens = Transformer::kDefaultMaxTokens;
  spec.kv = cache;
  tf_ = make_forward_pass(forward_pass, draft, pool, spec);
  cache_ = tf_->make_cache(cache);
  // A step's positions, and the logits of a row per request (reserved, not
  // touched): drafting allocates nothing once its jobs have run.
  batch_.reserve(tf_->max_tokens());
  logits_.reserve(static_cast<size_t>(std::max(cache.n_slots, 1)) * tf_->vocab_size());
  jobs_.reserve(static_cast<size_t>(std::max(cache.n_slots, 1)));
  gumbel_.reserve(tf_->vocab_size());
  if (vocab_limit > 0 && vocab_limit < draft.config().vocab_size) {
    output_ranges_ = draft_output_ranges(draft, vocab_limit);
    tf_->restrict_output(output_ranges_);
  }
  // Decode streams the weights: a step costs about the bytes it reads, and a
  // restricted output reads only its share of the LM head.
  double bytes = static_cast<double>(draft.weight_bytes_per_token());
  if (!output_ranges_.empty()) {
    int64_t kept = 0;
    for (auto [b, e] : output_ranges_) kept += e - b;
    const double head = static_cast<double>(draft.weights().output.nbytes);
    bytes -= head * (1.0 - static_cast<double>(kept) / draft.config().vocab_size);
  }
  relative_cost_ = bytes / static_cast<double>(target.weight_bytes_per_token());
}

int64_t ModelDrafter::positions_needed(const DraftContext& req, int k) {
  if (k <= 0) return 0;
  SeqState* st = state_for(req);
  if (!st) return 0;
  const int len = static_cast<int>(req.tokens.size());
  return cache_->positions_needed(st->slot, std::min(len + k - 1, n_ctx_));
}

ModelDrafter::~ModelDrafter() = default;

int ModelDrafter::catch_up_tokens(const DraftContext& req) const {
  auto it = states_.find(req.id);
  size_t have = 0;
  if (it != states_.end()) {
    have = it->second.cached.size();
  } else if (share_block_) {  // it would attach its cached prefix first
    // attach_prefix never maps the block holding the last token.
    const int limit = (static_cast<int>(req.tokens.size()) - 1) / share_block_ * share_block_;
    auto [memo, added] = attachable_.try_emplace(req.id);
    Attachable& a = memo->second;
    if (added || (a.positions == a.limit && limit > a.limit))
      a = {cache_->cached_prefix(req.tokens), limit};
    have = static_cast<size_t>(a.positions);
  }
  const size_t len = req.tokens.size();
  return len > have + 1 ? static_cast<int>(len - have - 1) : 0;
}

double ModelDrafter::catch_up_ms(const DraftContext& req) const {
  return catch_up_per_token_.ms() * catch_up_tokens(req);
}

std::string ModelDrafter::name() const { return "model:" + draft_.path(); }

ModelDrafter::SeqState* ModelDrafter::state_for(const DraftContext& req) {
  auto it = states_.find(req.id);
  if (it != states_.end()) return &it->second;
  int slot = cache_->allocate();
  if (slot < 0) return nullptr;
  SeqState& st = states_.emplace(req.id, SeqState{slot, {}}).first->second;
  st.cached.reserve(static_cast<size_t>(n_ctx_));  // the slot's tokens never reallocate
  if (share_block_) {
    prefix_tokens_.assign(req.tokens.begin(), req.tokens.end());
    st.shared = cache_->attach_prefix(slot, prefix_tokens_);
    st.cached.assign(req.tokens.begin(), req.tokens.begin() + st.shared);
  }
  return &st;
}

void ModelDrafter::publish(SeqState& st, std::span<const int> tokens) {
  const int settled = static_cast<int>(tokens.size()) - 1;
  if (!share_block_ || settled / share_block_ * share_block_ <= st.shared) return;
  prefix_tokens_.assign(tokens.begin(), tokens.begin() + settled);
  cache_->publish_prefix(st.slot, prefix_tokens_);
  st.shared = settled / share_block_ * share_block_;
}

float ModelDrafter::softmax_prob(const float* logits, int token) const {
  // token is the largest logit (greedy): every term is at most 1.
  const float top = logits[token];
  float sum = 0;
  auto add = [&](int begin, int end) {
    sum += kernels::sum_exp(logits + begin, end - begin, top, 1.0f);
  };
  if (output_ranges_.empty()) add(0, tf_->vocab_size());
  for (auto [begin, end] : output_ranges_) add(begin, end);
  return sum > 0 && std::isfinite(sum) ? 1 / sum : 0.0f;
}

int ModelDrafter::choose(const DraftContext& req, float* logits, const Job& job, Draft& d,
                         bool confident) {
  const int V = tf_->vocab_size();
  const SamplingParams& sp = *req.sampling;
  apply_repetition_penalty(logits, V, job.context.data(), static_cast<int>(job.context.size()), sp);
  if (job.constraint) {
    // q is masked as the target's p is; where the constraint leaves none of the
    // ids this draft may propose, the draft ends.
    job.constraint->mask(logits, V);
    if (logits[argmax(logits, V)] == -std::numeric_limits<float>::infinity()) return -1;
  }
  if (sp.greedy()) {
    const int t = argmax(logits, V);
    if (confident) d.confidence.push_back(softmax_prob(logits, t));
    return t;
  }
  if (sp.mode == SamplingMode::Reproducible) {
    // The draft's own Gumbel winner with the noise of the position it drafts
    // (the target accepts it iff the target's winner is the same token); q is
    // not needed, so it stays empty.
    const int t = gumbel_.choose(logits, V, sp, job.position);
    if (confident) d.confidence.push_back(gumbel_.probability(logits, V, sp, t));
    return t;
  }
  d.q.emplace_back().compute(logits, V, sp);
  const int t = d.q.back().sample(*req.rng);
  if (confident) d.confidence.push_back(d.q.back()[t]);
  return t;
}

int ModelDrafter::sibling(const DraftContext& req, float* logits, const Draft& d,
                          int64_t position) {
  const int V = tf_->vocab_size(), chosen = d.tokens.back();
  const SamplingParams& sp = *req.sampling;
  // The chain token's probability, where choose() already computed it.
  const bool have_confidence = d.confidence.size() == d.tokens.size();
  if (sp.greedy()) {
    const float top = have_confidence ? d.confidence.back() : softmax_prob(logits, chosen);
    if (top >= kSiblingBelow) return -1;
    int best = -1;
    for (int i = 0; i < V; ++i)
      if (i != chosen && (best < 0 || logits[i] > logits[best])) best = i;
    return best >= 0 && std::isfinite(logits[best]) ? best : -1;
  }
  if (sp.mode == SamplingMode::Reproducible) {
    // The runner-up of the same Gumbel race: the target's winner where it is
    // not the chain's token, when the draft's noise ranked it second.
    const float top =
        have_confidence ? d.confidence.back() : gumbel_.probability(logits, V, sp, chosen);
    if (top >= kSiblingBelow) return -1;
    const int t = gumbel_.choose(logits, V, sp, position, chosen);
    return t != chosen && std::isfinite(logits[t]) ? t : -1;
  }
  const auto& q = d.q.back().probs();
  if (*std::max_element(q.begin(), q.end()) >= kSiblingBelow) return -1;
  sibling_rest_.assign(q.begin(), q.end());
  sibling_rest_[static_cast<size_t>(chosen)] = 0.0f;
  if (std::none_of(sibling_rest_.begin(), sibling_rest_.end(), [](float x) { return x > 0; }))
    return -1;
  return sample_weights(sibling_rest_, *req.rng);
}

double ModelDrafter::propose(std::span<const DraftContext> reqs, std::span<const int> k,
                             std::vector<Draft>& out, const DraftStop* stop) {
  attachable_.clear();  // publication and eviction below change what requests would attach
  out.resize(reqs.size());
  for (auto& d : out) d.clear();
  if (!select_jobs(reqs, k, out)) return -1;
  StepTimes times;
  int max_k = 0;
  for (const Job& j : jobs()) max_k = std::max(max_k, j.k);
  for (int step = 0; step < max_k; ++step) {
    if (step == 0)
      feed_catch_up(reqs);
    else if (!feed_last_drafts(out, step))
      break;  // every draft stopped early
    timed_forward(step, times);
    if (step == 0)
      for (Job& j : jobs()) publish(*j.st, reqs[j.i].tokens);
    choose_tokens(reqs, step, out, stop);
  }
  for (const Job& j : jobs()) add_siblings(j.siblings, out[j.i]);
  return times.steady_steps ? times.steady_ms / times.steady_steps : -1;
}

bool ModelDrafter::select_jobs(std::span<const DraftContext> reqs, std::span<const int> k,
                               std::vector<Draft>& out) {
  n_jobs_ = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (k[i] <= 0) continue;
    SeqState* st = state_for(reqs[i]);
    if (!st) continue;  // no free slot in the draft cache
    const int len = static_cast<int>(reqs[i].tokens.size());
    // Drafting k tokens writes positions up to len + k - 2.
    const int room = std::min(k[i], n_ctx_ - len + 1);
    if (room <= 0) continue;
    // Jobs are reused from call to call, with their buffers.
    if (n_jobs_ == jobs_.size()) {
      jobs_.emplace_back();
      jobs_.back().siblings.reserve(static_cast<size_t>(siblings_));
    }
    Job& j = jobs_[n_jobs_++];
    j.i = i;
    j.st = st;
    j.k = room;
    j.position = len;
    // The repetition penalty's context: the tokens so far (only where there is
    // a penalty) and the drafts as they come.
    j.context.clear();
    if (reqs[i].sampling->repetition_penalty != 1.0f)
      j.context.assign(reqs[i].tokens.begin(), reqs[i].tokens.end());
    j.constraint = reqs[i].constraint ? reqs[i].constraint->fork() : nullptr;
    j.siblings.clear();
    // Optimal sampling keeps a distribution per drafted token: their buffers
    // are made once, for the most this request may draft.
    const SamplingParams& sp = *reqs[i].sampling;
    if (!sp.greedy() && sp.mode == SamplingMode::Optimal)
      out[i].q.reserve(static_cast<size_t>(room) + siblings_, tf_->vocab_size());
  }
  return n_jobs_ > 0;
}

void ModelDrafter::feed_catch_up(std::span<const DraftContext> reqs) {
  // Step 0 feeds every token the draft cache lacks (the whole prefix on the
  // first round); the last token is fed even when the cache has it, for its logits.
  batch_.clear();
  for (Job& j : jobs()) {
    const auto toks = reqs[j.i].tokens;
    const int have =
        std::min(static_cast<int>(j.st->cached.size()), static_cast<int>(toks.size()) - 1);
    cache_->truncate_to(j.st->slot, have);
    batch_.add_sequence(j.st->slot, toks.data() + have, static_cast<int>(toks.size()) - have, have,
                        false, true);
    j.st->cached.assign(toks.begin(), toks.end());
  }
}

bool ModelDrafter::feed_last_drafts(const std::vector<Draft>& out, int step) {
  batch_.clear();
  for (Job& j : jobs()) {
    if (j.k <= step) continue;
    j.fed = out[j.i].tokens.back();
    batch_.add_sequence(j.st->slot, &j.fed, 1, static_cast<int>(j.st->cached.size()), false, true);
    j.st->cached.push_back(j.fed);
  }
  return batch_.size() > 0;
}

void ModelDrafter::timed_forward(int step, StepTimes& times) {
  resize_scratch(logits_, static_cast<size_t>(batch_.logit_rows.size()) * tf_->vocab_size());
  const auto t0 = std::chrono::steady_clock::now();  // the forward alone, not the buffer
  tf_->forward(batch_, *cache_, logits_.data());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // A step 0 that caught up on many tokens measures the catch-up rate (a
  // prefill: compute-bound, so its cost per token is about the same at any size).
  constexpr int kCatchUpSample = 16;
  if (step == 0 && batch_.size() >= static_cast<int>(n_jobs_) + kCatchUpSample)
    catch_up_per_token_.add(ms / batch_.size());
  // Steady-state steps feed one token per request, or two in a step 0 after a
  // fully accepted draft (nearly as cheap: a few positions cost about what one
  // does; with K = 1 every step is a step 0). A step 0 that catches up on more
  // (the whole prompt on the first round) is not one.
  if (batch_.size() <= 2 * static_cast<int>(batch_.logit_rows.size())) {
    times.steady_ms += ms;
    ++times.steady_steps;
  }
}

void ModelDrafter::choose_tokens(std::span<const DraftContext> reqs, int step,
                                 std::vector<Draft>& out, const DraftStop* stop) {
  const int V = tf_->vocab_size();
  int row = 0;
  for (Job& j : jobs()) {
    if (j.k <= step) continue;
    float* logits = &logits_[static_cast<size_t>(row++) * V];
    Draft& d = out[j.i];
    const int t = choose(reqs[j.i], logits, j, d, stop != nullptr);
    if (t < 0) {
      j.k = step;  // nothing it may propose keeps to the constraint
      continue;
    }
    d.tokens.push_back(t);
    // Siblings are decided before the draw and added in depth order: which
    // positions get one depends on no later draw.
    if (static_cast<int>(j.siblings.size()) < siblings_ && !j.constraint) {
      const int sib = sibling(reqs[j.i], logits, d, j.position);
      if (sib >= 0) j.siblings.emplace_back(step, sib);
    }
    if (!j.context.empty()) j.context.push_back(t);
    ++j.position;
    if (j.constraint) j.constraint->advance(t);
  }
  if (stop) decide_next_step(out, step, *stop);
}

// Which drafts go on to step + 1. The step costs the same however many take it,
// so each request's share depends on how many others go on: asked with the
// number still going, and asked again after others stop, until none stops
// (requests only drop out, so this ends).
void ModelDrafter::decide_next_step(const std::vector<Draft>& out, int step,
                                    const DraftStop& stop) {
  int going = 0, drafted = 0;
  for (const Job& j : jobs()) {
    going += j.k > step + 1;
    drafted += static_cast<int>(out[j.i].tokens.size());
  }
  for (bool stopped = true; stopped && going > 0;) {
    stopped = false;
    for (Job& j : jobs())
      if (j.k > step + 1 && !stop.keep_drafting(j.i, out[j.i], going, drafted)) {
        j.k = step + 1;
        --going;
        stopped = true;
      }
  }
}

void ModelDrafter::add_siblings(const std::vector<std::pair<int, int>>& siblings, Draft& d) {
  if (siblings.empty()) return;
  const int chain = static_cast<int>(d.tokens.size());
  for (int i = 0; i < chain; ++i) d.parent.push_back(i - 1);
  for (auto [at, token] : siblings) {
    d.tokens.push_back(token);
    d.parent.push_back(at - 1);
    if (!d.q.empty()) d.q.emplace_back();  // drawn from the chain token's q without it
  }
}

void ModelDrafter::sync(const DraftContext& req, const Draft&, int) {
  auto it = states_.find(req.id);
  if (it == states_.end()) return;
  auto& st = it->second;
  const auto toks = req.tokens;
  size_t common = 0;
  while (common < st.cached.size() && common < toks.size() && st.cached[common] == toks[common])
    ++common;
  if (static_cast<int>(common) < st.shared) {
    // The request's text changed inside its shared blocks (which are
    // read-only): start it again in a fresh slot.
    release(req.id);
    return;
  }
  st.cached.resize(common);
  cache_->truncate_to(st.slot, static_cast<int>(common));
}

void ModelDrafter::release(int request_id) {
  attachable_.erase(request_id);
  auto it = states_.find(request_id);
  if (it == states_.end()) return;
  cache_->free(it->second.slot);
  states_.erase(it);
}

}  // namespace tandem
