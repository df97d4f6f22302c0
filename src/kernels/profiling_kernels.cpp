#include "kernels/profiling_kernels.h"

#include <chrono>
#include <cstdlib>

namespace tandem::kernels {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// "blk.12.ffn_down.weight" -> layer 12, role "ffn_down"; "output.weight" -> -1, "output".
int layer_and_role(const std::string& name, std::string& role) {
  int layer = -1;
  size_t start = 0;
  if (name.rfind("blk.", 0) == 0) {
    const size_t dot = name.find('.', 4);
    if (dot != std::string::npos) {
      layer = std::atoi(name.c_str() + 4);
      start = dot + 1;
    }
  }
  size_t end = name.size();
  if (name.size() >= start + 7 && name.compare(name.size() - 7, 7, ".weight") == 0) end -= 7;
  role.assign(name, start, end - start);
  return layer;
}

}  // namespace

double KernelProfile::total_ms() const {
  double ms = 0;
  for (const auto& [kind, e] : by_kind) ms += e.ms;
  return ms;
}

ProfilingKernels::ProfilingKernels(std::unique_ptr<Kernels> inner, ThreadPool& pool,
                                   const KernelLimits& limits)
    : Kernels(pool, limits), inner_(std::move(inner)) {}

void ProfilingKernels::add(const std::string& kind, double ms, double weight_bytes) {
  KernelProfile::Entry& e = profile_.by_kind[kind];
  e.ms += ms;
  e.calls += 1;
  e.weight_bytes += weight_bytes;
  if (layer_ >= 0) {
    if (profile_.layer_ms.size() <= static_cast<size_t>(layer_))
      profile_.layer_ms.resize(layer_ + 1);
    profile_.layer_ms[layer_] += ms;
  }
}

void ProfilingKernels::matmul_rows(const TensorView* const* Ws, int count, const float* x, int M,
                                   float* const* ys, int64_t ldy) {
  const auto t0 = Clock::now();
  // Forwarded through the public calls (the wrapped object's protected ones are
  // not ours to call); both check again what was checked: cheap.
  if (ldy == 0)
    inner_->matmul_multi(Ws, count, x, M, ys);
  else
    for (int i = 0; i < count; ++i) inner_->matmul_strided(*Ws[i], x, M, ys[i], ldy);
  const double ms = ms_since(t0);
  kind_ = "matmul ";
  double bytes = 0;
  std::string role;
  for (int i = 0; i < count; ++i) {
    const int layer = layer_and_role(Ws[i]->name, role);
    if (i == 0) layer_ = layer;  // -1 past the last layer (the output matrix)
    kind_ += (i ? "+" : "") + role;
    bytes += static_cast<double>(Ws[i]->nbytes);
  }
  add(kind_, ms, bytes);
}

void ProfilingKernels::attend_batch(const AttentionCall* calls, int n_calls,
                                    const AttentionShape& shape) {
  const auto t0 = Clock::now();
  inner_->attention_batch(calls, n_calls, shape);
  add("attention", ms_since(t0));
}

void ProfilingKernels::rmsnorm(const float* x, const float* w, int n, float eps, float* out) {
  const auto t0 = Clock::now();
  inner_->rmsnorm(x, w, n, eps, out);
  add("rmsnorm", ms_since(t0));
}

void ProfilingKernels::swiglu(const float* gate, const float* up, int n, float* out) {
  const auto t0 = Clock::now();
  inner_->swiglu(gate, up, n, out);
  add("swiglu", ms_since(t0));
}

void ProfilingKernels::add_inplace(float* x, const float* b, int n) {
  const auto t0 = Clock::now();
  inner_->add_inplace(x, b, n);
  add("add", ms_since(t0));
}

void ProfilingKernels::rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                            RopeStyle style) {
  const auto t0 = Clock::now();
  inner_->rope(x, n_heads, head_dim, cos, sin, style);
  add("rope", ms_since(t0));
}

}  // namespace tandem::kernels
