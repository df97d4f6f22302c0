#include "cuda_model/device_weights.h"

#include "core/error.h"
#include "quant/quants.h"

#if defined(TANDEM_HAVE_CUDA)
#include "cuda/stream.h"
#endif

namespace tandem::cuda_model {
namespace {

constexpr size_t kAlign = 256;  // as the memory plan's regions and the weight planes

size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

}  // namespace

DeviceWeights::DeviceWeights(const Model& model) {
  const ModelWeights& w = model.weights();
  plan_matrix(w.tok_embd, &tok_embd_);
  tied_ = w.output.data == w.tok_embd.data;
  if (!tied_) plan_matrix(w.output, &output_);
  plan_vector(w.output_norm, &output_norm_);
  layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    DeviceLayer& D = layers_[l];
    plan_matrix(L.wq, &D.wq);
    plan_matrix(L.wk, &D.wk);
    plan_matrix(L.wv, &D.wv);
    plan_matrix(L.wo, &D.wo);
    plan_matrix(L.w_gate, &D.w_gate);
    plan_matrix(L.w_up, &D.w_up);
    plan_matrix(L.w_down, &D.w_down);
    plan_vector(L.attn_norm, &D.attn_norm);
    plan_vector(L.ffn_norm, &D.ffn_norm);
    if (!L.bq.empty()) {
      plan_vector(L.bq, &D.bq);
      plan_vector(L.bk, &D.bk);
      plan_vector(L.bv, &D.bv);
    }
  }
}

void DeviceWeights::plan_matrix(const TensorView& t, cuda::DeviceMatrix* out) {
  check(cuda::cuda_supports(t.type),
        "--device cuda: tensor {} has type {}, which the CUDA "
        "kernels do not read",
        t.name, dtype_name(t.type));
  Item it{&t, bytes_, true, cuda::plan_weight_layout(t.type, t.ne(0), t.ne(1)), out, nullptr};
  out->layout = it.layout;
  bytes_ = align_up(bytes_ + it.layout.total_bytes);
  items_.push_back(it);
}

void DeviceWeights::plan_vector(const TensorView& t, const float** out) {
  items_.push_back({&t, bytes_, false, {}, nullptr, out});
  bytes_ = align_up(bytes_ + sizeof(float) * static_cast<size_t>(t.numel()));
}

#if defined(TANDEM_HAVE_CUDA)
// One host staging buffer, reused tensor by tensor; each copy is synchronous.
void DeviceWeights::upload(uint8_t* region) {
  std::vector<uint8_t> host;
  for (const Item& it : items_) {
    const TensorView& t = *it.tensor;
    if (it.matrix) {
      host.assign(it.layout.total_bytes, 0);
      cuda::repack_weights(it.layout, t.data, host.data());
      it.matrix_out->data = region + it.offset;
    } else {
      host.resize(sizeof(float) * static_cast<size_t>(t.numel()));
      dequantize_row(t.type, t.data, reinterpret_cast<float*>(host.data()), t.numel());
      *it.vector_out = reinterpret_cast<const float*>(region + it.offset);
    }
    cuda::copy_to_device_sync(region + it.offset, host.data(), host.size());
  }
  if (tied_) output_ = tok_embd_;
}
#else
void DeviceWeights::upload(uint8_t*) { fail("--device cuda: this build has no CUDA kernels"); }
#endif

cuda::DeviceMatrix matrix_rows(const cuda::DeviceMatrix& m, int64_t begin, int64_t end) {
  check(0 <= begin && begin < end && end <= m.layout.n, "matrix rows [{}, {}) outside [0, {})",
        begin, end, m.layout.n);
  cuda::DeviceMatrix r = m;
  r.layout.n = end - begin;
  for (int p = 0; p < r.layout.n_planes; ++p)
    r.layout.plane_offset[p] +=
        static_cast<size_t>(begin * r.layout.blocks_per_row) * r.layout.fields[p].bytes;
  return r;
}

}  // namespace tandem::cuda_model
