#include "engine/engine.h"

#include <algorithm>

#include "core/error.h"
#include "speculative/draft_hints.h"

namespace tandem {

namespace {
double seconds_between(Sequence::Clock::time_point a, Sequence::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
// The runner works on the generation part of each request.
std::vector<Generation*> generations(const std::vector<Sequence*>& seqs) {
  return {seqs.begin(), seqs.end()};
}
}  // namespace

KVCacheConfig engine_cache_config(const EngineOptions& opt) {
  KVCacheConfig kv = opt.kv;
  kv.n_slots = opt.max_batch;
  kv.n_ctx = opt.n_ctx;
  kv.share_prefixes = opt.prefix_cache && kv.kind == KVCacheConfig::Kind::Paged;
  return kv;
}

Engine::Engine(const Model& target, ThreadPool& pool, EngineOptions opt,
               std::unique_ptr<Drafter> drafter)
    : target_(target), opt_(opt), drafter_(std::move(drafter)) {
  check(opt_.max_batch >= 1, "max batch must be >= 1, got {}", opt_.max_batch);
  check(opt_.prefill_chunk >= 1, "prefill chunk must be >= 1, got {}", opt_.prefill_chunk);
  opt_.n_ctx = std::min(opt_.n_ctx, target.config().context_length);
  check(opt_.n_ctx >= 1, "context length must be >= 1, got {}", opt_.n_ctx);
  opt_.kv = engine_cache_config(opt_);
  // Passes as long as a prefill chunk or a verify pass of every request's longest draft.
  ForwardPassSpec spec;
  spec.max_tokens = std::max({1, opt_.prefill_chunk, opt_.max_batch * (kMaxDraft + 1)});
  spec.kv = opt_.kv;
  tf_ = make_forward_pass(opt_.forward_pass, target, pool, spec);
  cache_ = tf_->make_cache(opt_.kv);
  runner_ = std::make_unique<SpeculativeRunner>(*tf_, *cache_, drafter_.get(), opt_.spec);
}

Engine::~Engine() = default;

RequestLimits Engine::limits() const {
  RequestLimits l;
  l.vocab_size = target_.config().vocab_size;
  l.n_ctx = opt_.n_ctx;
  l.kv_positions = cache_->total_positions();
  return l;
}

int Engine::submit(Request request) {
  metrics_.prompt_tokens += request.prompt.size();
  queue_.push_back(std::make_unique<Sequence>(next_id_, target_, std::move(request)));
  return next_id_++;
}

void Engine::cancel(int id) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if ((*it)->id() != id) continue;
    (*it)->cancel();
    finish(**it);
    queue_.erase(it);
    return;
  }
  for (auto& s : running_)
    if (s->id() == id) s->cancel();  // retired at the end of the step
}

void Engine::admit() {
  while (!queue_.empty() && static_cast<int>(running_.size()) < opt_.max_batch) {
    Sequence& s = *queue_.front();
    const int slot = cache_->allocate();
    if (slot < 0) break;
    int cached = 0;
    if (opt_.prefix_cache) {
      std::vector<int> prompt(s.tokens().begin(), s.tokens().begin() + s.n_prompt());
      cached = cache_->attach_prefix(slot, prompt);
    }
    // Admit only when the rest of its prefill fits.
    if (cache_->positions_needed(slot, s.prefill_end()) > cache_->free_positions()) {
      cache_->free(slot);
      break;
    }
    if (opt_.prefix_cache) {
      metrics_.prefix_queried_tokens += s.n_prompt();
      metrics_.prefix_hit_tokens += cached;
    }
    if (s.admitted_order == 0) s.stats().n_cached_prompt = cached;  // first admission
    s.target_slot = slot;
    s.admitted_order = ++admissions_;
    running_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

void Engine::finish(Sequence& s) {
  runner_->finish(s);
  if (s.target_slot >= 0) {
    cache_->free(s.target_slot);
    s.target_slot = -1;
  }
  RequestResult r = s.result();
  metrics_.requests[finish_reason_name(r.finish_reason)]++;
  metrics_.drafted_tokens += r.stats.drafted;
  metrics_.accepted_tokens += r.stats.accepted;
  if (!s.notify_finished(r)) done_.emplace(s.id(), std::move(r));
}

void Engine::retire() {
  for (auto& s : running_) {
    if (!s->finished()) continue;
    finish(*s);
    s.reset();
  }
  running_.erase(std::remove(running_.begin(), running_.end(), nullptr), running_.end());
}

Sequence* Engine::newest_running() {
  Sequence* newest = nullptr;
  for (auto& s : running_)
    if (!newest || s->admitted_order > newest->admitted_order) newest = s.get();
  return newest;
}

void Engine::preempt(Sequence& s) {
  runner_->release(s);
  cache_->free(s.target_slot);
  s.target_slot = -1;
  s.prefix_published = false;
  metrics_.preemptions++;
  auto it =
      std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == &s; });
  queue_.push_front(std::move(*it));
  running_.erase(it);
}

// The KV room of one round, stated to the policy: the target cache's free
// positions, and the draft model's where it drafts.
class Engine::RoundBudget final : public KvBudget {
 public:
  RoundBudget(const KVCache& cache, DraftMemory* draft, const std::vector<Sequence*>& seqs)
      : cache_(cache), draft_(draft), seqs_(seqs) {}

  bool fits(std::span<const int> positions, std::span<const int> drafted) const override {
    int64_t need = 0, need_draft = 0;
    for (size_t i = 0; i < seqs_.size(); ++i) {
      Sequence& s = *seqs_[i];
      const int len = static_cast<int>(s.tokens().size());
      need += cache_.positions_needed(s.target_slot, len + positions[i]);
      if (draft_ && drafted[i] > 0)
        need_draft += draft_->positions_needed(s.draft_context(), drafted[i]);
    }
    return need <= cache_.free_positions() && (!draft_ || need_draft <= draft_->free_positions());
  }

 private:
  const KVCache& cache_;
  DraftMemory* draft_;
  const std::vector<Sequence*>& seqs_;
};

std::vector<Sequence*> Engine::plan_round(RoundPlan& plan) {
  for (;;) {
    std::vector<Sequence*> decoding;
    for (auto& s : running_)
      if (!s->finished() && cache_->length(s->target_slot) >= s->prefill_end())
        decoding.push_back(s.get());
    const RoundBudget budget(*cache_, drafter_ ? drafter_->memory() : nullptr, decoding);
    plan.load = static_cast<int>(std::count_if(running_.begin(), running_.end(),
                                               [](const auto& s) { return !s->finished(); }));
    runner_->plan(generations(decoding), budget, plan);
    // The policy drafts only within the budget; a plain step that does not fit
    // either needs a request's blocks: the most recently admitted gives them up.
    if (budget.fits(plan.positions, plan.k)) return decoding;
    Sequence* victim = newest_running();
    if (!victim || running_.size() == 1)
      fail(
          "KV cache too small for one request's next step (this is a bug: check_request() should "
          "have refused it)");
    preempt(*victim);
  }
}

void Engine::observe_progress(Sequence& s, int generated_before) {
  const int fresh = s.n_generated() - generated_before;
  if (fresh <= 0) return;
  const auto now = Sequence::Clock::now();
  metrics_.generated_tokens += fresh;
  int itl_tokens = fresh;
  if (generated_before == 0) {
    metrics_.time_to_first_token.observe(seconds_between(s.submitted_at, now));
    --itl_tokens;
  }
  if (generated_before > 0) {
    // Tokens of one round arrive together: each gets an equal share of the wait.
    const double gap = seconds_between(s.last_token_at, now) / fresh;
    for (int i = 0; i < itl_tokens; ++i) metrics_.inter_token_latency.observe(gap);
  }
  s.last_token_at = now;
}

bool Engine::step() {
  admit();
  retire();  // cancelled requests, and max_tokens 0

  // Decode first, so running requests keep streaming while long prompts
  // prefill one chunk per step.
  std::vector<Sequence*> decoding = plan_round(plan_);
  if (!decoding.empty()) {
    std::vector<int> before;
    for (Sequence* s : decoding) before.push_back(s->n_generated());
    runner_->step(generations(decoding), plan_);
    for (size_t i = 0; i < decoding.size(); ++i) {
      metrics_.tokens_per_round.observe(decoding[i]->n_generated() - before[i]);
      observe_progress(*decoding[i], before[i]);
    }
  }

  // One prefill chunk, as much of the budget as the cache has room for.
  const int block = std::max(1, cache_->stats().block_size);
  int budget = opt_.prefill_chunk;
  int64_t free_left = cache_->free_positions();
  std::vector<std::pair<Sequence*, int>> chunks;
  for (auto& s : running_) {
    if (budget <= 0) break;
    const int have = cache_->length(s->target_slot);
    int n = std::min(s->prefill_end() - have, budget);
    if (n <= 0 || s->finished()) continue;
    while (n > 0 && cache_->positions_needed(s->target_slot, have + n) > free_left)
      n = std::max(0, n - block);
    if (n <= 0) continue;
    free_left -= cache_->positions_needed(s->target_slot, have + n);
    budget -= n;
    chunks.emplace_back(s.get(), n);
  }
  if (!chunks.empty()) {
    std::vector<int> before;
    for (auto [s, n] : chunks) before.push_back(s->n_generated());
    runner_->prefill({chunks.begin(), chunks.end()});
    for (size_t i = 0; i < chunks.size(); ++i) {
      Sequence* s = chunks[i].first;
      observe_progress(*s, before[i]);
      if (opt_.prefix_cache && !s->prefix_published &&
          cache_->length(s->target_slot) >= s->n_prompt()) {
        cache_->publish_prefix(
            s->target_slot,
            std::vector<int>(s->tokens().begin(), s->tokens().begin() + s->n_prompt()));
        s->prefix_published = true;
      }
    }
  }
  retire();
  return !idle();
}

void Engine::abort_all(FinishReason reason) {
  for (auto& s : queue_) {
    s->abort(reason);
    finish(*s);
  }
  queue_.clear();
  for (auto& s : running_) s->abort(reason);
  retire();
}

void Engine::run() {
  while (step()) {
  }
}

std::optional<RequestResult> Engine::take_result(int id) {
  auto it = done_.find(id);
  if (it == done_.end()) return std::nullopt;
  RequestResult r = std::move(it->second);
  done_.erase(it);
  return r;
}

EngineMetrics Engine::metrics() const {
  EngineMetrics m = metrics_;
  m.queued = static_cast<int>(queue_.size());
  m.running = static_cast<int>(running_.size());
  m.kv = cache_->stats();
  if (DraftMemory* dm = drafter_ ? drafter_->memory() : nullptr) m.draft_kv = dm->cache().stats();
  return m;
}

}  // namespace tandem
