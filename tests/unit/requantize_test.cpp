// Matrices requantized at load (model/requantize.h): which are, what they become,
// and a model loaded with them.
#include "model/requantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "quant/quants.h"
#include "support/paths.h"
#include "support/random_weights.h"
#include "support/synthetic_model.h"

using namespace tandem;
using namespace tandem::test;

TEST(Requantize, TakesOnlyMatricesStoredInMoreBytesWithWholeBlocks) {
  for (DType t :
       {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q6_K, DType::Q5_0, DType::Q4_1})
    EXPECT_TRUE(requantizes(random_matrix(t, 256, 2, 1).view(), DType::Q4_0)) << dtype_name(t);
  // As small already (Q4_K's 4.5 bits a weight are Q4_0's), or the same type.
  for (DType t : {DType::Q4_K, DType::Q4_0})
    EXPECT_FALSE(requantizes(random_matrix(t, 256, 2, 1).view(), DType::Q4_0)) << dtype_name(t);
  // Rows of 48 are not whole 32-element blocks.
  EXPECT_FALSE(requantizes(random_matrix(DType::F32, 48, 2, 1).view(), DType::Q4_0));
  TensorView bias = random_matrix(DType::F32, 64, 1, 1).view();
  bias.shape = {64};  // a vector is not a matrix
  EXPECT_FALSE(requantizes(bias, DType::Q4_0));
  ThreadPool pool(1);
  EXPECT_THROW(requantize(random_matrix(DType::Q4_K, 256, 2, 1).view(), DType::Q4_0, pool), Error);
}

TEST(Requantize, RoundsEachWeightOntoItsQ4_0BlockGrid) {
  const int64_t K = 256, N = 40;
  for (DType t : {DType::F32, DType::Q8_0, DType::Q6_K, DType::Q5_0}) {
    // Row 0 has an all-zero block, row 1 an outlier (random_weights.h).
    const RandomMatrix m = random_matrix(t, K, N, 7);
    ThreadPool one(1), two(2);
    const AlignedVector<uint8_t> q = requantize(m.view(), DType::Q4_0, one);
    ASSERT_EQ(q.size(), dtype_row_bytes(DType::Q4_0, K) * N);
    // Rows are independent: the threads that take them do not change a byte.
    EXPECT_TRUE(q == requantize(m.view(), DType::Q4_0, two)) << dtype_name(t);
    std::vector<float> back(K);
    for (int64_t n = 0; n < N; ++n) {
      dequantize_row(DType::Q4_0, q.data() + n * dtype_row_bytes(DType::Q4_0, K), back.data(), K);
      for (int64_t b = 0; b < K; b += 32) {
        // Q4_0 steps by d = amax / 8 (fp16) over a block, levels -8..7 with the
        // largest weight at -8: rounding is off by at most half a step, and a
        // weight of the other sign near amax is clamped to 7 steps, one step off.
        // The tolerance adds the fp16 rounding of d (2^-11 relative, times the 8
        // steps of the largest level).
        float amax = 0;
        for (int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(m.deq[n * K + i]));
        const float bound = amax / 8 * (1 + 1e-3f) + amax * 8 * 0x1p-11f;
        for (int64_t i = b; i < b + 32; ++i)
          ASSERT_LE(std::fabs(back[i] - m.deq[n * K + i]), bound)
              << dtype_name(t) << " row " << n << " element " << i;
      }
    }
  }
}

TEST(Requantize, ParsesTheOptionAndNamesABadValue) {
  EXPECT_FALSE(parse_requantization("none").has_value());
  ASSERT_TRUE(parse_requantization("q4_0").has_value());
  EXPECT_EQ(parse_requantization("q4_0")->type, DType::Q4_0);
  try {
    parse_requantization("q3");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q3'"), std::string::npos) << e.what();
  }
}

TEST(Requantize, AModelLoadsItsMatricesAsQ4_0) {
  SyntheticSpec s;
  s.weight_type = DType::Q8_0;
  const std::string path = write_synthetic_gguf(s, temp_dir("requant") + "/m.gguf");
  const auto plain = Model::load(path);
  const auto q4 = Model::load(path, {}, Requantization{});
  EXPECT_EQ(plain->requantized().matrices, 0);
  const int matrices = 7 * s.n_layers + 1;  // q, k, v, o, gate, up, down; the output
  EXPECT_EQ(q4->requantized().matrices, matrices);
  EXPECT_LT(q4->requantized().bytes, q4->requantized().file_bytes);
  for (const auto& L : q4->weights().layers)
    for (const TensorView* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      EXPECT_EQ(t->type, DType::Q4_0) << t->name;
  EXPECT_EQ(q4->weights().output.type, DType::Q4_0);
  EXPECT_EQ(q4->weights().tok_embd.type, DType::Q8_0) << "the embedding lookup is not a matmul";
  EXPECT_LT(q4->weight_bytes_per_token(), plain->weight_bytes_per_token());
  // A model already in 4.5 bits a weight has nothing to requantize.
  s.weight_type = DType::Q4_0;
  const std::string small = write_synthetic_gguf(s, temp_dir("requant") + "/q4.gguf");
  EXPECT_EQ(Model::load(small, {}, Requantization{})->requantized().matrices, 0);
}
