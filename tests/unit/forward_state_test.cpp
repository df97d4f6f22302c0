// Forward passes allocate nothing: every buffer of the transformer and of its
// kernels is sized when the transformer is made. Counted by replacing the global
// allocation functions of this test program (support/alloc/counting_allocator.h);
// the count covers every thread.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "cache/contiguous_kv_cache.h"
#include "model/model.h"
#include "model/transformer.h"
#include "support/alloc/counting_allocator.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;

namespace {

ForwardBatch batch(int slot, const std::vector<int>& ids, int first, int n, bool all_logits) {
  ForwardBatch b;
  b.add_sequence(slot, ids.data() + first, n, first, all_logits, !all_logits);
  return b;
}

// Prefill, decode steps, a verify pass and a batch longer than a pass, on two
// threads, with the whole vocabulary and with output ranges.
void expect_no_allocation(const Model& m) {
  ThreadPool pool(2);
  Transformer tf(m, pool, 8);
  const int V = tf.vocab_size();
  ContiguousKVCache cache(tf.cache_shape(), 1, 64, DType::F16);
  const int slot = cache.allocate();
  const auto ids = test::pseudo_random_ids(40, V, 3);
  const ForwardBatch prefill = batch(slot, ids, 0, 6, false);
  const ForwardBatch decode = batch(slot, ids, 6, 1, false);
  const ForwardBatch verify = batch(slot, ids, 7, 6, true);
  const ForwardBatch longer = batch(slot, ids, 13, 20, true);  // three passes of 8
  std::vector<float> logits(20 * size_t(V));
  for (bool restricted : {false, true}) {
    if (restricted) tf.restrict_output({{0, 64}, {V - 16, V}});
    cache.truncate_to(slot, 0);
    const long before = test::allocations();
    for (const ForwardBatch* b : {&prefill, &decode, &verify, &longer})
      tf.forward(*b, cache, logits.data());
    EXPECT_EQ(test::allocations() - before, 0)
        << "allocations in forward passes" << (restricted ? " with output ranges" : "");
    EXPECT_EQ(cache.length(slot), 33);
  }
}

}  // namespace

TEST(ForwardState, CountingSeesAllocations) {
  const long before = test::allocations();
  std::vector<int> v(100);
  EXPECT_GT(test::allocations() - before, 0);
}

TEST(ForwardState, ForwardPassesAllocateNothing) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2})
    for (DType t : {DType::F16, DType::Q4_0, DType::Q4_K}) {
      test::SyntheticSpec spec;
      spec.arch = arch;
      spec.weight_type = t;
      spec.d_model = 256;  // K-quants need 256-wide rows
      spec.d_ff = 512;
      auto m = Model::load(test::write_synthetic_gguf(spec, test::temp_dir("alloc") + "/m.gguf"));
      SCOPED_TRACE(dtype_name(t));
      expect_no_allocation(*m);
    }
}
