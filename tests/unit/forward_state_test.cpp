// Forward passes allocate nothing: every buffer of the transformer and of its
// kernels is sized when the transformer is made. Counted by replacing the global
// allocation functions of this test program; the count covers every thread.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "cache/contiguous_kv_cache.h"
#include "model/model.h"
#include "model/transformer.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

namespace {
std::atomic<long> g_allocations{0};

void* counted_alloc(size_t size, size_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(align, (size + align - 1) / align * align);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t size) { return counted_alloc(size, alignof(std::max_align_t)); }
void* operator new(size_t size, std::align_val_t align) {
  return counted_alloc(size, static_cast<size_t>(align));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }

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
    const long before = g_allocations.load();
    for (const ForwardBatch* b : {&prefill, &decode, &verify, &longer})
      tf.forward(*b, cache, logits.data());
    EXPECT_EQ(g_allocations.load() - before, 0)
        << "allocations in forward passes" << (restricted ? " with output ranges" : "");
    EXPECT_EQ(cache.length(slot), 33);
  }
}

}  // namespace

TEST(ForwardState, CountingSeesAllocations) {
  const long before = g_allocations.load();
  std::vector<int> v(100);
  EXPECT_GT(g_allocations.load() - before, 0);
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
