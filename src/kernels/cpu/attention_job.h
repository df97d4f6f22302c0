// One attention call as the SIMD attention kernel (attention_cpu.cpp) receives
// it, and the work sizes its scratch is built for.
#pragma once
#include "kernels/kernels.h"

namespace tandem::kernels::cpu {

constexpr int kAttentionTile = 16;  // query rows per job
constexpr int kKeyBlock = 32;       // cache positions per step of the online softmax

struct AttentionJob {
  const float* q;
  const int* pos;
  const KVSeqView* kv;
  const AttentionShape* shape;
  float* out;
  int n_q;
};

}  // namespace tandem::kernels::cpu
