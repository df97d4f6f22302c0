// Kernels that time the kernels they wrap, for `tandem bench decode --profile`:
// where a forward pass's time goes per kernel kind (each matmul by the tensors
// it reads, attention, the elementwise kernels), per layer, and at what
// bandwidth each matmul streams its weights. Every call is forwarded to the
// wrapped kernels unchanged, so results are bit-identical; the timing costs two
// clock reads a call.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace tandem::kernels {

struct KernelProfile {
  struct Entry {
    double ms = 0;
    int64_t calls = 0;
    double weight_bytes = 0;  // matmuls: the weights their calls read
  };
  // By kind: "matmul attn_q+attn_k+attn_v" (tensor names without "blk.N." and
  // ".weight"), "attention", "rmsnorm", "rope", "swiglu", "add".
  std::map<std::string, Entry> by_kind;
  // By layer: a layer's time runs from its first matmul to the next layer's
  // (so the norm before a layer's Q/K/V counts towards the layer before).
  std::vector<double> layer_ms;
  double total_ms() const;
  void clear() { *this = {}; }
};

class ProfilingKernels final : public Kernels {
 public:
  ProfilingKernels(std::unique_ptr<Kernels> inner, ThreadPool& pool, const KernelLimits& limits);
  const char* name() const override { return inner_->name(); }
  KernelProfile* profile() override { return &profile_; }

  void rmsnorm(const float* x, const float* w, int n, float eps, float* out) override;
  void swiglu(const float* gate, const float* up, int n, float* out) override;
  void add_inplace(float* x, const float* b, int n) override;
  void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
            RopeStyle style) override;

 protected:
  void matmul_rows(const TensorView* const* Ws, int count, const float* x, int M, float* const* ys,
                   int64_t ldy) override;
  void attend_batch(const AttentionCall* calls, int n_calls, const AttentionShape& shape) override;

 private:
  void add(const std::string& kind, double ms, double weight_bytes = 0);
  std::unique_ptr<Kernels> inner_;
  KernelProfile profile_;
  int layer_ = -1;    // of the last matmul (-1: before the first layer)
  std::string kind_;  // scratch
};

}  // namespace tandem::kernels
