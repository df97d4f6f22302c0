// Activations quantized to int8 on the fly, so that quantized weights meet them
// in integer dot products. Two layouts, both private to the CPU kernels:
//
// - Q8Acts (legacy weight types, GGML's Q8_0 idea): 32-element blocks, each with
//   its own float scale d, stored once per 4 elements (one per i32 lane of the dot
//   product) so kernels of any vector width can load scales lane-aligned; plus
//   s = d * sum(q) per block for the weights' offset/min terms.
// - Q8KActs (K-quants, GGML's Q8_K idea): 256-element blocks with one float scale
//   and the sum of q over every 16 elements, for the K-quants' sub-block mins.
//
// Rounding: q = nearest-even(x * 127 / max|x|) in [-127, 127]; all-zero blocks
// get d = 0 and q = 0. Rows are padded with zeros to kRowAlign elements so full
// vectors can run past K.
#pragma once
#include <cstdint>
#include <vector>

namespace tandem::kernels::cpu {

constexpr int kRowAlign = 64;  // elements; the widest vector holds 64 int8
constexpr int kMinAlign = 16;  // per-block arrays padded to a full float vector

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

struct Q8Acts {
  int M = 0;
  int64_t K = 0, Kp = 0;      // Kp: K rounded up to kRowAlign
  int64_t nbp = 0;            // per-row stride of s: K / 32 rounded up to kMinAlign
  std::vector<int8_t> q;      // M x Kp
  std::vector<float> d_lane;  // M x Kp / 4
  std::vector<float> s;       // M x nbp
  const int8_t* row_q(int m) const { return q.data() + m * Kp; }
  const float* row_d(int m) const { return d_lane.data() + m * (Kp / 4); }
  const float* row_s(int m) const { return s.data() + m * nbp; }
};

struct Q8KActs {
  int M = 0;
  int64_t K = 0;               // a multiple of 256
  std::vector<int8_t> q;       // M x K
  std::vector<float> d;        // M x K / 256
  std::vector<int16_t> bsum;   // M x K / 16
  const int8_t* row_q(int m) const { return q.data() + m * K; }
  const float* row_d(int m) const { return d.data() + m * (K / 256); }
  const int16_t* row_bsum(int m) const { return bsum.data() + m * (K / 16); }
};

// Quantize M rows of K floats (K a multiple of 32 / of 256).
void quantize_q8(const float* x, int M, int64_t K, Q8Acts& out);
void quantize_q8k(const float* x, int M, int64_t K, Q8KActs& out);

}  // namespace tandem::kernels::cpu
