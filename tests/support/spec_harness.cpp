#include "support/spec_harness.h"

#include "engine/prompt_logits.h"
#include "speculative/lookup_first_drafter.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"
#include "speculative/suffix_drafter.h"
#include "support/paths.h"
#include "support/test_util.h"

namespace tandem::test {

std::vector<std::vector<int>> spec_prompts(int vocab) {
  std::vector<std::vector<int>> p;
  p.push_back(pseudo_random_ids(12, vocab, 1));
  p.push_back(pseudo_random_ids(3, vocab, 2));
  auto rep = pseudo_random_ids(10, vocab, 3);
  for (int i = 0; i < 3; ++i) rep.insert(rep.end(), rep.begin(), rep.begin() + 10);
  p.push_back(rep);
  p.push_back(pseudo_random_ids(40, vocab, 4));
  p.push_back({5, 6, 7, 5, 6, 7, 5, 6});
  return p;
}

Models load_models(Arch arch, int vocab, bool tokenizer) {
  auto dir = temp_dir("spec");
  SyntheticSpec s;
  s.arch = arch;
  s.vocab_size = vocab;
  s.with_tokenizer = tokenizer;
  Models m;
  const std::string target = write_synthetic_gguf(s, dir + "/target.gguf");
  m.target = Model::load(target);
  m.same_q4 = Model::load(target, {}, Requantization{});
  s.weight_type = DType::Q8_0;  // the same weights, rounded: a draft that mostly agrees
  m.same_q8 = Model::load(write_synthetic_gguf(s, dir + "/q8.gguf"));
  s.weight_type = DType::F32;
  s.seed = 99;  // unrelated weights: a draft that mostly disagrees
  s.n_layers = 1;
  m.other = Model::load(write_synthetic_gguf(s, dir + "/other.gguf"));
  return m;
}

double propose(Drafter& drafter, const std::vector<Sequence*>& seqs, const std::vector<int>& k,
               std::vector<Draft>& out) {
  std::vector<DraftContext> reqs;
  for (Sequence* s : seqs) reqs.push_back(s->draft_context());
  return drafter.propose(reqs, k, out);
}

std::vector<RequestResult> run(const Models& m, DraftKind kind, SpecOptions so,
                               const std::vector<Request>& reqs, int max_batch, int threads,
                               const ForwardPassFactory& forward_pass) {
  ThreadPool pool(threads);  // tiny models: more threads only add synchronisation
  EngineOptions eo;
  eo.max_batch = max_batch;
  eo.n_ctx = 256;
  eo.spec = so;
  eo.spec.opt_out = false;  // these tests need the drafts verified even when they do not pay
  eo.forward_pass = forward_pass;
  std::unique_ptr<Drafter> d;
  // so.tree_extra > 0: the drafters build trees (siblings, several lookups).
  const int siblings = so.tree_extra, branches = so.tree_extra > 0 ? 4 : 1;
  const Model* draft_model = kind == DraftKind::SameQuantized     ? m.same_q8.get()
                             : kind == DraftKind::SameRequantized ? m.same_q4.get()
                             : kind == DraftKind::Other           ? m.other.get()
                                                                  : nullptr;
  if (draft_model)
    d = std::make_unique<ModelDrafter>(*draft_model, *m.target, pool, engine_cache_config(eo), 0,
                                       siblings, forward_pass);
  if (kind == DraftKind::Ngram) d = std::make_unique<NgramDrafter>(4, 1, 0.5, branches);
  if (kind == DraftKind::OtherLookup)
    d = std::make_unique<LookupFirstDrafter>(
        std::make_unique<ModelDrafter>(*m.other, *m.target, pool, engine_cache_config(eo)));
  if (kind == DraftKind::Suffix) {
    SuffixDrafterOptions o;
    o.branches = so.tree_extra > 0 ? 2 : 1;
    d = std::make_unique<SuffixDrafter>(o);
  }
  if (kind == DraftKind::OtherSuffixLookup)
    d = std::make_unique<LookupFirstDrafter>(
        std::make_unique<ModelDrafter>(*m.other, *m.target, pool, engine_cache_config(eo)),
        std::make_unique<SuffixDrafter>());
  Engine engine(*m.target, pool, eo, std::move(d));
  std::vector<int> ids;
  for (const auto& r : reqs) ids.push_back(engine.submit(r));
  engine.run();
  std::vector<RequestResult> out;
  for (int id : ids) out.push_back(*engine.take_result(id));
  return out;
}

Request greedy_request(std::vector<int> prompt, int n) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.max_tokens = n;
  r.params.ignore_eos = true;
  return r;
}

std::vector<Request> sampled_trials(const std::vector<int>& prompt, const SamplingParams& sp,
                                    int trials, uint64_t first_seed) {
  std::vector<Request> reqs;
  for (int i = 0; i < trials; ++i) {
    Request r;
    r.prompt = prompt;
    r.params.max_tokens = 4;
    r.params.ignore_eos = true;
    r.params.sampling = sp;
    r.params.sampling.seed = first_seed + i;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

std::vector<double> exact_joint(const Model& m, const std::vector<int>& prompt,
                                const SamplingParams& sp, const TokenConstraint* constraint) {
  ThreadPool pool(1);
  const int V = m.config().vocab_size;
  // The distribution after ctx, the constraint in the state its generated part leads to.
  auto dist = [&](const std::vector<int>& ctx) {
    auto logits = prompt_logits(m, pool, ctx);
    std::vector<float> last(logits.end() - V, logits.end());
    apply_repetition_penalty(last.data(), V, ctx.data(), static_cast<int>(ctx.size()), sp);
    if (constraint) {
      auto state = constraint->fork();
      for (size_t i = prompt.size(); i < ctx.size(); ++i) state->advance(ctx[i]);
      state->mask(last.data(), V);
    }
    SamplingDistribution d;
    d.compute(last.data(), V, sp);
    return std::vector<double>(d.probs().begin(), d.probs().end());
  };
  std::vector<double> joint(V * V * V);
  auto p1 = dist(prompt);
  for (int a = 0; a < V; ++a) {
    if (p1[a] == 0) continue;
    auto c1 = prompt;
    c1.push_back(a);
    auto p2 = dist(c1);
    for (int b = 0; b < V; ++b) {
      if (p2[b] == 0) continue;
      auto c2 = c1;
      c2.push_back(b);
      auto p3 = dist(c2);
      for (int c = 0; c < V; ++c) joint[(a * V + b) * V + c] = p1[a] * p2[b] * p3[c];
    }
  }
  return joint;
}

}  // namespace tandem::test
