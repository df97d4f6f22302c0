// Drafted trees verified in one forward pass (ForwardBatch::add_tree): every
// node's logits are the bits of the last position of a chain forward over the
// prefix and the node's path, in a fresh slot; after the runner moves an
// accepted path into chain positions (KVCache::move) and truncates the rest,
// the next step's logits are the bits of a cache that got the path as a chain.
// All comparisons are exact (memcmp): a node attends to the same keys in the
// same order as the chain's last position, only their addresses differ.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <tuple>

#include "cache/contiguous_kv_cache.h"
#include "cache/paged_kv_cache.h"
#include "core/error.h"
#include "model/model.h"
#include "model/transformer.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;

namespace {

// Tree shapes as add_tree takes them: parent[j] < j, or -1 for a child of the
// position before the tree.
std::vector<int> chain_tree(int n) {
  std::vector<int> p(n);
  for (int j = 0; j < n; ++j) p[j] = j - 1;
  return p;
}

std::vector<int> star_tree(int n) { return std::vector<int>(n, -1); }

// A spine (even indices) whose every node also has a leaf (the odd index after it).
std::vector<int> caterpillar_tree(int n) {
  std::vector<int> p(n);
  for (int j = 0; j < n; ++j) p[j] = j == 0 ? -1 : j % 2 == 1 ? j - 1 : j - 2;
  return p;
}

std::vector<int> random_tree(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> p(n);
  for (int j = 0; j < n; ++j) p[j] = std::uniform_int_distribution<int>(-1, j - 1)(rng);
  return p;
}

std::vector<std::vector<int>> tree_shapes() {
  return {chain_tree(8),       star_tree(6),         star_tree(17),
          caterpillar_tree(9), caterpillar_tree(20), random_tree(5, 1),
          random_tree(20, 2),  random_tree(20, 3),   random_tree(13, 4)};
}

// The nodes from the root down to node j.
std::vector<int> path_to(const std::vector<int>& parent, int j) {
  std::vector<int> path;
  for (; j >= 0; j = parent[j]) path.insert(path.begin(), j);
  return path;
}

// The last node of the greatest depth.
int deepest(const std::vector<int>& parent) {
  int best = 0;
  for (int j = 0; j < static_cast<int>(parent.size()); ++j)
    if (path_to(parent, j).size() >= path_to(parent, best).size()) best = j;
  return best;
}

std::string synthetic_model() {
  test::SyntheticSpec spec;
  spec.arch = Arch::Qwen2;  // with the Q, K and V biases
  spec.weight_type = DType::Q8_0;
  return test::write_synthetic_gguf(spec, test::temp_dir("tree") + "/m.gguf");
}

// Logits of the last of `ids`, run as one chain in a fresh slot.
std::vector<float> chain_logits(Transformer& tf, KVCache& cache, const std::vector<int>& ids) {
  const int slot = cache.allocate();
  EXPECT_GE(slot, 0);
  ForwardBatch b;
  b.add_sequence(slot, ids.data(), static_cast<int>(ids.size()), 0, false, true);
  std::vector<float> out(tf.vocab_size());
  tf.forward(b, cache, out.data());
  cache.free(slot);
  return out;
}

bool same_bits(const float* a, const std::vector<float>& b) {
  return std::memcmp(a, b.data(), b.size() * sizeof(float)) == 0;
}

// Prefix positions: with a tree of up to 20 nodes the positions cross a key
// block of the SIMD attention (32) and several paged blocks (16).
constexpr int kPrefix = 41;

// Verifies a tree after a prefix, as the runner does (the pending token, then the
// drafts), against chain forwards; then accepts the deepest path, moves it into
// chain positions and checks the next step.
void expect_tree_matches_chains(Transformer& tf, KVCache& cache, const std::vector<int>& parent,
                                uint32_t seed) {
  const int V = tf.vocab_size(), k = static_cast<int>(parent.size());
  auto prefix = test::pseudo_random_ids(kPrefix, V, seed);
  auto drafts = test::pseudo_random_ids(k, V, seed + 1000);
  const int slot = cache.allocate();
  ASSERT_GE(slot, 0);
  ForwardBatch b;
  b.add_sequence(slot, prefix.data(), kPrefix - 1, 0, false, false);
  tf.forward(b, cache, nullptr);
  b.clear();
  b.add_sequence(slot, &prefix[kPrefix - 1], 1, kPrefix - 1, false, true);
  b.add_tree(slot, drafts.data(), parent.data(), k, kPrefix, true);
  std::vector<float> got(size_t(k + 1) * V);
  tf.forward(b, cache, got.data());
  ASSERT_EQ(cache.length(slot), kPrefix + k);
  ASSERT_TRUE(same_bits(got.data(), chain_logits(tf, cache, prefix))) << "the pending token";
  for (int j = 0; j < k; ++j) {
    auto ids = prefix;
    const auto path = path_to(parent, j);
    for (int node : path) ids.push_back(drafts[node]);
    ASSERT_TRUE(same_bits(&got[size_t(j + 1) * V], chain_logits(tf, cache, ids)))
        << "node " << j << " at depth " << path.size() - 1 << " of a tree of " << k;
  }

  // Accept the deepest path: its nodes move to the chain's positions in depth
  // order, the rest is dropped, and decoding goes on after it.
  const auto path = path_to(parent, deepest(parent));
  const int accepted = static_cast<int>(path.size());
  for (int d = 0; d < accepted; ++d) cache.move(slot, kPrefix + path[d], kPrefix + d);
  cache.truncate_to(slot, kPrefix + accepted);
  const int next = (drafts[0] + 7) % V;
  b.clear();
  b.add_sequence(slot, &next, 1, kPrefix + accepted, false, true);
  std::vector<float> after(V);
  tf.forward(b, cache, after.data());
  auto ids = prefix;
  for (int node : path) ids.push_back(drafts[node]);
  ids.push_back(next);
  ASSERT_TRUE(same_bits(after.data(), chain_logits(tf, cache, ids)))
      << "the step after accepting " << accepted << " nodes of a tree of " << k;
  cache.free(slot);
}

struct TreeSetup {
  bool paged;
  DType cache_type;
  bool reference;  // the scalar reference kernels
  int max_tokens;  // 3: every tree is split across passes
};

std::unique_ptr<KVCache> make_cache(const TreeSetup& s, const KVCacheShape& shape) {
  if (s.paged) return std::make_unique<PagedKVCache>(shape, 2, 24, 16, s.cache_type);
  return std::make_unique<ContiguousKVCache>(shape, 2, 128, s.cache_type);
}

}  // namespace

class TreeForward : public ::testing::TestWithParam<std::tuple<bool, DType, bool, int>> {};

TEST_P(TreeForward, NodeLogitsAreThoseOfTheirPathsAsChains) {
  const TreeSetup s{std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()),
                    std::get<3>(GetParam())};
  auto m = Model::load(synthetic_model(), {.reference = s.reference});
  ThreadPool pool(2);
  Transformer tf(*m, pool, s.max_tokens);
  auto cache = make_cache(s, tf.cache_shape());
  uint32_t seed = 1;
  for (const auto& parent : tree_shapes()) {
    SCOPED_TRACE("tree of " + std::to_string(parent.size()) + " nodes, shape " +
                 std::to_string(seed));
    expect_tree_matches_chains(tf, *cache, parent, seed++);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Caches, TreeForward,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(DType::F16, DType::F32),
                                            ::testing::Bool(),
                                            ::testing::Values(Transformer::kDefaultMaxTokens, 3)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "paged_" : "contiguous_") +
                                  std::string(dtype_name(std::get<1>(info.param))) +
                                  (std::get<2>(info.param) ? "_reference" : "_simd") +
                                  (std::get<3>(info.param) == 3 ? "_passes_of_3" : "_one_pass");
                         });

// Two slots' trees in one batch, between plain sequences of other slots: each
// node's logits are still its path's.
TEST(TreeForwardBatch, TreesOfSeveralSlotsShareAPass) {
  auto m = Model::load(synthetic_model());
  ThreadPool pool(2);
  Transformer tf(*m, pool);
  const int V = tf.vocab_size();
  ContiguousKVCache cache(tf.cache_shape(), 4, 128);
  auto prefix = test::pseudo_random_ids(kPrefix, V, 5);
  auto drafts = test::pseudo_random_ids(9, V, 6);
  const auto star = star_tree(4), cat = caterpillar_tree(9);
  ForwardBatch b;
  for (int s = 0; s < 2; ++s) {
    ASSERT_EQ(cache.allocate(), s);
    b.add_sequence(s, prefix.data(), kPrefix, 0, false, false);
  }
  tf.forward(b, cache, nullptr);
  b.clear();
  b.add_tree(0, drafts.data(), star.data(), 4, kPrefix, true);     // rows 0..3
  b.add_sequence(1, drafts.data(), 3, kPrefix, true, false);       // rows 4..6
  b.add_tree(1, drafts.data(), cat.data(), 9, kPrefix + 3, true);  // rows 7..15
  std::vector<float> got(size_t(b.size()) * V);
  tf.forward(b, cache, got.data());
  for (int j = 0; j < 4; ++j) {
    auto ids = prefix;
    ids.push_back(drafts[j]);
    EXPECT_TRUE(same_bits(&got[size_t(j) * V], chain_logits(tf, cache, ids))) << "star node " << j;
  }
  for (int j = 0; j < 9; ++j) {
    auto ids = prefix;
    ids.insert(ids.end(), drafts.begin(), drafts.begin() + 3);
    for (int node : path_to(cat, j)) ids.push_back(drafts[node]);
    EXPECT_TRUE(same_bits(&got[size_t(7 + j) * V], chain_logits(tf, cache, ids)))
        << "caterpillar node " << j;
  }
}

TEST(TreeForwardBatch, RejectsBadTrees) {
  auto m = Model::load(synthetic_model());
  ThreadPool pool(1);
  Transformer tf(*m, pool);
  ContiguousKVCache cache(tf.cache_shape(), 1, 64);
  const int slot = cache.allocate();
  std::vector<float> out(size_t(8) * tf.vocab_size());
  const int ids[4] = {1, 2, 3, 4};
  ForwardBatch b;
  const int self_parent[4] = {-1, 1, 0, 1};
  EXPECT_NE(test::error_of([&] { b.add_tree(slot, ids, self_parent, 4, 0, true); }).find("parent"),
            std::string::npos);
  const int too_low[2] = {-1, -2};
  b.clear();
  EXPECT_THROW(b.add_tree(slot, ids, too_low, 2, 0, true), Error);

  const int parent[4] = {-1, 0, 0, 1};
  auto tree = [&] {
    ForwardBatch t;
    t.add_sequence(slot, ids, 2, 0, false, false);
    t.add_tree(slot, ids, parent, 4, 2, true);  // rows 2..5
    return t;
  };
  auto error = [&](const ForwardBatch& t) {
    return test::error_of([&] { tf.forward(t, cache, out.data()); });
  };
  b = tree();
  b.positions[4] += 1;  // logical position other than its parent's plus one
  EXPECT_NE(error(b).find("expected its parent's plus one"), std::string::npos) << error(b);
  b = tree();
  b.kv_positions[4] += 1;  // physical positions that skip one
  EXPECT_NE(error(b).find("physical position"), std::string::npos) << error(b);
  b = tree();
  b.parents[4] = 4;  // not an earlier token
  EXPECT_NE(error(b).find("not an earlier token"), std::string::npos) << error(b);
  b = tree();
  b.add_sequence(slot, ids, 1, 6, false, true);  // no parent after a tree: not a chain
  EXPECT_NE(error(b).find("holds a chain only up to position"), std::string::npos) << error(b);
  b = tree();
  b.parents.pop_back();
  EXPECT_NE(error(b).find("parents"), std::string::npos) << error(b);
  EXPECT_EQ(cache.length(slot), 0);
  b = tree();
  EXPECT_EQ(error(b), "");
  EXPECT_EQ(cache.length(slot), 6);
}

// move copies the bits of every layer's K and V row; a target in a shared
// prefix block of a paged cache, or a position past the length, is refused.
TEST(KVCacheMove, CopiesRowsAndRefusesSharedBlocks) {
  const KVCacheShape shape{2, 2, 16};
  PagedKVCache paged(shape, 2, 8, 16, DType::F16);
  ContiguousKVCache contiguous(shape, 1, 64, DType::F16);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> k(shape.row_elems()), v(shape.row_elems());
  for (KVCache* c : {static_cast<KVCache*>(&paged), static_cast<KVCache*>(&contiguous)}) {
    const int slot = c->allocate();
    ASSERT_TRUE(c->reserve(slot, 40));
    for (int l = 0; l < shape.n_layers; ++l)
      for (int p = 0; p < 40; ++p) {
        for (auto& e : k) e = dist(rng);
        for (auto& e : v) e = dist(rng);
        c->store(slot, l, p, k.data(), v.data());
      }
    c->set_length(slot, 40);
    c->move(slot, 38, 33);
    const size_t row = size_t(shape.row_elems()) * 2;
    for (int l = 0; l < shape.n_layers; ++l) {
      const auto view = c->view(slot, l);
      auto at = [&](const void* const* blocks, int p) {
        return static_cast<const uint8_t*>(blocks[p / view.block_size]) +
               size_t(p % view.block_size) * row;
      };
      EXPECT_EQ(0, std::memcmp(at(view.k_blocks, 33), at(view.k_blocks, 38), row));
      EXPECT_EQ(0, std::memcmp(at(view.v_blocks, 33), at(view.v_blocks, 38), row));
      EXPECT_NE(0, std::memcmp(at(view.k_blocks, 32), at(view.k_blocks, 38), row));
    }
    EXPECT_THROW(c->move(slot, 40, 33), Error);
    EXPECT_THROW(c->move(slot, 38, -1), Error);
  }
  std::vector<int> tokens(32);
  for (int i = 0; i < 32; ++i) tokens[i] = i;
  paged.publish_prefix(0, tokens);  // positions 0..31 now shared and read-only
  EXPECT_NE(test::error_of([&] { paged.move(0, 38, 20); }).find("shared prefix"),
            std::string::npos);
  paged.move(0, 38, 32);
}
