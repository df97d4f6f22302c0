// Position-keyed noise for reproducible sampling: one Gumbel variable per
// (seed, position, token), a pure function of those three numbers, so that a
// position's draw depends on nothing else (not on the drafter, the batch, the
// thread count or which other positions were drawn before it).
//
// The generator is Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror, Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a counter-based
// generator, a keyed bijection of a 64-bit counter, built from 32-bit adds,
// rotations and xors only (so every SIMD target computes it lane by lane). Token
// t's noise comes from word t & 1 of the block at counter (t / 2, position), under
// the request's 64-bit seed as the key: one block serves two neighbouring tokens.
#pragma once
#include <array>
#include <cstdint>

namespace tandem::kernels {

// Which noise: the request's seed and the position (the index in its sequence of
// the token being chosen; positions are below 2^32).
struct NoiseKey {
  uint64_t seed = 0;
  uint32_t position = 0;
};

// One Threefry-2x32-20 block: the two 32-bit words for counter (c0, c1) under
// key (k0, k1).
std::array<uint32_t, 2> threefry2x32(uint32_t c0, uint32_t c1, uint32_t k0, uint32_t k1);

// The largest Gumbel value the noise can take, rounded up: tokens whose score
// before noise is this far below the best score so far cannot win.
constexpr float kGumbelNoiseBound = 17.0f;

// The Gumbel variable of `token` under `key`, computed in scalar code with
// std::log: the definition the SIMD kernel (gumbel_argmax) follows within float
// rounding. g = -log(-log(u)) with u from the token's Threefry word's top 23 bits
// as an odd multiple of 2^-24, so that u is never 0 or 1 and exact in a float (g
// lies in [-2.81, 16.64]).
float gumbel_noise(NoiseKey key, int token);

// The Gumbel-max choice over one row: among i in [0, n) the first i maximizing
//   (x[i] - offset) * scale + g(key, id(i)),   id(i) = ids ? ids[i] : i,
// or -1 when every x[i] is -infinity. ids, when given, must be ascending (so the
// first index is the lowest id). With x a row of logits, offset their maximum and
// scale 1 / temperature this draws from softmax(x / temperature) (the Gumbel-max
// trick). `hint` (or -1) is an index likely to win, the row's argmax: it is
// scored first, so that the rest of the row is skipped wherever it cannot reach
// it. Runs this CPU's best SIMD target; one call is one thread's work.
int gumbel_argmax(const float* x, const int* ids, int n, float offset, float scale, NoiseKey key,
                  int hint = -1);

}  // namespace tandem::kernels
