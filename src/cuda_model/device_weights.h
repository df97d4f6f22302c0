// The model's weights in the device layout, within the weights region of the
// one device allocation: each matrix repacked (cuda/weight_layout.h) at its own
// 256-byte aligned offset, each norm weight and bias as F32 (as the CPU pass
// converts them). Planned first (sizes and offsets, pure host arithmetic), then
// uploaded once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/cuda_kernels.h"
#include "model/model.h"

namespace tandem::cuda_model {

struct DeviceLayer {
  cuda::DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  const float* attn_norm = nullptr;
  const float* ffn_norm = nullptr;
  const float* bq = nullptr;  // null when the model has no biases
  const float* bk = nullptr;
  const float* bv = nullptr;
};

class DeviceWeights {
 public:
  // Plans the layout of every tensor the forward pass reads. Throws
  // tandem::Error naming a tensor whose type the CUDA kernels do not read or
  // whose rows are not whole blocks.
  explicit DeviceWeights(const Model& model);
  DeviceWeights(const DeviceWeights&) = delete;  // its plan points into itself
  DeviceWeights& operator=(const DeviceWeights&) = delete;

  size_t bytes() const { return bytes_; }  // of the weights region
  // Repacks every tensor on the host and copies it to `region` (bytes() of
  // device memory); the matrices and vectors then point into it.
  void upload(uint8_t* region);

  const cuda::DeviceMatrix& tok_embd() const { return tok_embd_; }
  const cuda::DeviceMatrix& output() const { return output_; }
  const float* output_norm() const { return output_norm_; }
  const DeviceLayer& layer(int l) const { return layers_[l]; }

 private:
  // Where one tensor goes: a matrix (layout) or a vector of floats.
  struct Item {
    const TensorView* tensor;
    size_t offset;
    bool matrix;
    cuda::WeightLayout layout;
    cuda::DeviceMatrix* matrix_out;
    const float** vector_out;
  };
  void plan_matrix(const TensorView& t, cuda::DeviceMatrix* out);
  void plan_vector(const TensorView& t, const float** out);

  std::vector<Item> items_;
  size_t bytes_ = 0;
  cuda::DeviceMatrix tok_embd_, output_;
  const float* output_norm_ = nullptr;
  std::vector<DeviceLayer> layers_;
  bool tied_ = false;  // output is tok_embd: uploaded once
};

// Rows [begin, end) of a repacked matrix, as a matrix of its own: the same
// planes, each starting `begin` rows later (the restricted LM head of a draft
// model). Pure host arithmetic.
cuda::DeviceMatrix matrix_rows(const cuda::DeviceMatrix& m, int64_t begin, int64_t end);

}  // namespace tandem::cuda_model
