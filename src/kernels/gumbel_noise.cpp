#include "kernels/gumbel_noise.h"

#include <cmath>

#include "kernels/cpu/target_kernels.h"

namespace tandem::kernels {
namespace {

uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

}  // namespace

std::array<uint32_t, 2> threefry2x32(uint32_t c0, uint32_t c1, uint32_t k0, uint32_t k1) {
  // Rotation constants and key parity of Threefry-2x32 (Salmon et al. 2011).
  static constexpr int kRotation[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  uint32_t x0 = c0 + ks[0], x1 = c1 + ks[1];
  for (int round = 0; round < 20; ++round) {
    x0 += x1;
    x1 = rotl(x1, kRotation[round % 8]) ^ x0;
    if (round % 4 == 3) {  // key injection after every four rounds
      const uint32_t inject = static_cast<uint32_t>(round / 4 + 1);
      x0 += ks[inject % 3];
      x1 += ks[(inject + 1) % 3] + inject;
    }
  }
  return {x0, x1};
}

float gumbel_noise(NoiseKey key, int token) {
  // Token t's word: word t & 1 of the block at counter (t / 2, position).
  const uint32_t t = static_cast<uint32_t>(token);
  const uint32_t word = threefry2x32(t >> 1, key.position, static_cast<uint32_t>(key.seed),
                                     static_cast<uint32_t>(key.seed >> 32))[t & 1];
  const float u = static_cast<float>((word >> 9) * 2 + 1) * 0x1p-24f;
  return -std::log(-std::log(u));
}

int gumbel_argmax(const float* x, const int* ids, int n, float offset, float scale, NoiseKey key,
                  int hint) {
  return cpu::best_target_kernels().gumbel_argmax(x, ids, n, offset, scale, key.seed, key.position,
                                                  hint);
}

}  // namespace tandem::kernels
