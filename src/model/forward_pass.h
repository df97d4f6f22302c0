// The seam between what is shared and what differs per device. The engine, the
// scheduler, the speculative round, the sampler and structured outputs see a
// model only through this interface: a forward pass turns a batch into logits
// rows, writing K/V into a cache that the pass itself made, so that it decides
// where that cache's data lives. The CPU pass (model/transformer.h) keeps the
// K/V in host memory; the CUDA pass (cuda_model/cuda_transformer.h) in device
// memory, with the same block tables and lengths on the host, so truncate_to
// and rollback stay length changes of the host tables.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache/kv_cache.h"
#include "cache/kv_cache_factory.h"
#include "core/thread_pool.h"
#include "model/forward_batch.h"
#include "model/model.h"

namespace tandem {

// Time a pass spent on one kind of work, summed over its steps.
struct PassProfileEntry {
  std::string name;
  double ms = 0.0;
  int64_t count = 0;  // intervals timed
};

class ForwardPass {
 public:
  virtual ~ForwardPass() = default;

  // Runs the batch through every layer, writing K/V into `cache` (one this pass
  // made with make_cache) and advancing each slot's length; writes
  // batch.logit_rows.size() rows of vocab_size logits to host memory `logits`.
  // A row's logits do not depend on the other rows of the batch (batch
  // invariance: what makes greedy speculation equal plain greedy decoding).
  virtual void forward(const ForwardBatch& batch, KVCache& cache, float* logits) = 0;

  virtual const Model& model() const = 0;
  int vocab_size() const { return model().config().vocab_size; }
  // Positions per pass; longer batches run in passes of this many.
  virtual int max_tokens() const = 0;
  virtual KVCacheShape cache_shape() const = 0;
  // A KV cache this pass can write and read, configured as `config`.
  virtual std::unique_ptr<KVCache> make_cache(const KVCacheConfig& config) = 0;
  // Compute logits only for token ids in these [begin, end) ranges; the others
  // get -infinity (Transformer::restrict_output says why). Empty: all.
  virtual void restrict_output(std::vector<std::pair<int, int>> ranges) = 0;

  // Where the time of the steps since clear_profile() went, by kind of work, for
  // a pass made to profile (the CUDA pass's kernels: CudaOptions::profile);
  // empty otherwise (the CPU kernels profile themselves: kernels::KernelProfile).
  virtual std::vector<PassProfileEntry> profile() const { return {}; }
  virtual void clear_profile() {}
};

// What a forward pass is made for: passes of up to max_tokens positions, and
// the KV cache its owner will ask it for (a device pass sizes its one device
// allocation by it).
struct ForwardPassSpec {
  int max_tokens = 512;
  KVCacheConfig kv;
};

// Makes the forward pass of a model; the front end chooses one per device
// (--device). Empty: the CPU transformer.
using ForwardPassFactory = std::function<std::unique_ptr<ForwardPass>(
    const Model& model, ThreadPool& pool, const ForwardPassSpec& spec)>;

// factory(model, pool, spec), or the CPU transformer when factory is empty.
std::unique_ptr<ForwardPass> make_forward_pass(const ForwardPassFactory& factory,
                                               const Model& model, ThreadPool& pool,
                                               const ForwardPassSpec& spec);

}  // namespace tandem
